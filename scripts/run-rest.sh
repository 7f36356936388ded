#!/usr/bin/env bash
# REST mode end to end (README "Polling an existing backend"): a mosquitto of its own, an upstream
# that serves the seed routes (this bridge in simulated mode with legacy routes on, base topic
# "upstream", Home Assistant discovery off), and a second bridge in the foreground that polls it
# (topics under "smarthome" on the same broker). The broker belongs to this script, not to either
# bridge, so stopping the upstream shows rooms going offline while the polling bridge keeps its broker.
#
# Ports: SMARTHOME_HTTP_PORT (the polling bridge, 8080), REST_UPSTREAM_PORT (8081), REST_MQTT_PORT
# (1883; when taken, the next free one up to 100 above it).
set -euo pipefail
cd "$(dirname "$0")/.."
BRIDGE=${BRIDGE:-.build/debug/smarthome-bridge}
RUN=${RUN_DIR:-data/run-rest}
HTTP_PORT=${SMARTHOME_HTTP_PORT:-8080}
UPSTREAM_PORT=${REST_UPSTREAM_PORT:-8081}
MQTT_PORT=${REST_MQTT_PORT:-1883}
mkdir -p "$RUN"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for port in "$HTTP_PORT" "$UPSTREAM_PORT"; do
    if listening "$port"; then
        echo "run-rest: port $port is taken (SMARTHOME_HTTP_PORT and REST_UPSTREAM_PORT choose others)" >&2
        exit 1
    fi
done
wanted=$MQTT_PORT
while listening "$MQTT_PORT"; do
    MQTT_PORT=$((MQTT_PORT + 1))
    if [ "$MQTT_PORT" -gt $((wanted + 100)) ]; then
        echo "run-rest: no free MQTT port from $wanted to $((wanted + 100))" >&2
        exit 1
    fi
done

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
# Readable by the mosquitto user, to which mosquitto started as root drops.
chmod 755 "$RUN"
printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\n' "$MQTT_PORT" \
    >"$RUN/mosquitto.conf"
chmod 644 "$RUN/mosquitto.conf"
# In a session of their own, the broker and the upstream miss the terminal's Ctrl-C: the polling bridge
# stops first and publishes its offline state, then the trap stops them.
setsid "$MOSQUITTO" -c "$RUN/mosquitto.conf" >"$RUN/mosquitto.log" 2>&1 &
broker_pid=$!
pids+=("$broker_pid")
for _ in $(seq 100); do
    listening "$MQTT_PORT" && break
    kill -0 "$broker_pid" 2>/dev/null || { cat "$RUN/mosquitto.log"; exit 1; }
    sleep 0.1
done
broker=mqtt://127.0.0.1:$MQTT_PORT

SMARTHOME_HTTP_PORT=$UPSTREAM_PORT SMARTHOME_MQTT_URL="$broker" SMARTHOME_MQTT_BASE_TOPIC=upstream \
SMARTHOME_SOURCE_KIND=simulated SMARTHOME_HTTP_LEGACY_ROUTES=true SMARTHOME_HOMEASSISTANT_DISCOVERY=false \
SMARTHOME_STORAGE_PATH="$RUN/upstream.sqlite" SMARTHOME_MQTT_CLIENT_ID=smarthome-upstream \
    setsid "$BRIDGE" --config config/bridge.yaml >"$RUN/upstream.log" 2>&1 &
upstream_pid=$!
pids+=("$upstream_pid")
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$UPSTREAM_PORT/healthz" >/dev/null 2>&1 && break
    kill -0 "$upstream_pid" 2>/dev/null || { cat "$RUN/upstream.log"; exit 1; }
    sleep 0.1
done

echo "broker:   $broker (log: $RUN/mosquitto.log)"
echo "upstream: http://127.0.0.1:$UPSTREAM_PORT, topics upstream/# (log: $RUN/upstream.log)"
echo "polling bridge: http://127.0.0.1:$HTTP_PORT, topics smarthome/#"
echo "watch:    mosquitto_sub -p $MQTT_PORT -v -t 'smarthome/+/+/availability'"
echo "stop the upstream to see rooms go offline after 3 failed polls: kill $upstream_pid"

SMARTHOME_HTTP_PORT=$HTTP_PORT SMARTHOME_MQTT_URL="$broker" SMARTHOME_SOURCE_KIND=rest \
SMARTHOME_SOURCE_BASE_URL="http://127.0.0.1:$UPSTREAM_PORT" SMARTHOME_STORAGE_PATH="$RUN/bridge.sqlite" \
    "$BRIDGE" --config config/bridge.yaml
