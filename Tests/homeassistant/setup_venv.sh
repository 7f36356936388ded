#!/usr/bin/env bash
# Creates the virtualenv the real-Home-Assistant tests run `hass` from, or reuses it when it is
# already there and working.
#
#   Tests/homeassistant/setup_venv.sh [VENV]      (default: $HA_VENV or .build/ha-venv)
#
# Home Assistant 2024.3.3 is the newest release that runs on Python 3.11 (later ones need 3.12).
# It is installed with HA's own package constraints (homeassistant/package_constraints.txt, in the
# wheel), in two steps:
#   1. homeassistant's wheel alone (pip download --no-deps), only to read its constraints file and
#      the manifests of the integrations `hass --skip-pip` sets up for the tests'
#      configuration.yaml: HA's default integrations (frontend, person, backup, hardware, ...),
#      the ones the test config names, mqtt and the entity platforms it forwards to, each with its
#      dependencies; requirements.py lists their PyPI requirements (paho-mqtt==1.6.1, ...);
#   2. that wheel, its dependencies and those requirements in one pip install, pinned by HA's
#      constraints plus constraints.txt (our pins for packages HA leaves open and whose later
#      releases break it), so that each package is downloaded once and resolved together.
# A stamp records what was installed: a venv whose stamp matches and whose imports work is reused.
set -euo pipefail

HA_VERSION="${HA_VERSION:-2024.3.3}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${1:-${HA_VENV:-$ROOT/.build/ha-venv}}"
PYTHON="${HA_PYTHON:-python3}"
STAMP="$VENV/.smarthome-ha-stamp"
# Integrations the tests load on top of HA's defaults (see test_homeassistant.py's config), and
# recorder, which is not set up but which analytics (a dependency of onboarding) imports.
EXTRA_DOMAINS="http api auth config onboarding logger mqtt light sensor binary_sensor recorder"
EXTRA_CONSTRAINTS="$HERE/constraints.txt"
WANT_STAMP="homeassistant==$HA_VERSION domains=$EXTRA_DOMAINS $(cat "$HERE/requirements.py" "$EXTRA_CONSTRAINTS" | cksum | cut -d' ' -f1)"

works() {
    [ -x "$VENV/bin/hass" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT_STAMP" ] &&
        "$VENV/bin/python" - "$HA_VERSION" <<'PY' >/dev/null 2>&1
import sys
from homeassistant.const import __version__
assert __version__ == sys.argv[1], __version__
import paho.mqtt.client, janus, PIL, hass_frontend, psutil_home_assistant, securetar, sqlalchemy  # noqa: F401
import homeassistant.components.mqtt, homeassistant.components.frontend, homeassistant.components.analytics  # noqa: F401
import homeassistant.components.camera, turbojpeg  # noqa: F401  (mqtt sets up its camera platform)
import hass_nabucasa  # noqa: F401  (imported by http's forwarded middleware on every request)
PY
}

if works; then
    echo "setup_venv: reusing $VENV (homeassistant $HA_VERSION)"
    exit 0
fi

start=$(date +%s)
step() { echo "setup_venv: [$(( $(date +%s) - start ))s] $*"; }
step "building $VENV with homeassistant==$HA_VERSION ($("$PYTHON" --version 2>&1))"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
PIPOPTS=(--disable-pip-version-check --no-input --progress-bar off -q)
WHEELS="$VENV/.wheel"

step "1/2 homeassistant==$HA_VERSION's wheel, for its package_constraints.txt and manifests"
"$VENV/bin/pip" download "${PIPOPTS[@]}" --no-deps --only-binary :all: -d "$WHEELS" "homeassistant==$HA_VERSION"
WHEEL="$(ls "$WHEELS"/homeassistant-"$HA_VERSION"-*.whl)"
"$VENV/bin/python" -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("homeassistant/package_constraints.txt").decode())' \
    "$WHEEL" >"$WHEELS/package_constraints.txt"
# shellcheck disable=SC2086
mapfile -t REQS < <("$VENV/bin/python" "$HERE/requirements.py" "$WHEEL" $EXTRA_DOMAINS)
[ "${#REQS[@]}" -gt 0 ] || { echo "setup_venv: requirements.py found no requirements" >&2; exit 1; }

step "2/2 homeassistant, its dependencies and ${REQS[*]}"
"$VENV/bin/pip" install "${PIPOPTS[@]}" -c "$WHEELS/package_constraints.txt" -c "$EXTRA_CONSTRAINTS" "$WHEEL" "${REQS[@]}"
rm -rf "$WHEELS"

echo "$WANT_STAMP" >"$STAMP"
if ! works; then
    echo "setup_venv: the venv at $VENV does not import what hass needs" >&2
    exit 1
fi
step "done, $(du -sh "$VENV" | cut -f1)"
