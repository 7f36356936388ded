#!/usr/bin/env bash
# End-to-end tests of the web dashboard (web/) in headless Chromium against the real bridge and a
# real mosquitto, both started by the tests on free loopback ports and stopped at the end.
#
# Needs the bridge built (`swift build`; BRIDGE=/path/to/smarthome-bridge overrides
# .build/debug/smarthome-bridge) and Debian's chromium, chromium-driver, python3-selenium,
# mosquitto and mosquitto-clients. Screenshots and measurements: Tests/browser/artifacts/.
# Arguments pick tests by name (e.g. `run.sh alarms`). Prints `N passed, N failed` last.
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-/usr/bin/python3}
BRIDGE=${BRIDGE:-.build/debug/smarthome-bridge}
if [ ! -x "$BRIDGE" ]; then
    echo "Tests/browser: $BRIDGE not found; build it first (swift build)" >&2
    echo "0 passed, 1 failed"
    exit 1
fi
export BRIDGE=$(realpath "$BRIDGE")
for tool in chromium chromedriver mosquitto_pub mosquitto_sub; do
    if ! command -v "$tool" >/dev/null && [ ! -x "/usr/bin/$tool" ]; then
        echo "Tests/browser: $tool is missing (apt-get install chromium chromium-driver python3-selenium mosquitto mosquitto-clients)" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
done
export PYTHONDONTWRITEBYTECODE=1
exec "$PYTHON" Tests/browser/test_dashboard.py "$@"
