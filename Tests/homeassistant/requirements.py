"""Prints, one a line, the PyPI requirements of the integrations `hass --skip-pip` sets up.

    python requirements.py <homeassistant wheel or package dir> [extra domain ...]

The set is HA's own always-loaded integrations (CORE_INTEGRATIONS and DEFAULT_INTEGRATIONS of
homeassistant/bootstrap.py, plus logger and system_log), the extra domains named on the command
line, the entity platforms that any of these forwards its config entry to (the PLATFORMS list of
its const.py or __init__.py: mqtt sets up camera, image, ... whatever it discovers), and every
integration those depend on, each read from its manifest.json. Only the files are read, from the
wheel or an installed package: homeassistant itself need not be installed yet.
"""

import ast
import json
import pathlib
import sys
import zipfile


class Source:
    """homeassistant/'s files, from a wheel or a directory."""

    def __init__(self, path: str):
        self.zip = zipfile.ZipFile(path) if path.endswith(".whl") else None
        self.dir = pathlib.Path(path)

    def read(self, relative: str) -> str | None:
        if self.zip is not None:
            try:
                return self.zip.read("homeassistant/" + relative).decode()
            except KeyError:
                return None
        path = self.dir / relative
        return path.read_text() if path.exists() else None


def bootstrap_sets(text: str) -> set[str]:
    wanted = {"CORE_INTEGRATIONS", "DEFAULT_INTEGRATIONS"}
    domains: set[str] = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in wanted for t in node.targets
        ):
            for elt in getattr(node.value, "elts", []):
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                    domains.add(elt.value)
    return domains


def forwarded_platforms(source: Source, domain: str) -> set[str]:
    """Platform.X names of a top-level PLATFORMS list in const.py or __init__.py."""
    platforms: set[str] = set()
    for name in ("const.py", "__init__.py"):
        text = source.read(f"components/{domain}/{name}")
        if text is None:
            continue
        for node in ast.parse(text).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == "PLATFORMS" for t in targets) and node.value is not None:
                for elt in getattr(node.value, "elts", []):
                    if isinstance(elt, ast.Attribute) and isinstance(elt.value, ast.Name) and elt.value.id == "Platform":
                        platforms.add(elt.attr.lower())
    return platforms


def main() -> None:
    source = Source(sys.argv[1])
    named = set(sys.argv[2:])
    for domain in sorted(named):
        named |= forwarded_platforms(source, domain)
    todo = list(bootstrap_sets(source.read("bootstrap.py") or "") | {"logger", "system_log"} | named)
    seen: set[str] = set()
    requirements: dict[str, None] = {}
    while todo:
        domain = todo.pop()
        if domain in seen:
            continue
        seen.add(domain)
        manifest = source.read(f"components/{domain}/manifest.json")
        if manifest is None:
            print(f"requirements.py: no integration {domain}", file=sys.stderr)
            continue
        data = json.loads(manifest)
        for requirement in data.get("requirements", []):
            requirements[requirement] = None
        todo.extend(data.get("dependencies", []))
    for requirement in sorted(requirements):
        print(requirement)


if __name__ == "__main__":
    main()
