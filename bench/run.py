#!/usr/bin/env python3
"""SmartHomeBridge benchmark harness (bench/README.md).

    python3 bench/run.py              # full run, < 10 minutes (make bench)
    python3 bench/run.py --smoke      # ~30 s version of every benchmark (make bench-smoke)
    python3 bench/run.py --only publish,rtt --markdown results.md

Every benchmark starts its own mosquitto (set_tcp_nodelay true) on a free loopback port and the
bridge in release mode, and puts the bridge beside a reference measured in the same run: a plain C
libmosquitto publisher, a trivial C echo client, a trivial libmicrohttpd handler (bench/c/). It
prints a table and writes JSON (and the table as Markdown) under bench/results/.

The bridge binary is $BRIDGE; without it, `swift build -c release` is run first (incremental) and
.build/release/smarthome-bridge is used. Needs mosquitto, wrk, cc, libmosquitto-dev and
libmicrohttpd-dev (`make bench` installs what is missing). Only loopback addresses are used.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "support"))
import bridgetest  # noqa: E402  (Tests/support/bridgetest.py: ports, processes, mosquitto, the bridge)
from bridgetest import ROOT, free_port, wait_for_port  # noqa: E402

BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
DEMO_CONFIG = ROOT / "config" / "bridge.yaml"
DEMO_ROOMS = ["Livingroom", "Bathroom", "Bedroom", "Kitchen", "Garden", "Saloon", "Babyroom", "Balcony"]
C_PROGRAMS = {
    "mqtt_count": ["-lmosquitto"],
    "mqtt_ref_pub": ["-lmosquitto", "-lpthread"],
    "mqtt_echo": ["-lmosquitto"],
    "mqtt_rtt": ["-lmosquitto", "-lpthread"],
    "mqtt_startup": ["-lmosquitto", "-lpthread"],
    "mhd_trivial": ["-lmicrohttpd"],
}

# Durations and sizes: the full run and the smoke run.
PROFILES = {
    "full": {
        "publish_rooms": 16, "publish_warmup": 3.0, "publish_window": 10.0, "publish_repeats": 2,
        "rtt_iterations": 5000, "rtt_warmup": 200,
        "http_duration": 3, "http_rounds": 5, "http_connections": 64, "login_duration": 10, "login_connections": 64,
        "http_trivial_twice": True,
        "scale_rooms": [16, 1000, 10000], "scale_window": 30.0, "scale_interval": 5, "scale_idle": True,
        # Diagnostic: the same without Home Assistant discovery (on by default), whose start-up
        # burst of configs sets the RSS at 10,000 rooms.
        "scale_variants": [(10000, "10000 no-discovery", {"SMARTHOME_HOMEASSISTANT_DISCOVERY": "false"})],
        "startup_runs": 5,
    },
    "smoke": {
        "publish_rooms": 16, "publish_warmup": 0.5, "publish_window": 1.5, "publish_repeats": 1,
        "rtt_iterations": 500, "rtt_warmup": 50,
        "http_duration": 1, "http_rounds": 1, "http_connections": 64, "login_duration": 2, "login_connections": 8,
        "http_trivial_twice": False,
        "scale_rooms": [1000], "scale_window": 4.0, "scale_interval": 5, "scale_idle": False,
        "startup_runs": 1,
    },
}

# The targets.
TARGETS = {
    "publish_ratio": 0.8,
    "rtt_p50_vs_floor": 3.0,
    "rtt_p99_ms": 2.0,
    "http_ratio": 0.7,
    "http_p99_ms": 2.0,
    "scale_cpu_pct": 25.0,
    "scale_rss_mib": 100.0,
    "scale_flatness": 1.5,
    "startup_ms": 1000.0,
}


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes (bridgetest.Process), /proc


def start_tool(name: str, argv: list[str], workdir: Path) -> bridgetest.Process:
    """One of the C programs (or any helper) in its own session, its output in workdir/NAME.log."""
    return bridgetest.Process(name, argv, workdir / f"{name}.log", cwd=workdir)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident memory (VmRSS), or its peak since start (field="VmHWM"), in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def task_runtimes_ns(pid: int) -> dict[int, int]:
    """Nanoseconds each thread of a process has run (/proc/PID/task/TID/schedstat, first field)."""
    runtimes = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                runtimes[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return runtimes


class Sampler:
    """CPU and RSS of one process over a window.

    CPU comes from the threads' schedstat run times (nanoseconds), sampled every 0.2 s so that a
    thread that ends inside the window loses at most 0.2 s of its time; /proc/PID/stat's utime +
    stime (10 ms ticks) is kept as a cross-check and used if schedstat is unavailable."""

    def __init__(self, pid: int):
        self.pid = pid
        self.rss: list[int] = []
        self.recording = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        runtimes = task_runtimes_ns(self.pid)
        rss = rss_kib(self.pid)
        with self._lock:
            for tid, ns in runtimes.items():
                self.base.setdefault(tid, 0)  # a thread born inside the window
                self.last[tid] = ns
            self.rss.append(rss)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            if self.recording:
                try:
                    self._sample()
                except OSError:
                    return

    def begin(self) -> None:
        with self._lock:
            self.base = task_runtimes_ns(self.pid)
            self.last = dict(self.base)
            self.ticks0, self.t0 = cpu_seconds(self.pid), time.monotonic()
            self.rss = [rss_kib(self.pid)]
        self.recording = True

    def end(self) -> dict:
        self._sample()
        ticks1, t1 = cpu_seconds(self.pid), time.monotonic()
        self.recording = False
        self._stop.set()
        with self._lock:
            precise = sum(ns - self.base.get(tid, 0) for tid, ns in self.last.items()) / 1e9
            rss = list(self.rss)
        ticks = ticks1 - self.ticks0
        cpu = precise if precise > 0 or ticks == 0 else ticks
        wall = t1 - self.t0
        return {
            "cpu_seconds": cpu,
            "cpu_seconds_ticks": ticks,
            "wall_seconds": wall,
            "cpu_pct": 100.0 * cpu / wall if wall > 0 else 0.0,
            "rss_max_mib": max(rss) / 1024,
            "rss_mean_mib": statistics.fmean(rss) / 1024,
        }


# ---------------------------------------------------------------------------------------------
# The pieces: C programs, mosquitto, the bridge, configs


class Tools:
    def __init__(self, bin_dir: Path):
        self.bin_dir = bin_dir

    def build(self) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        for name, libs in C_PROGRAMS.items():
            source = BENCH / "c" / f"{name}.c"
            target = self.bin_dir / name
            newest = max(source.stat().st_mtime, (BENCH / "c" / "benchc.h").stat().st_mtime)
            if target.exists() and target.stat().st_mtime >= newest:
                continue
            subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-o", str(target), str(source), *libs], check=True)

    def __getitem__(self, name: str) -> str:
        return str(self.bin_dir / name)


def start_broker(workdir: Path, name: str = "mosquitto", extra: str = "") -> bridgetest.Broker:
    """A private mosquitto on a free loopback port, in workdir/NAME, with TCP_NODELAY."""
    return bridgetest.Broker(workdir / name, extra="set_tcp_nodelay true\n" + extra)


def http_get(url: str, headers: dict | None = None, timeout: float = 5) -> tuple[int, bytes]:
    status, _, body = bridgetest.http_get(url, headers, timeout)
    return status, body


# What every benchmark's bridge runs with, on top of bridgetest's broker, HTTP port and storage.
BRIDGE_ENV = {
    "SMARTHOME_HTTP_BIND": "127.0.0.1",
    "SMARTHOME_HTTP_LEGACY_ROUTES": "true",
    "SMARTHOME_LOG_LEVEL": "warning",
    "SMARTHOME_SOURCE_SEED": "42",
    # The round trip sends thousands of commands a second for one user: far past the default
    # command rate (README "Security model"), which would be measured instead of the bridge.
    "SMARTHOME_COMMANDS_RATE": "100000",
    "SMARTHOME_COMMANDS_BURST": "100000",
}


class Bridge(bridgetest.Bridge):
    """The bridge in release mode on `config`, connected to `broker`, in workdir/NAME; started
    here, ready once /healthz says MQTT is connected."""

    def __init__(self, binary: str, config: Path, broker: bridgetest.Broker, workdir: Path, name: str = "bridge",
                 env: dict | None = None, ready_timeout: float = 120):
        super().__init__(workdir / name, broker, config, env={**BRIDGE_ENV, **(env or {})}, binary=binary)

        def connected() -> bool:
            answer = self.healthz(timeout=2)
            return answer is not None and answer[0] == 200 and b'"connected"' in answer[1]

        self.start(ready=connected, timeout=ready_timeout, interval=0.02, message="the bridge's /healthz connected")

    def stop(self) -> None:
        name, path = self.name, self.log_path
        super().stop(timeout=20, log=log)
        if self.exit_status not in (0, -signal.SIGTERM, None):
            log(f"{name} exited with {self.exit_status}: {bridgetest.tail(path, 5)}")


def demo_password_hash() -> str:
    match = re.search(r'password_hash:\s*"(\$argon2id\$[^"]+)"', DEMO_CONFIG.read_text())
    if not match:
        raise RuntimeError(f"no argon2id password_hash in {DEMO_CONFIG}")
    return match.group(1)


def write_config(path: Path, rooms: int, interval: float) -> Path:
    """A config with `rooms` rooms: users of 8 rooms each (the demo's room names), the first two
    being the demo's users. Everything the harness varies is also set by environment variables."""
    password_hash = demo_password_hash()
    lines = [
        "# Written by bench/run.py.",
        "mqtt:", "  base_topic: smarthome", "  qos: 1", "  keepalive: 30",
        "http:", "  bind: 127.0.0.1", "  legacy_routes: true",
        "source:", "  kind: simulated", f"  interval: {interval}",
        "log:", "  level: warning",
        "users:",
    ]
    users = (rooms + 7) // 8
    for index in range(users):
        count = min(8, rooms - index * 8)
        username = {0: "Cemalettin", 1: "Mehmet"}.get(index, f"user{index + 1}")
        lines += [
            f'  - id: "{index + 1}"',
            f"    username: {username}",
            f'    password_hash: "{password_hash}"',
            f"    rooms: [{', '.join(DEMO_ROOMS[:count])}]",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def demo_topic_count() -> int | None:
    """Retained topics the demo config yields: every sensor and room, bridge/state and bridge/info
    (None if the config is not in the shape this simple reader understands)."""
    text = DEMO_CONFIG.read_text()
    lists = re.findall(r"^\s+rooms:\s*\[([^\]]*)\]", text, re.M)
    if not lists:
        return None
    total = 2
    for names in lists:
        for name in (n.strip() for n in names.split(",") if n.strip()):
            total += 5  # temperature, humidity, lights, movement or gas, and the room's JSON
    return total


def history_rows(database: Path) -> int | None:
    """Readings the bridge has recorded so far (it records every reading it publishes, in batches
    once a second); None if the database can't be read."""
    import sqlite3
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
        try:
            return connection.execute("SELECT count(*) FROM readings").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.Error:
        return None


def run_counter(tools: Tools, port: int, qos: int, warmup: float, window: float, samplers: list[Sampler],
                quiet: float = 0, max_wait: float = 30, database: Path | None = None) -> dict:
    """Runs mqtt_count; starts and ends the samplers exactly when its window opens and closes
    (and counts the bridge's recorded readings then, when given its database)."""
    argv = [tools["mqtt_count"], "-p", str(port), "-q", str(qos), "-w", str(warmup), "-d", str(window)]
    if quiet > 0:
        argv += ["-Q", str(quiet), "-M", str(max_wait)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    result = None
    usage = []
    try:
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] == "window_start":
                for sampler in samplers:
                    sampler.begin()
                rows0 = history_rows(database) if database else None
            elif event["event"] == "result":
                usage = [sampler.end() for sampler in samplers]
                result = event
                if database:
                    # Both ends lie in a quiet gap of >= 1 s after a tick's last message, and the
                    # history is written once a second: every row of the window's ticks is in.
                    rows1 = history_rows(database)
                    result["recorded"] = rows1 - rows0 if rows0 is not None and rows1 is not None else None
    finally:
        proc.wait()
    if result is None:
        raise RuntimeError(f"mqtt_count failed with {proc.returncode}")
    result["usage"] = usage
    return result


# ---------------------------------------------------------------------------------------------
# 1. Publish pipeline


def bench_publish(ctx: dict) -> dict:
    p, tools, work = ctx["profile"], ctx["tools"], ctx["work"]
    rooms = p["publish_rooms"]
    config = write_config(work / f"publish-{rooms}.yaml", rooms, 0)
    users, per_user = (rooms + 7) // 8, min(rooms, 8)
    out = {"rooms": rooms, "window_s": p["publish_window"], "repeats": p["publish_repeats"], "qos": {}}
    for qos in (0, 1):
        runs = {"reference": [], "bridge": []}
        for repeat in range(p["publish_repeats"]):
            for kind in ("reference", "bridge"):
                broker = start_broker(work, f"publish-q{qos}-{kind}-{repeat}-broker")
                proc = bridge = None
                try:
                    if kind == "reference":
                        proc = start_tool(f"publish-q{qos}-ref-{repeat}",
                                          [tools["mqtt_ref_pub"], "-p", str(broker.port), "-q", str(qos), "-u", str(users),
                                           "-r", str(per_user), "-i", "100", "-W", "1000"], work)
                        pid = proc.pid
                    else:
                        bridge = Bridge(ctx["binary"], config, broker, work, f"publish-q{qos}-bridge-{repeat}",
                                        env={"SMARTHOME_SOURCE_INTERVAL": "0", "SMARTHOME_MQTT_QOS": str(qos)})
                        pid = bridge.pid
                    samplers = [Sampler(pid), Sampler(broker.process.pid)]
                    database = bridge.database if bridge is not None else None
                    counted = run_counter(tools, broker.port, qos, p["publish_warmup"], p["publish_window"], samplers,
                                          database=database)
                    run = {
                        "delivered_per_s": counted["rate"],
                        "readings_per_s": counted["reading_rate"],
                        # The bridge's recorded (= published) readings per second: approximate, as
                        # its history is written once a second and this window is not aligned.
                        "recorded_readings_per_s": counted["recorded"] / counted["seconds"]
                        if counted.get("recorded") is not None else None,
                        "messages": counted["messages"],
                        "publisher": counted["usage"][0],
                        "broker": counted["usage"][1],
                    }
                    runs[kind].append(run)
                    log(f"publish QoS {qos} {kind}: {run['delivered_per_s']:,.0f} msg/s delivered "
                        f"(publisher {run['publisher']['cpu_pct']:.0f} % CPU, {run['publisher']['rss_max_mib']:.0f} MiB; "
                        f"broker {run['broker']['cpu_pct']:.0f} % CPU)")
                finally:
                    if bridge is not None:
                        bridge.stop()
                    elif proc is not None:
                        proc.stop()
                    broker.stop()
        for run in runs["reference"] + runs["bridge"]:
            run["publisher_us_per_msg"] = run["publisher"]["cpu_seconds"] * 1e6 / run["messages"] if run["messages"] else None
            run["broker_us_per_msg"] = run["broker"]["cpu_seconds"] * 1e6 / run["messages"] if run["messages"] else None
        reference = statistics.median(r["delivered_per_s"] for r in runs["reference"])
        bridge_rate = statistics.median(r["delivered_per_s"] for r in runs["bridge"])
        out["qos"][str(qos)] = {
            "reference_msg_s": reference,
            "bridge_msg_s": bridge_rate,
            "reference_us_per_msg": statistics.median(r["publisher_us_per_msg"] or 0 for r in runs["reference"]),
            "bridge_us_per_msg": statistics.median(r["publisher_us_per_msg"] or 0 for r in runs["bridge"]),
            "bridge_rss_max_mib": max(r["publisher"]["rss_max_mib"] for r in runs["bridge"]),
            "ratio": bridge_rate / reference if reference else 0.0,
            "runs": runs,
        }
    return out


# ---------------------------------------------------------------------------------------------
# 2. Command round trip


def bench_rtt(ctx: dict) -> dict:
    p, tools, work = ctx["profile"], ctx["tools"], ctx["work"]
    argv_tail = ["-t", "smarthome/1/kitchen", "-n", str(p["rtt_iterations"]), "-w", str(p["rtt_warmup"]), "-q", "1"]
    out = {"iterations": p["rtt_iterations"]}
    broker = start_broker(work, "rtt-broker")
    try:
        echo = start_tool("rtt-echo", [tools["mqtt_echo"], "-p", str(broker.port), "-q", "1"], work)
        time.sleep(0.3)
        try:
            result = subprocess.run([tools["mqtt_rtt"], "-p", str(broker.port), *argv_tail],
                                    capture_output=True, text=True, check=True)
            out["floor"] = json.loads(result.stdout)
        finally:
            echo.stop()
        bridge = Bridge(ctx["binary"], DEMO_CONFIG, broker, work, "rtt-bridge")
        try:
            sampler = Sampler(bridge.pid)
            sampler.begin()
            result = subprocess.run([tools["mqtt_rtt"], "-p", str(broker.port), *argv_tail],
                                    capture_output=True, text=True, check=True)
            out["bridge"] = json.loads(result.stdout)
            out["bridge_usage"] = sampler.end()
        finally:
            bridge.stop()
    finally:
        broker.stop()
    out["p50_vs_floor"] = out["bridge"]["p50_ms"] / out["floor"]["p50_ms"] if out["floor"]["p50_ms"] else 0
    log(f"round trip: bridge p50 {out['bridge']['p50_ms']:.3f} ms p99 {out['bridge']['p99_ms']:.3f} ms; "
        f"floor p50 {out['floor']['p50_ms']:.3f} ms p99 {out['floor']['p99_ms']:.3f} ms")
    return out


# ---------------------------------------------------------------------------------------------
# 3. HTTP


def open_server_connections(port: int) -> int:
    """Connections a server on `port` still holds (ESTABLISHED or CLOSE_WAIT on its side)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in ("01", "08"):
                        count += 1
        except OSError:
            pass
    return count


def wait_for_drain(port: int, timeout: float = 15) -> int:
    """Waits until the previous run's connections are gone, so they don't count against the
    server's per-address limit (64) in the next run. Returns how many were still open."""
    deadline = time.monotonic() + timeout
    while (left := open_server_connections(port)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_wrk(url: str, duration: int, connections: int, headers: list[str] | None = None,
            timeout: str = "5s", sampler: Sampler | None = None) -> dict:
    port = int(url.split(":")[2].split("/")[0])
    lingering = wait_for_drain(port)
    if lingering:
        log(f"{lingering} connections from the previous run still open on port {port}")
    argv = ["wrk", "-t", "2", "-c", str(connections), "-d", f"{duration}s", "--timeout", timeout,
            "-s", str(BENCH / "wrk_report.lua")]
    for header in headers or []:
        argv += ["-H", header]
    if sampler:
        sampler.begin()
    result = subprocess.run(argv + [url], capture_output=True, text=True)
    usage = sampler.end() if sampler else None
    line = next((l for l in result.stdout.splitlines() if l.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed ({result.returncode}): {result.stdout}\n{result.stderr}")
    data = json.loads(line[len("WRKJSON "):])
    seconds = data["duration_us"] / 1e6
    data["req_s"] = data["requests"] / seconds if seconds else 0.0
    data["p50_ms"], data["p99_ms"], data["max_ms"] = data["p50_us"] / 1000, data["p99_us"] / 1000, data["max_us"] / 1000
    data["errors"] = sum(data[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors", "timeouts"))
    if usage:
        data["server_cpu_pct"] = usage["cpu_pct"]
        data["server_rss_max_mib"] = usage["rss_max_mib"]
        data["server_us_per_req"] = usage["cpu_seconds"] * 1e6 / data["requests"] if data["requests"] else None
    return data


def bench_http(ctx: dict) -> dict:
    p, tools, work = ctx["profile"], ctx["tools"], ctx["work"]
    duration, connections = p["http_duration"], p["http_connections"]
    out = {"connections": connections, "duration_s": duration, "routes": {}, "trivial": []}
    broker = start_broker(work, "http-broker")
    trivial_port = free_port()
    trivial = start_tool("http-trivial", [tools["mhd_trivial"], "-p", str(trivial_port), "-n", "4"], work)
    try:
        wait_for_port(trivial_port, 5, trivial.popen, trivial.name, trivial.log_path)
        bridge = Bridge(ctx["binary"], DEMO_CONFIG, broker, work, "http-bridge")
        try:
            base = f"http://127.0.0.1:{bridge.http_port}"
            request = urllib.request.Request(
                f"{base}/api/v1/login", method="POST",
                data=json.dumps({"username": "Cemalettin", "password": "12345"}).encode(),
                headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                token = json.loads(response.read())["token"]
            auth = [f"Authorization: Bearer {token}"]
            for path in ("/rooms/1/Kitchen", "/rooms/1", "/api/v1/rooms/kitchen"):
                status, _ = http_get(base + path, {"Authorization": f"Bearer {token}"})
                if status != 200:
                    raise RuntimeError(f"GET {path} answered {status}")

            def trivial_run() -> None:
                run = run_wrk(f"http://127.0.0.1:{trivial_port}/rooms/1/Kitchen", duration, connections,
                              sampler=Sampler(trivial.pid))
                out["trivial"].append(run)
                log(f"http trivial libmicrohttpd: {run['req_s']:,.0f} req/s p50 {run['p50_ms']:.2f} ms "
                    f"p99 {run['p99_ms']:.2f} ms")

            # Not recorded: each server's first run after it starts pays for its first connections'
            # memory (page faults in libmicrohttpd's per-connection pools), which the bridge, started
            # just before, would pay alone in the route measured first.
            warm_up = max(1, duration // 5)
            run_wrk(f"http://127.0.0.1:{trivial_port}/rooms/1/Kitchen", warm_up, connections)
            run_wrk(base + "/rooms/1/Kitchen", warm_up, connections)
            # Rounds of trivial, then each route: the machine's speed drifts within a run by more
            # than the gap measured (bench/README.md), so each route is compared with the trivial
            # runs just before and after it, and the ratio reported is the median of the rounds'.
            rounds: dict[str, list[dict]] = {}
            for _ in range(p["http_rounds"]):
                trivial_run()
                for path, headers in (("/rooms/1/Kitchen", None), ("/rooms/1", None), ("/api/v1/rooms/kitchen", auth)):
                    run = run_wrk(base + path, duration, connections, headers, sampler=Sampler(bridge.pid))
                    rounds.setdefault(path, []).append(run)
                    log(f"http {path}: {run['req_s']:,.0f} req/s p50 {run['p50_ms']:.2f} ms p99 {run['p99_ms']:.2f} ms"
                        f" errors {run['errors']}")
            if p["http_trivial_twice"]:
                trivial_run()  # again after the last round: its routes get a trivial run after them too
            for path, runs in rounds.items():
                out["routes"][path] = combine_rounds(runs, out["trivial"])
            run = run_wrk(base + "/login/Cemalettin/12345", p["login_duration"], p["login_connections"], timeout="30s",
                          sampler=Sampler(bridge.pid))
            out["login"] = run
            log(f"http /login/Cemalettin/12345: {run['req_s']:,.1f} req/s p50 {run['p50_ms']:.0f} ms "
                f"p99 {run['p99_ms']:.0f} ms errors {run['errors']}")
        finally:
            bridge.stop()
    finally:
        trivial.stop()
        broker.stop()
    ceiling = statistics.fmean(r["req_s"] for r in out["trivial"])
    out["ceiling_req_s"] = ceiling
    out["login"]["ratio"] = out["login"]["req_s"] / ceiling if ceiling else 0.0
    return out


def combine_rounds(runs: list[dict], trivial: list[dict]) -> dict:
    """One route's rounds as one result: round i is compared with trivial run i (before it) and
    i + 1 (after it, when there is one). `ratio` is the median of the rounds' req/s ratios and
    `cpu_ratio` of their trivial-to-route CPU-per-request ratios; the rest summarises all rounds
    (requests and errors summed, p50 the median, p99 and max the largest, CPU the mean)."""
    ratios, cpu_ratios = [], []
    for i, run in enumerate(runs):
        around = trivial[i:i + 2]
        reference = statistics.fmean(r["req_s"] for r in around)
        run["ratio"] = run["req_s"] / reference if reference else 0.0
        ratios.append(run["ratio"])
        reference_cpu = statistics.fmean(r.get("server_us_per_req") or 0 for r in around)
        if reference_cpu and run.get("server_us_per_req"):
            cpu_ratios.append(reference_cpu / run["server_us_per_req"])
    cpus = [r["server_us_per_req"] for r in runs if r.get("server_us_per_req")]
    return {
        "rounds": runs,
        "ratio": statistics.median(ratios),
        "cpu_ratio": statistics.median(cpu_ratios) if cpu_ratios else None,
        "req_s": statistics.fmean(r["req_s"] for r in runs),
        "requests": sum(r["requests"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": max(r["p99_ms"] for r in runs),
        "max_ms": max(r["max_ms"] for r in runs),
        "errors": sum(r["errors"] for r in runs),
        "server_us_per_req": statistics.fmean(cpus) if cpus else None,
        "server_cpu_pct": statistics.fmean(r.get("server_cpu_pct") or 0 for r in runs),
        "server_rss_max_mib": max(r.get("server_rss_max_mib") or 0 for r in runs),
    }


# ---------------------------------------------------------------------------------------------
# 4. Scale


def bench_scale(ctx: dict) -> dict:
    p, tools, work = ctx["profile"], ctx["tools"], ctx["work"]
    interval = p["scale_interval"]
    out = {"interval_s": interval, "window_s": p["scale_window"], "rooms": {}}
    # The bridge's cost with nothing to publish (16 rooms, first reading a day away): its timers
    # (history flush, alarm scheduler, event heartbeat). Subtracted to get the marginal cost of a
    # reading, which at 16 rooms would otherwise be mostly this idle cost.
    idle = {"cpu_pct": 0.0, "rss_max_mib": 0.0, "measured": False}
    if p["scale_idle"]:
        config = write_config(work / "scale-idle.yaml", 16, 86400)
        broker = start_broker(work, "scale-idle-broker")
        try:
            bridge = Bridge(ctx["binary"], config, broker, work, "scale-idle-bridge")
            try:
                time.sleep(1.0)
                sampler = Sampler(bridge.pid)
                sampler.begin()
                time.sleep(p["scale_window"])
                idle = sampler.end() | {"measured": True}
            finally:
                bridge.stop()
        finally:
            broker.stop()
        log(f"scale idle (16 rooms, nothing published): {idle['cpu_pct']:.2f} % CPU, {idle['rss_max_mib']:.0f} MiB")
    out["idle"] = idle
    cases = [(rooms, str(rooms), {}) for rooms in p["scale_rooms"]]
    cases += [(rooms, label, env) for rooms, label, env in p.get("scale_variants", [])]
    for rooms, label, env in cases:
        config = write_config(work / f"scale-{rooms}.yaml", rooms, interval)
        # No per-client queue limit, so a burst of 10,000 rooms reaches the counter whole.
        broker = start_broker(work, f"scale-{label}-broker", extra="max_queued_messages 0\n")
        try:
            bridge = Bridge(ctx["binary"], config, broker, work, f"scale-{label}-bridge", env=env)
            try:
                sampler = Sampler(bridge.pid)
                # Window ends in quiet gaps between the 5 s bursts, so it holds whole bursts only.
                # The warmup lets the start-up burst (every retained value, Home Assistant's
                # configs) and the first tick pass.
                counted = run_counter(tools, broker.port, 1, interval + 2.0, p["scale_window"], [sampler],
                                      quiet=min(1.0, interval / 4), max_wait=6 * interval,
                                      database=bridge.database)
                usage = counted["usage"][0]
                readings, messages = counted["readings"], counted["messages"]
                run = {
                    "rooms": rooms,
                    "env": env,
                    "ready_s": bridge.ready_seconds,
                    "rss_peak_since_start_mib": rss_kib(bridge.pid, "VmHWM") / 1024,
                    "cpu_pct": usage["cpu_pct"],
                    "cpu_seconds": usage["cpu_seconds"],
                    "wall_seconds": usage["wall_seconds"],
                    "rss_max_mib": usage["rss_max_mib"],
                    "rss_mean_mib": usage["rss_mean_mib"],
                    "readings": readings,
                    "messages": messages,
                    "readings_per_s": counted["reading_rate"],
                    # Readings the bridge recorded as published in the window; more than arrived
                    # means some were dropped on the way (e.g. by a full outbox).
                    "recorded": counted.get("recorded"),
                    "delivered_fraction": readings / counted["recorded"] if counted.get("recorded") else None,
                    "us_per_recorded_reading": usage["cpu_seconds"] * 1e6 / counted["recorded"]
                    if counted.get("recorded") else None,
                    "us_per_reading": usage["cpu_seconds"] * 1e6 / readings if readings else None,
                    "us_per_reading_net": (usage["cpu_seconds"] - idle["cpu_pct"] / 100 * usage["wall_seconds"])
                    * 1e6 / readings if readings else None,
                    "us_per_message": usage["cpu_seconds"] * 1e6 / messages if messages else None,
                    "aligned": counted.get("aligned"),
                }
                out["rooms"][label] = run
                log(f"scale {label}: {run['cpu_pct']:.1f} % CPU, {run['rss_max_mib']:.0f} MiB, "
                    f"{run['readings_per_s']:,.0f} readings/s, "
                    f"{run['us_per_reading'] or 0:.1f} µs/reading, {run['us_per_reading_net'] or 0:.1f} net of idle "
                    f"(ready in {run['ready_s']:.2f} s, window aligned: {run['aligned']}); recorded {run['recorded']}, "
                    f"delivered {readings}")
            finally:
                bridge.stop()
        finally:
            broker.stop()
    costs = [out["rooms"][str(rooms)]["us_per_reading_net"] for rooms in p["scale_rooms"]
             if out["rooms"][str(rooms)]["us_per_reading_net"]]
    out["flatness"] = max(costs) / min(costs) if len(costs) > 1 else None
    return out


# ---------------------------------------------------------------------------------------------
# 5. Start-up


def bench_startup(ctx: dict) -> dict:
    p, tools, work = ctx["profile"], ctx["tools"], ctx["work"]
    broker = start_broker(work, "startup-broker")
    storage = work / "startup-storage"
    storage.mkdir(exist_ok=True)
    env = bridgetest.bridge_environment(broker, 0, storage / "bridge.sqlite", {"SMARTHOME_LOG_LEVEL": "warning"})
    runs = []
    try:
        for index in range(p["startup_runs"]):
            env["SMARTHOME_HTTP_PORT"] = str(free_port())
            result = subprocess.run(
                [tools["mqtt_startup"], "-p", str(broker.port), "-Q", "1", "-T", "30", "--",
                 ctx["binary"], "--config", str(DEMO_CONFIG)],
                capture_output=True, text=True, env=env, cwd=work)
            if result.returncode != 0:
                raise RuntimeError(f"mqtt_startup failed: {result.stdout}{result.stderr[-2000:]}")
            runs.append(json.loads(result.stdout))
    finally:
        broker.stop()
    times = [r["last_ms"] for r in runs]
    out = {
        "runs": runs,
        "first_run_ms": times[0],
        "median_ms": statistics.median(times),
        "max_ms": max(times),
        "topics": runs[0]["topics"],
        "expected_topics": demo_topic_count(),
    }
    if out["expected_topics"] is not None and out["topics"] != out["expected_topics"]:
        log(f"start-up: saw {out['topics']} topics, the demo config suggests {out['expected_topics']}")
    log(f"start-up: median {out['median_ms']:.0f} ms to the last of {out['topics']} retained topics "
        f"(first run, new database: {out['first_run_ms']:.0f} ms)")
    return out


# ---------------------------------------------------------------------------------------------
# The table


def fmt(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}{suffix}"


def status(ok: bool | None) -> str:
    return "–" if ok is None else ("met" if ok else "MISSED")


def table_rows(results: dict) -> list[list[str]]:
    rows: list[list[str]] = []
    b = results["benchmarks"]
    if "publish" in b:
        pub = b["publish"]
        for qos, data in pub["qos"].items():
            ratio = data["ratio"]
            rows.append([f"1. publish QoS {qos} ({pub['rooms']} rooms, interval 0)",
                         f"{fmt(data['bridge_msg_s'])} msg/s ({data.get('bridge_us_per_msg', 0):.1f} µs CPU/msg)",
                         f"{fmt(data['reference_msg_s'])} msg/s ({data.get('reference_us_per_msg', 0):.1f} µs CPU/msg)",
                         f"{ratio:.2f}×", f"≥ {TARGETS['publish_ratio']}× ref",
                         status(ratio >= TARGETS["publish_ratio"])])
    if "rtt" in b:
        rtt = b["rtt"]
        br, fl = rtt["bridge"], rtt["floor"]
        rows.append([f"2. command round trip p50 ({rtt['iterations']:,}×)", f"{br['p50_ms']:.3f} ms",
                     f"{fl['p50_ms']:.3f} ms (C echo)", f"{rtt['p50_vs_floor']:.2f}×",
                     f"≤ {TARGETS['rtt_p50_vs_floor']:.0f}× floor", status(rtt["p50_vs_floor"] <= TARGETS["rtt_p50_vs_floor"])])
        rows.append(["   round trip p99 / max", f"{br['p99_ms']:.3f} / {br['max_ms']:.2f} ms",
                     f"{fl['p99_ms']:.3f} / {fl['max_ms']:.2f} ms", "", f"p99 ≤ {TARGETS['rtt_p99_ms']:.0f} ms",
                     status(br["p99_ms"] <= TARGETS["rtt_p99_ms"] and br["timeouts"] == 0)])
    if "http" in b:
        http = b["http"]
        ceiling = http["ceiling_req_s"]
        trivial = http["trivial"]
        cpu = statistics.fmean(r.get("server_us_per_req") or 0 for r in trivial)
        rows.append([f"3. HTTP trivial libmicrohttpd ({http['connections']} conns)",
                     f"{fmt(ceiling)} req/s ({cpu:.1f} µs CPU/req)",
                     "p50 {} / p99 {} ms".format(
                         "/".join(f"{r['p50_ms']:.2f}" for r in trivial), "/".join(f"{r['p99_ms']:.2f}" for r in trivial)),
                     "1.00×", "(ceiling)", "–"])
        for path, run in http["routes"].items():
            ok = run["ratio"] >= TARGETS["http_ratio"] and run["p99_ms"] <= TARGETS["http_p99_ms"] and run["errors"] == 0
            detail = f"p50 {run['p50_ms']:.2f} / p99 {run['p99_ms']:.2f} ms"
            if len(run.get("rounds", [])) > 1:
                detail += "; rounds " + "/".join(f"{r['ratio']:.2f}×" for r in run["rounds"])
            if run.get("cpu_ratio"):
                detail += f"; CPU/req ratio {run['cpu_ratio']:.2f}×"
            rows.append([f"   GET {path}", f"{fmt(run['req_s'])} req/s ({run.get('server_us_per_req') or 0:.1f} µs CPU/req)",
                         detail, f"{run['ratio']:.2f}× (median)" if len(run.get("rounds", [])) > 1 else f"{run['ratio']:.2f}×",
                         f"≥ {TARGETS['http_ratio']}×, p99 ≤ {TARGETS['http_p99_ms']:.0f} ms", status(ok)])
        login = http.get("login")
        if login:
            rows.append(["   GET /login/Cemalettin/12345 (argon2id)", f"{fmt(login['req_s'], 1)} req/s",
                         f"p50 {login['p50_ms']:.0f} / p99 {login['p99_ms']:.0f} ms", f"{login['ratio']:.4f}×",
                         "reported only", "–"])
    if "scale" in b:
        scale = b["scale"]
        for label, run in scale["rooms"].items():
            rooms = run.get("rooms", int(label) if label.isdigit() else 0)
            big = label == "10000"
            ok = None
            if big:
                ok = run["cpu_pct"] <= TARGETS["scale_cpu_pct"] and run["rss_max_mib"] <= TARGETS["scale_rss_mib"]
            name = f"4. scale {rooms:,} rooms @ {scale['interval_s']} s"
            if not label.isdigit():
                name = f"   {rooms:,} rooms, {label.split(' ', 1)[1] if ' ' in label else label}"
            rows.append([name,
                         f"{run['cpu_pct']:.1f} % CPU, RSS {run['rss_max_mib']:.0f} MiB "
                         f"(peak {run.get('rss_peak_since_start_mib', 0):.0f})",
                         f"{fmt(run['readings_per_s'])} readings/s" + (
                             f" (only {run['delivered_fraction']:.0%} of those recorded arrived)"
                             if run.get("delivered_fraction") is not None and run["delivered_fraction"] < 0.98 else ""),
                         f"{fmt(run['us_per_reading_net'], 1)} µs/reading (gross {fmt(run['us_per_reading'], 1)}"
                         + (f"; {run['us_per_recorded_reading']:.1f} per recorded)"
                            if run.get("delivered_fraction") is not None and run["delivered_fraction"] < 0.98 else ")"),
                         f"≤ {TARGETS['scale_cpu_pct']:.0f} %, ≤ {TARGETS['scale_rss_mib']:.0f} MiB" if big else "",
                         status(ok)])
        if scale.get("flatness") is not None:
            rows.append(["   per-reading cost (net of idle), max/min", f"{scale['flatness']:.2f}×",
                         f"idle (16 rooms, no readings): {scale['idle']['cpu_pct']:.2f} % CPU", "",
                         f"≤ {TARGETS['scale_flatness']}×", status(scale["flatness"] <= TARGETS["scale_flatness"])])
    if "startup" in b:
        st = b["startup"]
        rows.append([f"5. start-up to last retained topic ({st['topics']})", f"{st['median_ms']:.0f} ms (median)",
                     f"max {st['max_ms']:.0f} ms, new db {st['first_run_ms']:.0f} ms", "",
                     f"≤ {TARGETS['startup_ms']:.0f} ms", status(st["max_ms"] <= TARGETS["startup_ms"])])
    return rows


HEADER = ["benchmark", "bridge", "reference / detail", "ratio", "target", "status"]


def render_text(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(HEADER, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def render_markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.strip() for c in r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def bridge_binary() -> str:
    given = os.environ.get("BRIDGE")
    if given:
        path = Path(given).resolve()
        if not path.exists():
            raise SystemExit(f"BRIDGE={given}: no such file")
        return str(path)
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    log("building the bridge: swift build -c release (set BRIDGE=path to skip)")
    started = time.monotonic()
    subprocess.run([swift, "build", "-c", "release", "--product", "smarthome-bridge"], cwd=ROOT, check=True)
    log(f"built in {time.monotonic() - started:.0f} s")
    return str(ROOT / ".build" / "release" / "smarthome-bridge")


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for name, argv in {"mosquitto": ["mosquitto", "-h"], "wrk": ["wrk", "-v"]}.items():
        try:
            text = subprocess.run(argv, capture_output=True, text=True).stdout
            versions[name] = text.strip().splitlines()[0] if text.strip() else ""
        except OSError:
            versions[name] = ""
    return {
        "nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_before": os.getloadavg(), **versions,
    }


BENCHMARKS = {"publish": bench_publish, "rtt": bench_rtt, "http": bench_http, "scale": bench_scale,
              "startup": bench_startup}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="short version of every benchmark (~30 s)")
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    parser.add_argument("--markdown", help="also write the table as Markdown to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, configs)")
    args = parser.parse_args()
    selected = args.only.split(",") if args.only else list(BENCHMARKS)
    for name in selected:
        if name not in BENCHMARKS:
            parser.error(f"unknown benchmark {name}")
    profile_name = "smoke" if args.smoke else "full"
    started = time.monotonic()
    binary = bridge_binary()
    RESULTS.mkdir(parents=True, exist_ok=True)
    tools = Tools(RESULTS / "bin")
    tools.build()
    work = Path(tempfile.mkdtemp(prefix="smarthome-bench-"))
    ctx = {"profile": PROFILES[profile_name], "tools": tools, "work": work, "binary": binary}
    results = {
        "profile": profile_name,
        "command": "make bench-smoke" if args.smoke else "make bench",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "bridge": binary,
        "settings": PROFILES[profile_name],
        "targets": TARGETS,
        "benchmarks": {},
    }
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True)
        if git.returncode == 0 and git.stdout.strip():
            results["commit"] = git.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    except OSError:
        pass
    failed = []
    try:
        for name in selected:
            log(f"--- {name} (load average {os.getloadavg()[0]:.2f})")
            t0 = time.monotonic()
            for attempt in (1, 2):
                try:
                    results["benchmarks"][name] = BENCHMARKS[name](ctx)
                    results["benchmarks"][name]["loadavg_1m_after"] = os.getloadavg()[0]
                    break
                except Exception as error:  # on a shared machine a broker can die: retry once, then report
                    bridgetest.stop_all()
                    log(f"{name} failed (attempt {attempt}): {error}")
                    if attempt == 2:
                        failed.append(name)
                        results.setdefault("errors", {})[name] = str(error)
                finally:
                    bridgetest.stop_all()
            log(f"{name} took {time.monotonic() - t0:.0f} s")
    except KeyboardInterrupt:
        log("interrupted")
        bridgetest.stop_all()
        return 130
    finally:
        bridgetest.stop_all()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    rows = table_rows(results)
    text = render_text(rows)
    markdown = render_markdown(rows)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"bench-{profile_name}-{stamp}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"latest-{profile_name}.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"latest-{profile_name}.md").write_text(markdown + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown + "\n")
    m = results["machine"]
    print()
    print(f"SmartHomeBridge benchmarks ({results['command']}), {results['date']}, "
          f"{m['nproc']} × {m['cpu_model']}, commit {results.get('commit', '?')}, {results['elapsed_s']:.0f} s")
    print(text)
    for name in failed:
        print(f"{name}: FAILED: {results['errors'][name]}")
    print(f"\nresults: {path.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
