#!/usr/bin/env python3
"""REST mode at scale (README, "Polling an existing backend (REST mode)"): 1,000 rooms polled from an upstream that answers every request
after 50 ms. Measures the achieved poll interval per room, the bridge's CPU and RSS.

    python3 bench/rest_poll.py [--rooms 1000] [--latency 0.05] [--interval 5] [--concurrency 16] [--seconds 30]

Starts its own mosquitto and upstream on free loopback ports and the bridge binary given by BRIDGE
(default .build/release/smarthome-bridge, else .build/debug/smarthome-bridge), through
Tests/support/bridgetest.py.
"""
import argparse, http.server, json, os, re, shutil, statistics, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Tests", "support"))
import bridgetest  # noqa: E402  (Tests/support/bridgetest.py: ports, processes, mosquitto, the bridge)
from bridgetest import free_port  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rooms", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()

    bridge = os.environ.get("BRIDGE") or next(
        p for p in (f"{ROOT}/.build/release/smarthome-bridge", f"{ROOT}/.build/debug/smarthome-bridge") if os.path.exists(p))
    work = tempfile.mkdtemp(prefix="rest-bench-")
    polls = {}
    lock = threading.Lock()
    body = json.dumps({"SensorNames": ["Temperature", "Humidity", "Lights", "Movement"],
                       "SensorIcon": ["temperature", "humidity", "Off", "Not-Detected"],
                       "SensorValues": ["25.5", "55.0", "Off", "Not-Detected"]}).encode()

    class Upstream(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            time.sleep(args.latency)
            with lock:
                polls.setdefault(self.path, []).append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Upstream)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, daemon=True).start()

    demo = open(f"{ROOT}/config/bridge.yaml").read()
    hash_ = re.search(r'password_hash: "([^"]+)"', demo).group(1)
    users, per_user = [], 8
    for u in range((args.rooms + per_user - 1) // per_user):
        rooms = [f"Room{r}" for r in range(min(per_user, args.rooms - u * per_user))]
        users.append(f'  - id: "u{u}"\n    username: user{u}\n    password_hash: "{hash_}"\n    rooms: [{", ".join(rooms)}]\n')
    config = f"{work}/bridge.yaml"
    open(config, "w").write("homeassistant:\n  discovery: false\nusers:\n" + "".join(users))

    broker = bridgetest.Broker(f"{work}/mosquitto", extra="set_tcp_nodelay true\n")
    process = bridgetest.Bridge(f"{work}/bridge", broker, config, binary=bridge, env={
        "SMARTHOME_SOURCE_KIND": "rest", "SMARTHOME_SOURCE_BASE_URL": f"http://127.0.0.1:{upstream.server_address[1]}",
        "SMARTHOME_SOURCE_INTERVAL": str(args.interval), "SMARTHOME_SOURCE_CONCURRENCY": str(args.concurrency),
        "SMARTHOME_SOURCE_TIMEOUT": "2", "SMARTHOME_LOG_LEVEL": "warning"})
    try:
        process.start()
        time.sleep(args.interval + 2)  # warm up: every room polled at least once

        def cpu():
            fields = open(f"/proc/{process.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        start, cpu0 = time.monotonic(), cpu()
        time.sleep(args.seconds)
        end, cpu1 = time.monotonic(), cpu()
        rss = next(int(l.split()[1]) for l in open(f"/proc/{process.pid}/status") if l.startswith("VmRSS")) / 1024
    finally:
        process.stop()
        broker.stop()
        upstream.shutdown()

    gaps, counts = [], []
    with lock:
        for times in polls.values():
            window = [t for t in times if start <= t <= end]
            counts.append(len(window))
            gaps += [b - a for a, b in zip(times, times[1:]) if start <= b <= end]
    expected = args.seconds / args.interval
    gaps.sort()
    result = {
        "rooms": args.rooms, "rooms_polled": len(polls), "latency_s": args.latency, "interval_s": args.interval,
        "concurrency": args.concurrency, "window_s": args.seconds,
        "polls_per_room_expected": expected,
        "polls_per_room_min": min(counts), "polls_per_room_median": statistics.median(counts),
        "achieved_interval_median_s": round(statistics.median(gaps), 3),
        "achieved_interval_p99_s": round(gaps[int(len(gaps) * 0.99) - 1], 3), "achieved_interval_max_s": round(gaps[-1], 3),
        "bridge_cpu_percent_of_one_core": round(100 * (cpu1 - cpu0) / (end - start), 1),
        "bridge_rss_mib": round(rss, 1),
    }
    print(json.dumps(result, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
