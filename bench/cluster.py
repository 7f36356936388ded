"""Cluster benchmark (docs/scaling.md): N instances sharing R rooms vs one instance with all R rooms.

    python3 bench/cluster.py                    # 9,000 rooms: 1 × 9,000 vs 3 × 3,000 (make bench-cluster)
    python3 bench/cluster.py --smoke            # 900 rooms, short windows
    python3 bench/cluster.py --rooms 3000 --instances 2
    python3 bench/cluster.py --storage postgres --kills 10   # one shared PostgreSQL; takeover times

With `--storage postgres` every case runs on one PostgreSQL of its own (bench/postgres.py, fsync on),
each instance sharing its database; the report adds the database's write rate (history rows per
second over the window) and, with `--kills N`, the takeover time: instance 1 of the cluster is
killed with SIGKILL N times (restarted in between), each time timing from the kill until another
instance holds the lease of one of its users (`cluster.lease` 3 s for this part).

Each case starts its own mosquitto (set_tcp_nodelay, no per-client queue limit) on a free loopback
port and the release bridge(s) on one config of R rooms at a 5 s interval, QoS 1, Home Assistant
discovery on (the defaults). A counter subscribed to `smarthome/#` measures delivered readings
over a window that starts and ends in the quiet gap between two ticks; each instance's CPU and
RSS are sampled over the same window. Reuses the pieces of bench/run.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as harness  # noqa: E402  (bench/run.py: brokers, bridges, samplers, C tools)
import postgres  # noqa: E402  (bench/postgres.py: a PostgreSQL in a temporary folder)
import signal  # noqa: E402
import statistics  # noqa: E402

SECRET = "bench-cluster-secret-0123456789abcdefghij"


def measure(ctx: dict, rooms: int, instances: int) -> dict:
    work, tools, interval, window = ctx["work"], ctx["tools"], ctx["interval"], ctx["window"]
    config = harness.write_config(work / f"cluster-{rooms}.yaml", rooms, interval)
    label = f"{instances}x{rooms // instances}"
    broker = harness.start_broker(work, f"{label}-broker", extra="max_queued_messages 0\n")
    bridges = []
    server = ctx.get("postgres")
    database = f"bench_{label.replace('x', '_')}"
    url = server.create(database) if server else None
    try:
        for index in range(instances):
            env = {"SMARTHOME_STORAGE_URL": url} if url else {}
            if instances > 1:
                env |= {"SMARTHOME_CLUSTER_INSTANCES": str(instances), "SMARTHOME_CLUSTER_INDEX": str(index),
                        "SMARTHOME_CLUSTER_SECRET": SECRET}
            bridges.append(harness.Bridge(ctx["binary"], config, broker, work, f"{label}-bridge-{index}", env=env))
        rows_before = int(server.query(database, "SELECT count(*) FROM readings")) if server else 0
        counted_at = time.monotonic()
        samplers = [harness.Sampler(bridge.pid) for bridge in bridges]
        counted = harness.run_counter(tools, broker.port, 1, interval + 2.0, window, samplers,
                                      quiet=min(1.0, interval / 4), max_wait=6 * interval)
        readings = counted["readings"]
        if server:
            rows = int(server.query(database, "SELECT count(*) FROM readings")) - rows_before
            rows_per_s = rows / (time.monotonic() - counted_at)
            harness.log(f"{label}: database writes {rows_per_s:,.0f} history rows/s")
        per_instance = []
        for bridge, usage in zip(bridges, counted["usage"]):
            per_instance.append({
                "cpu_pct": usage["cpu_pct"],
                "cpu_seconds": usage["cpu_seconds"],
                "rss_max_mib": usage["rss_max_mib"],
                "rss_peak_since_start_mib": harness.rss_kib(bridge.pid, "VmHWM") / 1024,
                "ready_s": bridge.ready_seconds,
            })
        if instances > 1:
            first_ms, again_ms = first_request_ms(bridges[0], rooms, instances)
            harness.log(f"{label}: a user another instance owns, first request on instance 0 {first_ms:.1f} ms "
                        f"(subscribes, waits for the retained values), next {again_ms:.1f} ms")
        else:
            first_ms = again_ms = None
        cpu_total = sum(i["cpu_seconds"] for i in per_instance)
        result = {
            "rooms": rooms,
            "instances": instances,
            "window_s": counted["seconds"],
            "readings": readings,
            "readings_per_s": counted["reading_rate"],
            "per_instance": per_instance,
            "cpu_pct_total": sum(i["cpu_pct"] for i in per_instance),
            "rss_total_mib": sum(i["rss_max_mib"] for i in per_instance),
            "us_cpu_per_reading": cpu_total * 1e6 / readings if readings else None,
            "aligned": counted.get("aligned"),
            "first_request_ms": first_ms,
            "next_request_ms": again_ms,
            "db_rows_per_s": rows_per_s if server else None,
        }
        harness.log(f"{label}: {result['readings_per_s']:,.0f} readings/s delivered; per instance "
                    + ", ".join(f"{i['cpu_pct']:.1f} % CPU / {i['rss_max_mib']:.0f} MiB" for i in per_instance))
        return result
    finally:
        for bridge in bridges:
            bridge.stop()
        broker.stop()


def takeovers(ctx: dict, rooms: int, instances: int, kills: int) -> list[float]:
    """Seconds from a SIGKILL of instance 1 until another instance holds the lease of one of its
    users, `kills` times (instance 1 restarted and given its users back in between)."""
    server, work = ctx["postgres"], ctx["work"]
    config = harness.write_config(work / f"takeover-{rooms}.yaml", rooms, ctx["interval"])
    broker = harness.start_broker(work, "takeover-broker", extra="max_queued_messages 0\n")
    url = server.create("bench_takeover")
    user = next(str(u) for u in range(1, rooms // 8 + 1) if owner(str(u), instances) == 1)
    holder_sql = f"SELECT instance FROM user_leases WHERE user_id = '{user}' AND expires_at > extract(epoch from now())"

    def start(index: int, attempt: int) -> harness.Bridge:
        env = {"SMARTHOME_STORAGE_URL": url, "SMARTHOME_CLUSTER_INSTANCES": str(instances),
               "SMARTHOME_CLUSTER_INDEX": str(index), "SMARTHOME_CLUSTER_SECRET": SECRET, "SMARTHOME_CLUSTER_LEASE": "3s"}
        return harness.Bridge(ctx["binary"], config, broker, work, f"takeover-{index}-{attempt}", env=env)

    def wait_for(done, timeout: float) -> float:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if done(server.query("bench_takeover", holder_sql)):
                return time.monotonic() - t0
            time.sleep(0.05)
        raise RuntimeError(f"no lease change within {timeout} s")

    bridges = [start(index, 0) for index in range(instances)]
    times = []
    try:
        wait_for(lambda holder: holder == "1", 20)
        for attempt in range(1, kills + 1):
            os.kill(bridges[1].pid, signal.SIGKILL)
            seconds = wait_for(lambda holder: holder not in ("", "1"), 20)
            times.append(seconds)
            harness.log(f"takeover {attempt}/{kills}: {seconds:.2f} s")
            bridges[1].stop()
            bridges[1] = start(1, attempt)
            wait_for(lambda holder: holder == "1", 20)
    finally:
        for bridge in bridges:
            bridge.stop()
        broker.stop()
    return times


def owner(user_id: str, instances: int) -> int:
    """The instance that owns a user: 64-bit FNV-1a of the id, modulo the instances (as the bridge's
    ClusterMembership)."""
    value = 0xcbf29ce484222325
    for byte in user_id.encode():
        value = ((value ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return value % instances


def first_request_ms(bridge, rooms: int, instances: int) -> tuple[float, float]:
    """GET /rooms/<user>/Kitchen on instance 0 for a user another instance owns: the first request
    subscribes to the user's topics and waits for their retained values; the next is served from
    memory. (write_config numbers the users 1 … rooms/8.)"""
    user = next(u for u in range((rooms + 7) // 8, 0, -1) if owner(str(u), instances) != 0)
    url = f"http://127.0.0.1:{bridge.http_port}/rooms/{user}/Kitchen"
    t0 = time.monotonic()
    status, _ = harness.http_get(url)
    first = (time.monotonic() - t0) * 1000
    if status != 200:
        raise RuntimeError(f"GET {url} answered {status}")
    t0 = time.monotonic()
    harness.http_get(url)
    return first, (time.monotonic() - t0) * 1000


def table(results: list[dict]) -> str:
    lines = ["| case | instance | CPU % of one core | RSS (max) | readings/s delivered (all) | µs CPU per reading (all) |",
             "|---|---|---|---|---|---|"]
    for result in results:
        case = f"{result['instances']} × {result['rooms'] // result['instances']:,} rooms"
        for index, instance in enumerate(result["per_instance"]):
            lines.append(f"| {case} | {index} | {instance['cpu_pct']:.1f} % | {instance['rss_max_mib']:.0f} MiB | "
                         f"{result['readings_per_s']:,.0f} | {result['us_cpu_per_reading'] or 0:.1f} |")
        if result["instances"] > 1:
            lines.append(f"| {case} | all | {result['cpu_pct_total']:.1f} % | {result['rss_total_mib']:.0f} MiB | "
                         f"{result['readings_per_s']:,.0f} | {result['us_cpu_per_reading'] or 0:.1f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="900 rooms, 4 s windows")
    parser.add_argument("--rooms", type=int, help="rooms in all (default 9,000; 900 with --smoke)")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--window", type=float, help="seconds measured (default 30; 4 with --smoke)")
    parser.add_argument("--storage", choices=["sqlite", "postgres"], default="sqlite",
                        help="a SQLite file per instance (default) or one shared PostgreSQL")
    parser.add_argument("--kills", type=int, default=0, help="with --storage postgres: takeovers to time")
    parser.add_argument("--skip-load", action="store_true", help="only the takeovers")
    args = parser.parse_args()
    rooms = args.rooms or (900 if args.smoke else 9000)
    started = time.monotonic()
    binary = harness.bridge_binary()
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    tools = harness.Tools(harness.RESULTS / "bin")
    tools.build()
    work = Path(tempfile.mkdtemp(prefix="smarthome-bench-cluster-"))
    ctx = {"work": work, "tools": tools, "binary": binary, "interval": 5,
           "window": args.window or (4.0 if args.smoke else 30.0)}
    results = []
    takeover_s: list[float] = []
    if args.storage == "postgres":
        ctx["postgres"] = postgres.Server()
    try:
        for instances in () if args.skip_load else (1, args.instances):
            harness.log(f"--- {instances} instance(s), {rooms:,} rooms (load average {os.getloadavg()[0]:.2f})")
            results.append(measure(ctx, rooms, instances))
        if args.kills and args.storage == "postgres":
            takeover_s = takeovers(ctx, rooms, args.instances, args.kills)
    finally:
        harness.bridgetest.stop_all()
        if "postgres" in ctx:
            ctx["postgres"].stop()
        shutil.rmtree(work, ignore_errors=True)
    report = {
        "command": " ".join(["python3", "bench/cluster.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": harness.machine(),
        "loadavg_1m_after": os.getloadavg()[0],
        "elapsed_s": round(time.monotonic() - started, 1),
        "storage": args.storage,
        "results": results,
        "takeover_s": takeover_s,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (harness.RESULTS / f"cluster-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
    (harness.RESULTS / "latest-cluster.md").write_text(table(results) + "\n")
    print(f"\nSmartHomeBridge cluster benchmark ({report['command']}), {report['date']}, {report['elapsed_s']:.0f} s")
    print(table(results))
    if takeover_s:
        print(f"takeover over {len(takeover_s)} kills: min {min(takeover_s):.2f} s, "
              f"median {statistics.median(takeover_s):.2f} s, max {max(takeover_s):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
