#!/usr/bin/env bash
# The real-Home-Assistant end-to-end tests: builds (or reuses) the HA virtualenv, then runs
# test_homeassistant.py against .build/debug/smarthome-bridge (or $BRIDGE), all on loopback.
#
#   Tests/homeassistant/run.sh [-k SUBSTRING]
#
# HA_VENV (default .build/ha-venv) is reused while it works; CI=true builds it fresh. The whole run
# is bounded by HA_TEST_TIMEOUT seconds (default 900) and the venv set-up by HA_SETUP_TIMEOUT
# (default 900). The last line is `N passed, N failed`; the exit status is non-zero on failure.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
export HA_VENV="${HA_VENV:-$ROOT/.build/ha-venv}"
export BRIDGE="${BRIDGE:-$ROOT/.build/debug/smarthome-bridge}"
TESTS=14   # counted as failed when the run cannot start

fail() {
    echo "run.sh: $*" >&2
    echo "0 passed, $TESTS failed"
    exit 1
}

for tool in /usr/sbin/mosquitto mosquitto_sub mosquitto_pub python3; do
    command -v "$tool" >/dev/null || fail "$tool missing (apt-get install mosquitto mosquitto-clients)"
done

if [ "${CI:-}" = true ] && [ -z "${HA_VENV_REUSE:-}" ]; then
    rm -rf "$HA_VENV"   # CI builds it fresh
fi
t0=$(date +%s)
timeout -k 10 "${HA_SETUP_TIMEOUT:-900}" "$HERE/setup_venv.sh" "$HA_VENV" || fail "setup_venv.sh failed"
echo "run.sh: venv ready in $(( $(date +%s) - t0 ))s"

if [ ! -x "$BRIDGE" ]; then
    echo "run.sh: $BRIDGE missing: swift build --product smarthome-bridge"
    PATH="/opt/swift/usr/bin:$PATH" swift build --product smarthome-bridge || fail "swift build failed"
fi

t1=$(date +%s)
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# The test stops everything it starts, also on timeout's SIGTERM (exit 124, reported by the test
# itself); should it be SIGKILLed 15 s later, its children die with it (setpriv --pdeathsig).
timeout -k 15 "${HA_TEST_TIMEOUT:-900}" python3 -u "$HERE/test_homeassistant.py" "$@" 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
echo "run.sh: tests took $(( $(date +%s) - t1 ))s, $(( $(date +%s) - t0 ))s with the venv set-up"
[ "$status" = 137 ] && fail "the tests were killed at the ${HA_TEST_TIMEOUT:-900}s limit"
summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)"
[ -n "$summary" ] || fail "the tests ended (status $status) without a summary"
[ "$status" = 0 ] || [[ "$summary" != *" 0 failed" ]] || fail "the tests exited with status $status"
echo "$summary"
exit "$status"
