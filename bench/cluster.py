"""Cluster benchmark (docs/scaling.md): N instances sharing R rooms vs one instance with all R rooms.

    python3 bench/cluster.py                    # 9,000 rooms: 1 × 9,000 vs 3 × 3,000 (make bench-cluster)
    python3 bench/cluster.py --smoke            # 900 rooms, short windows
    python3 bench/cluster.py --rooms 3000 --instances 2
    python3 bench/cluster.py --storage postgres --kills 10   # one shared PostgreSQL; takeover times

With `--storage postgres` every case runs on one PostgreSQL of its own (bench/postgres.py, fsync on),
each instance sharing its database; the report adds the database's write rates over the window
(history rows counted in the table; rows written to sensor_state and the lease tables from
pg_stat_user_tables; commits from pg_stat_database; WAL bytes from pg_current_wal_lsn) and, with
`--kills N`, the takeover time: instance 1 of the cluster is killed with SIGKILL N times (restarted
in between), each time timing from the kill until another instance holds the lease of one of its
users, and until that user's first room is announced `online` again (`cluster.lease` 3 s for this
part unless `--lease` says otherwise; mosquitto_sub watches). Before the window of a cluster on
PostgreSQL the benchmark waits until every lease is at its hash owner.

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
import subprocess  # noqa: E402
import threading  # noqa: E402

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
        settled_s = None
        if server and instances > 1:
            settled_s = wait_until_settled(server, database, rooms, instances)
            harness.log(f"{label}: " + ("the leases never settled at their hash owners (measured anyway)" if settled_s is None
                                        else f"every lease at its hash owner {settled_s:.1f} s after the last start"))
        samplers = [harness.Sampler(bridge.pid) for bridge in bridges]
        # Last, so the CPU samplers begin and end first.
        writes = [DatabaseSampler(server, database)] if server else []
        counted = harness.run_counter(tools, broker.port, 1, interval + 2.0, window, samplers + writes,
                                      quiet=min(1.0, interval / 4), max_wait=6 * interval)
        readings = counted["readings"]
        database_rates = counted["usage"][-1] if server else None
        if database_rates:
            harness.log(f"{label}: database writes {database_rates['history_rows_per_s']:,.0f} history rows/s, "
                        f"{database_rates['state_rows_per_s']:,.0f} sensor_state rows/s, "
                        f"{database_rates['lease_rows_per_s']:,.1f} lease rows/s, "
                        f"{database_rates['lease_changes_per_s']:,.1f} leases changing hands/s, "
                        f"{database_rates['commits_per_s']:,.1f} commits/s, "
                        f"{database_rates['wal_kib_per_s']:,.0f} KiB/s of WAL")
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
            "database": database_rates,
            "leases_settled_s": settled_s,
        }
        harness.log(f"{label}: {result['readings_per_s']:,.0f} readings/s delivered; per instance "
                    + ", ".join(f"{i['cpu_pct']:.1f} % CPU / {i['rss_max_mib']:.0f} MiB" for i in per_instance))
        return result
    finally:
        for bridge in bridges:
            bridge.stop()
        broker.stop()


def wait_until_settled(server: postgres.Server, database: str, rooms: int, instances: int,
                       timeout: float = 90) -> float | None:
    """Waits until every user's lease is held by its hash owner (the start-up hand-backs over, docs/scaling.md
    "Leases"), so the window measures the cluster at work, not the re-announces of users changing hands;
    the seconds that took, or None if they never did within `timeout` (the lease changes per second
    in the report then say how much they moved)."""
    owners = {str(user): owner(str(user), instances) for user in range(1, (rooms + 7) // 8 + 1)}
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        rows = server.query(database, "SELECT user_id, instance FROM user_leases WHERE expires_at > extract(epoch from now())")
        held = dict(line.split("|") for line in rows.splitlines() if line)
        if all(held.get(user) == str(index) for user, index in owners.items()):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


class DatabaseSampler:
    """The database's writes over the counter's window: run_counter begins and ends it with the CPU
    samplers, and its `end` gives the rates per second (postgres.Server.stats)."""

    def __init__(self, server: postgres.Server, database: str) -> None:
        self.server, self.database = server, database
        self.before: dict = {}

    def begin(self) -> None:
        self.before = self.server.stats(self.database)

    def end(self) -> dict:
        after = self.server.stats(self.database)
        seconds = after["at"] - self.before["at"]
        rates = {f"{key}_per_s": (after[key] - self.before[key]) / seconds
                 for key in ("history_rows", "state_rows", "lease_rows", "lease_changes", "commits")}
        return {"seconds": seconds, **rates, "wal_kib_per_s": (after["wal_bytes"] - self.before["wal_bytes"]) / 1024 / seconds}


class Watch:
    """mosquitto_sub on one topic: every payload with the monotonic time it arrived."""

    def __init__(self, port: int, topic: str) -> None:
        self.messages: list[tuple[float, str]] = []
        self.process = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-q", "1", "-t", topic],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, bufsize=1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.messages.append((time.monotonic(), line.rstrip("\n")))

    def first(self, payload: str, after: float, timeout: float) -> float | None:
        """Seconds from `after` until `payload` arrived after it (waiting up to `timeout`), or None."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((t for t, text in list(self.messages) if t > after and text == payload), None)
            if found is not None or time.monotonic() > deadline:
                return None if found is None else found - after
            time.sleep(0.02)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def takeovers(ctx: dict, rooms: int, instances: int, kills: int, lease: str) -> list[dict]:
    """Instance 1 of the cluster killed with SIGKILL `kills` times (restarted and given its users
    back in between); each time the seconds from the kill until another instance holds the lease of
    one of its users (`lease_s`) and until that user's first room is announced `online` again by the
    taker (`online_s`, seen by a subscriber)."""
    server, work = ctx["postgres"], ctx["work"]
    config = harness.write_config(work / f"takeover-{rooms}.yaml", rooms, ctx["interval"])
    broker = harness.start_broker(work, "takeover-broker", extra="max_queued_messages 0\n")
    url = server.create("bench_takeover")
    user = next(str(u) for u in range(1, rooms // 8 + 1) if owner(str(u), instances) == 1)
    holder_sql = f"SELECT instance FROM user_leases WHERE user_id = '{user}' AND expires_at > extract(epoch from now())"
    availability = Watch(broker.port, f"smarthome/{user}/{harness.DEMO_ROOMS[0].lower()}/availability")

    def start(index: int, attempt: int) -> harness.Bridge:
        env = {"SMARTHOME_STORAGE_URL": url, "SMARTHOME_CLUSTER_INSTANCES": str(instances),
               "SMARTHOME_CLUSTER_INDEX": str(index), "SMARTHOME_CLUSTER_SECRET": SECRET, "SMARTHOME_CLUSTER_LEASE": lease}
        return harness.Bridge(ctx["binary"], config, broker, work, f"takeover-{index}-{attempt}", env=env)

    def wait_for(done, timeout: float, since: float) -> float | None:
        """Seconds from `since` until the user's holder is as `done` wants, or None after `timeout`."""
        while time.monotonic() - since < timeout:
            if done(server.query("bench_takeover", holder_sql)):
                return time.monotonic() - since
            time.sleep(0.05)
        return None

    def seconds(value: float | None) -> str:
        return "never" if value is None else f"{value:.2f} s"

    bridges = [start(index, 0) for index in range(instances)]
    times = []
    try:
        if wait_for(lambda holder: holder == "1", 60, time.monotonic()) is None:
            harness.log("takeover: instance 1 never held its user's lease; timing anyway")
        for attempt in range(1, kills + 1):
            os.kill(bridges[1].pid, signal.SIGKILL)
            killed = time.monotonic()
            lease_s = wait_for(lambda holder: holder not in ("", "1"), 30, killed)
            online_s = availability.first("online", killed, 30)
            times.append({"lease_s": lease_s, "online_s": online_s})
            harness.log(f"takeover {attempt}/{kills}: lease taken {seconds(lease_s)}, room online {seconds(online_s)} "
                        "after the kill")
            bridges[1].stop()
            bridges[1] = start(1, attempt)
            back = wait_for(lambda holder: holder == "1", 30, time.monotonic())
            if back is None:
                harness.log(f"takeover {attempt}/{kills}: the restarted instance 1 did not get its user back within 30 s")
    finally:
        availability.stop()
        for bridge in bridges:
            bridge.stop()
        broker.stop()
    return times


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f} s, median {statistics.median(values):.2f} s, max {max(values):.2f} s"


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


def database_table(results: list[dict]) -> str:
    lines = ["| case | history rows/s | sensor_state rows/s | lease rows/s | leases changing hands/s | commits/s | WAL KiB/s |",
             "|---|---|---|---|---|---|---|"]
    for result in results:
        rates = result.get("database")
        if rates:
            case = f"{result['instances']} × {result['rooms'] // result['instances']:,} rooms"
            lines.append(f"| {case} | {rates['history_rows_per_s']:,.0f} | {rates['state_rows_per_s']:,.0f} | "
                         f"{rates['lease_rows_per_s']:,.1f} | {rates['lease_changes_per_s']:,.1f} | "
                         f"{rates['commits_per_s']:,.1f} | "
                         f"{rates['wal_kib_per_s']:,.0f} |")
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
    parser.add_argument("--lease", default="3s", help="cluster.lease for the takeovers (default 3s)")
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
    takeover_s: list[dict] = []
    if args.storage == "postgres":
        ctx["postgres"] = postgres.Server()
    try:
        for instances in () if args.skip_load else (1, args.instances):
            harness.log(f"--- {instances} instance(s), {rooms:,} rooms (load average {os.getloadavg()[0]:.2f})")
            results.append(measure(ctx, rooms, instances))
        if args.kills and args.storage == "postgres":
            takeover_s = takeovers(ctx, rooms, args.instances, args.kills, args.lease)
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
    if any(r.get("database") for r in results):
        print(database_table(results))
    if takeover_s:
        lease = [t["lease_s"] for t in takeover_s if t["lease_s"] is not None]
        online = [t["online_s"] for t in takeover_s if t["online_s"] is not None]
        print(f"takeover over {len(takeover_s)} kills: lease taken {spread(lease) if lease else 'never'}; "
              f"room online again {spread(online) if online else 'never'} "
              f"({len(takeover_s) - len(lease)} leases never taken, {len(takeover_s) - len(online)} rooms never seen online)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
