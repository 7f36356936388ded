#!/usr/bin/env bash
# Homie 5 end-to-end: the built bridge with homie.enabled on a private mosquitto, checked by a
# Homie 5 controller from PyPI (ebus-sdk's Controller) and by test_homie.py's own checks of the
# convention's MUST rules. The virtualenv (.build/homie-venv, HOMIE_VENV moves it) is reused
# while ebus_sdk imports from it.
#
#   Tests/homie/run.sh
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${HOMIE_VENV:-$ROOT/.build/homie-venv}"
if ! "$VENV/bin/python" -c 'import ebus_sdk, paho.mqtt.client' 2>/dev/null; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --disable-pip-version-check -q -r "$HERE/requirements.txt"
fi
export BRIDGE="${BRIDGE:-$ROOT/.build/debug/smarthome-bridge}"
exec timeout -k 10 "${HOMIE_TEST_TIMEOUT:-300}" "$VENV/bin/python" -u "$HERE/test_homie.py"
