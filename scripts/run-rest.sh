#!/usr/bin/env bash
# REST mode end to end: an upstream that serves the seed routes (this bridge in simulated mode with
# legacy routes on, on port 8081 with its own embedded broker on 1883 and base topic "upstream"),
# and a second bridge that polls it (port 8080, topics under "smarthome" on an embedded broker of
# its own, on the next free port: an embedded broker admits only its own bridge and local account).
set -euo pipefail
cd "$(dirname "$0")/.."
BRIDGE=${BRIDGE:-.build/debug/smarthome-bridge}
RUN=${RUN_DIR:-data/run-rest}
mkdir -p "$RUN"

SMARTHOME_HTTP_PORT=8081 SMARTHOME_MQTT_BASE_TOPIC=upstream SMARTHOME_HTTP_LEGACY_ROUTES=true \
SMARTHOME_STORAGE_PATH="$RUN/upstream.sqlite" SMARTHOME_MQTT_CLIENT_ID=smarthome-upstream \
    "$BRIDGE" --config config/bridge.yaml >"$RUN/upstream.log" 2>&1 &
upstream=$!
trap 'kill $upstream 2>/dev/null; wait $upstream 2>/dev/null || true' EXIT

for _ in $(seq 100); do
    curl -fsS http://127.0.0.1:8081/healthz >/dev/null 2>&1 && break
    kill -0 $upstream 2>/dev/null || { cat "$RUN/upstream.log"; exit 1; }
    sleep 0.1
done
broker=$(grep -o 'listening=mqtt://[0-9.:]*' "$RUN/upstream.log" | head -n 1 | cut -d= -f2)
echo "upstream: http://127.0.0.1:8081 (log: $RUN/upstream.log), broker: $broker"
echo "  watch: $(grep -o 'watch with mosquitto_sub.*' "$RUN/upstream.log" | head -n 1 | cut -d' ' -f3-)"
echo "polling bridge: http://127.0.0.1:8080, its broker and the command to watch it in its log below"

SMARTHOME_SOURCE_KIND=rest SMARTHOME_SOURCE_BASE_URL=http://127.0.0.1:8081 \
SMARTHOME_STORAGE_PATH="$RUN/bridge.sqlite" \
    "$BRIDGE" --config config/bridge.yaml
