#!/usr/bin/env python3
"""SmartHomeBridge devices benchmark (bench/README.md, docs/performance.md "Devices").

    python3 bench/devices.py            # full run, ~4 minutes (make bench-devices)
    python3 bench/devices.py --smoke    # ~30 s, without `latency` (part of make bench-smoke)
    python3 bench/devices.py --only flood --keep

A device message on `bench/dev/<n>` through the bridge to the bound sensor's topic
`smarthome/<user>/<room>/<sensor>`. The sensors are generic ones (`S0`, `S1`, ...) bound with
`mqtt: {topic: bench/dev/<n>, value: /v}`, so the bridge passes the text of `{"v":"<ns>"}` through
and `mqtt_dev_load` (bench/c/) reads its send time back out of what the bridge publishes. The
reference, in the same run, is `mqtt_relay`: plain libmosquitto subscribing to `bench/dev/+` and
republishing each payload unchanged (QoS 1, retained, like the bridge) on `relay/<n>`.

  throughput  16 sensors, the publisher at the pipeline's pace (at most 1,000 messages not yet
              delivered): delivered msg/s, bridge / relay (relay measured before and after)
  latency     1 sensor at 1,000 msg/s: latency p50/p99 beside the relay's
  sensors     1,000 sensors at 1 msg/s each (1,000 msg/s): latency p50/p99 beside the relay's,
              the bridge's CPU % of one core and RSS
  flood       one device topic at the publisher's full speed, no flow control, for 10 s: the
              bridge's CPU and RSS before, during and after, and whether /healthz still answers

Every case has its own mosquitto and bridge (bench/run.py's: loopback only, release build, ready
once /healthz says MQTT is connected); CPU and RSS come from /proc as bench/run.py reads them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.dont_write_bytecode = True  # no bench/__pycache__ from importing run.py
import run as harness  # noqa: E402  (bench/run.py: Sampler, Tools, Bridge, brokers, /proc readers)
from run import RESULTS, ROOT, bridgetest, log, rss_kib  # noqa: E402

harness.C_PROGRAMS.update({"mqtt_relay": ["-lmosquitto"], "mqtt_dev_load": ["-lmosquitto", "-lpthread"]})

PROFILES = {
    "full": {"benchmarks": ["throughput", "latency", "sensors", "flood"], "throughput_relay_twice": True,
             "throughput_sensors": 16, "throughput_warmup": 2.0, "throughput_window": 10.0,
             "sensors": 1000, "sensors_warmup": 3.0, "sensors_window": 20.0,
             "flood_seconds": 10.0, "flood_settle": 10.0, "flood_stop": 20.0},
    # The 1,000 sensors' run measures the latency at 1,000 msg/s too, so the smoke run skips `latency`.
    "smoke": {"benchmarks": ["throughput", "sensors", "flood"], "throughput_relay_twice": False,
              "throughput_sensors": 16, "throughput_warmup": 0.5, "throughput_window": 1.5,
              "sensors": 1000, "sensors_warmup": 2.0, "sensors_window": 2.0,
              "flood_seconds": 2.0, "flood_settle": 2.0, "flood_stop": 5.0},
}

TARGETS = {"throughput_ratio": 0.5, "p99_ms": 2.0}
SENSORS_PER_ROOM = 10
FLOOD_RSS_LIMIT_MIB = 2048
ROOMS_PER_USER = 10


def write_config(path: Path, sensors: int) -> Path:
    """`sensors` generic sensors, 10 to a room (Room1 ... with S0 ... S9), users of 10 rooms; sensor
    k reads bench/dev/k. Nothing is simulated: every sensor is bound."""
    password_hash = harness.demo_password_hash()
    lines = [
        "# Written by bench/devices.py.",
        "mqtt:", "  base_topic: smarthome", "  qos: 1", "  keepalive: 30",
        "http:", "  bind: 127.0.0.1", "  legacy_routes: true",
        "source:", "  kind: simulated", "  interval: 5",
        "log:", "  level: warning",
        "users:",
    ]
    rooms = (sensors + SENSORS_PER_ROOM - 1) // SENSORS_PER_ROOM
    for user in range((rooms + ROOMS_PER_USER - 1) // ROOMS_PER_USER):
        username = {0: "Cemalettin", 1: "Mehmet"}.get(user, f"user{user + 1}")
        lines += [f'  - id: "{user + 1}"', f"    username: {username}", f'    password_hash: "{password_hash}"',
                  "    rooms:"]
        for room in range(user * ROOMS_PER_USER, min(rooms, (user + 1) * ROOMS_PER_USER)):
            lines += [f"      - name: Room{room + 1}", "        sensors:"]
            for slot in range(SENSORS_PER_ROOM):
                index = room * SENSORS_PER_ROOM + slot
                if index >= sensors:
                    break
                lines.append(f"          - {{ name: S{slot}, mqtt: {{ topic: bench/dev/{index}, value: /v }} }}")
    path.write_text("\n".join(lines) + "\n")
    return path


def load(tools: harness.Tools, port: int, subscribe: str, topics: int, rate: float, window: int,
         warmup: float, seconds: float, samplers: list | None = None) -> dict:
    """Runs mqtt_dev_load; the samplers cover its measured window (warmup to warmup + seconds)."""
    argv = [tools["mqtt_dev_load"], "-p", str(port), "-s", subscribe, "-n", str(topics), "-r", str(rate),
            "-W", str(window), "-w", str(warmup), "-d", str(seconds)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    usage = []
    try:
        if samplers:
            time.sleep(warmup)
            for sampler in samplers:
                sampler.begin()
            time.sleep(seconds)
            usage = [sampler.end() for sampler in samplers]
        out, _ = proc.communicate(timeout=warmup + seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"mqtt_dev_load failed with {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["usage"] = usage
    return result


def relay_case(ctx: dict, name: str, topics: int, rate: float, window: int, warmup: float, seconds: float) -> dict:
    work, tools = ctx["work"], ctx["tools"]
    broker = harness.start_broker(work, f"{name}-broker")
    try:
        relay = harness.start_tool(f"{name}-relay", [tools["mqtt_relay"], "-p", str(broker.port)], work)
        try:
            time.sleep(0.3)
            # usage: [the relay, mosquitto]
            return load(tools, broker.port, "relay/+", topics, rate, window, warmup, seconds,
                        [harness.Sampler(relay.pid), harness.Sampler(broker.process.pid)])
        finally:
            relay.stop()
    finally:
        broker.stop()


def bridge_case(ctx: dict, name: str, sensors: int, topics: int, rate: float, window: int, warmup: float,
                seconds: float) -> dict:
    work, tools = ctx["work"], ctx["tools"]
    config = write_config(work / f"{name}.yaml", sensors)
    broker = harness.start_broker(work, f"{name}-broker")
    try:
        bridge = harness.Bridge(ctx["binary"], config, broker, work, f"{name}-bridge")
        try:
            time.sleep(0.5)
            # usage: [the bridge, mosquitto]
            samplers = [harness.Sampler(bridge.pid), harness.Sampler(broker.process.pid)]
            result = load(tools, broker.port, "smarthome/+/+/+", topics, rate, window, warmup, seconds, samplers)
            result["ready_s"] = bridge.ready_seconds
            result["rss_peak_since_start_mib"] = rss_kib(bridge.pid, "VmHWM") / 1024
            return result
        finally:
            bridge.stop()
    finally:
        broker.stop()


def bench_throughput(ctx: dict) -> dict:
    p = ctx["profile"]
    n, warmup, window = p["throughput_sensors"], p["throughput_warmup"], p["throughput_window"]
    before = relay_case(ctx, "throughput-relay-before", n, 0, 1000, warmup, window)
    bridge = bridge_case(ctx, "throughput-bridge", n, n, 0, 1000, warmup, window)
    after = relay_case(ctx, "throughput-relay-after", n, 0, 1000, warmup, window) if p["throughput_relay_twice"] \
        else before
    reference = (before["delivered_rate"] + after["delivered_rate"]) / 2
    out = {"sensors": n, "bridge": bridge, "relay_before": before, "relay_after": after,
           "reference_rate": reference, "ratio": bridge["delivered_rate"] / reference if reference else None}
    log(f"throughput: bridge {bridge['delivered_rate']:,.0f} msg/s, relay {before['delivered_rate']:,.0f} / "
        f"{after['delivered_rate']:,.0f} msg/s: {out['ratio']:.2f} × (CPU: bridge {bridge['usage'][0]['cpu_pct']:.0f} %, "
        f"its mosquitto {bridge['usage'][1]['cpu_pct']:.0f} %; relay {before['usage'][0]['cpu_pct']:.0f} %, "
        f"its mosquitto {before['usage'][1]['cpu_pct']:.0f} %)")
    return out


def bench_latency(ctx: dict) -> dict:
    p = ctx["profile"]
    warmup, window = p["sensors_warmup"], p["sensors_window"]
    relay = relay_case(ctx, "latency-relay", 1, 1000, 0, warmup, window)
    bridge = bridge_case(ctx, "latency-bridge", 16, 1, 1000, 0, warmup, window)
    out = {"rate": 1000, "bridge": bridge, "relay": relay, "p50_ms": bridge["p50_ms"], "p99_ms": bridge["p99_ms"],
           "relay_p50_ms": relay["p50_ms"], "relay_p99_ms": relay["p99_ms"], "cpu_pct": bridge["usage"][0]["cpu_pct"]}
    log(f"latency: 1 sensor at 1,000 msg/s: bridge p50 {bridge['p50_ms']:.2f} ms p99 {bridge['p99_ms']:.2f} ms "
        f"(relay {relay['p50_ms']:.2f} / {relay['p99_ms']:.2f}), delivered {bridge['delivered']}/{bridge['sent']}, "
        f"CPU {out['cpu_pct']:.1f} %")
    return out


def bench_sensors(ctx: dict) -> dict:
    p = ctx["profile"]
    n, warmup, window = p["sensors"], p["sensors_warmup"], p["sensors_window"]
    relay = relay_case(ctx, "sensors-relay", n, n, 0, warmup, window)
    bridge = bridge_case(ctx, "sensors-bridge", n, n, n, 0, warmup, window)
    usage = bridge["usage"][0]
    out = {"sensors": n, "rate": n, "bridge": bridge, "relay": relay, "cpu_pct": usage["cpu_pct"],
           "rss_max_mib": usage["rss_max_mib"], "p50_ms": bridge["p50_ms"], "p99_ms": bridge["p99_ms"],
           "relay_p50_ms": relay["p50_ms"], "relay_p99_ms": relay["p99_ms"]}
    log(f"sensors: {n} at 1 msg/s: bridge p50 {bridge['p50_ms']:.2f} ms p99 {bridge['p99_ms']:.2f} ms "
        f"(relay {relay['p50_ms']:.2f} / {relay['p99_ms']:.2f}), delivered {bridge['delivered']}/{bridge['sent']}, "
        f"CPU {usage['cpu_pct']:.1f} %, RSS {usage['rss_max_mib']:.0f} MiB")
    return out


def bench_flood(ctx: dict) -> dict:
    p, work, tools = ctx["profile"], ctx["work"], ctx["tools"]
    seconds, settle = p["flood_seconds"], p["flood_settle"]
    config = write_config(work / "flood.yaml", 16)
    broker = harness.start_broker(work, "flood-broker")
    try:
        bridge = harness.Bridge(ctx["binary"], config, broker, work, "flood-bridge")
        try:
            time.sleep(1.0)
            rss_before = rss_kib(bridge.pid) / 1024
            # One topic, open loop: as fast as the publisher's libmosquitto writes, no window. The
            # client waits at most `settle` s after the flood for what the bridge still publishes.
            argv = [tools["mqtt_dev_load"], "-p", str(broker.port), "-s", "smarthome/+/+/+", "-n", "1", "-r", "0",
                    "-W", "0", "-w", "0", "-d", str(seconds), "-D", "1", "-M", str(settle)]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            during, after, aborted = harness.Sampler(bridge.pid), harness.Sampler(bridge.pid), None
            broker_during = harness.Sampler(broker.process.pid)
            during.begin()
            broker_during.begin()
            began = time.monotonic()
            while time.monotonic() - began < seconds and proc.poll() is None:
                time.sleep(0.2)
                rss = rss_kib(bridge.pid) / 1024
                if rss > FLOOD_RSS_LIMIT_MIB:  # a shared machine: stop before the bridge takes it all
                    aborted = rss
                    proc.kill()
                    break
            flood = during.end()
            broker_flood = broker_during.end()
            rss_end = rss_kib(bridge.pid) / 1024
            after.begin()
            out_text, _ = proc.communicate(timeout=settle + 60)
            drained = after.end()
            time.sleep(1.0)
            rss_after = rss_kib(bridge.pid) / 1024
            result = json.loads(out_text.strip().splitlines()[-1]) if out_text.strip() else {}
            health = bridge.healthz(timeout=5)
            peak = rss_kib(bridge.pid, "VmHWM") / 1024
            # How long SIGTERM takes with the flood's backlog still inside (SIGKILL after flood_stop s).
            stop_s = bridgetest.Bridge.stop(bridge, timeout=p["flood_stop"], log=log)
            out = {"stop_s": stop_s, "exit_status": bridge.exit_status,
                   "seconds": seconds, "settle_s": settle, "aborted_at_rss_mib": aborted,
                   "sent": result.get("sent"), "sent_rate": result.get("sent_rate"),
                   "delivered": result.get("delivered"), "drain_s": result.get("drain_s"),
                   "backlog_after_settle": result["sent"] - result["delivered"] if result else None,
                   "cpu_pct": flood["cpu_pct"], "cpu_pct_settle": drained["cpu_pct"],
                   "broker_cpu_pct": broker_flood["cpu_pct"],
                   "rss_before_mib": rss_before, "rss_end_of_flood_mib": rss_end,
                   "rss_max_mib": max(flood["rss_max_mib"], drained["rss_max_mib"]), "rss_after_mib": rss_after,
                   "rss_peak_since_start_mib": peak,
                   "healthz_after": health[0] if health else None}
            log(f"flood: {out['sent_rate'] or 0:,.0f} msg/s offered for {seconds:.0f} s ({out['sent'] or 0:,}); "
                f"delivered {out['delivered'] or 0:,} by {settle:.0f} s after, backlog {out['backlog_after_settle']}; "
                f"bridge CPU {flood['cpu_pct']:.0f} % during (mosquitto {broker_flood['cpu_pct']:.0f} %), "
                f"{drained['cpu_pct']:.0f} % after; RSS {rss_before:.0f} → "
                f"{rss_end:.0f} at the end → max {out['rss_max_mib']:.0f} → {rss_after:.0f} MiB; /healthz "
                f"{out['healthz_after']}; stopped in {stop_s:.1f} s (exit {bridge.exit_status})"
                + (f"; ABORTED at {aborted:.0f} MiB" if aborted else ""))
            return out
        finally:
            bridge.stop()
    finally:
        broker.stop()


BENCHMARKS = {"throughput": bench_throughput, "latency": bench_latency, "sensors": bench_sensors, "flood": bench_flood}


def table(results: dict) -> list[list[str]]:
    b = results["benchmarks"]
    rows = [["benchmark", "bridge", "reference (same run)", "result", "target"]]
    if "throughput" in b:
        t = b["throughput"]
        rows.append([f"throughput, {t['sensors']} sensors", f"{t['bridge']['delivered_rate']:,.0f} msg/s",
                     f"relay {t['relay_before']['delivered_rate']:,.0f} / {t['relay_after']['delivered_rate']:,.0f} msg/s",
                     f"{t['ratio']:.2f} ×", f"≥ {TARGETS['throughput_ratio']} × "
                     + ("✓" if t["ratio"] and t["ratio"] >= TARGETS["throughput_ratio"] else "✗")])
    if "latency" in b:
        s = b["latency"]
        rows.append(["latency, 1 sensor × 1,000 msg/s", f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms",
                     f"relay p50 {s['relay_p50_ms']:.2f}, p99 {s['relay_p99_ms']:.2f} ms",
                     f"delivered {s['bridge']['delivered']:,}/{s['bridge']['sent']:,}",
                     f"p99 ≤ {TARGETS['p99_ms']} ms " + ("✓" if s["p99_ms"] <= TARGETS["p99_ms"] else "✗")])
    if "sensors" in b:
        s = b["sensors"]
        rows.append([f"latency, {s['sensors']:,} sensors × 1 msg/s", f"p50 {s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms",
                     f"relay p50 {s['relay_p50_ms']:.2f}, p99 {s['relay_p99_ms']:.2f} ms",
                     f"delivered {s['bridge']['delivered']:,}/{s['bridge']['sent']:,}",
                     f"p99 ≤ {TARGETS['p99_ms']} ms " + ("✓" if s["p99_ms"] <= TARGETS["p99_ms"] else "✗")])
        rows.append([f"cost, {s['sensors']:,} sensors × 1 msg/s", f"{s['cpu_pct']:.1f} % CPU, {s['rss_max_mib']:.0f} MiB",
                     "–", f"{s['cpu_pct'] * 1e4 / s['rate']:.0f} µs CPU/msg" if s["rate"] else "–", "–"])
    if "flood" in b:
        f = b["flood"]
        rows.append([f"flood, 1 topic, {f['seconds']:.0f} s", f"{f['cpu_pct']:.0f} % CPU, RSS {f['rss_before_mib']:.0f} → "
                     f"{f['rss_end_of_flood_mib']:.0f} → {f['rss_after_mib']:.0f} MiB (max {f['rss_max_mib']:.0f})",
                     f"{f['sent_rate'] or 0:,.0f} msg/s offered", f"undelivered {f['backlog_after_settle']:,} "
                     f"{f['settle_s']:.0f} s after, /healthz {f['healthz_after']}, SIGTERM → exit {f['exit_status']} "
                     f"in {f['stop_s']:.1f} s", "bounded"])
    return rows


def render_text(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines[:1] + ["  ".join("-" * w for w in widths)] + lines[1:])


def render_markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines[:1] + ["|" + "---|" * len(rows[0])] + lines[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="short version (~30 s)")
    parser.add_argument("--only", help="comma-separated subset of: " + ", ".join(BENCHMARKS))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, configs)")
    args = parser.parse_args()
    profile = "smoke" if args.smoke else "full"
    selected = args.only.split(",") if args.only else PROFILES[profile]["benchmarks"]
    for name in selected:
        if name not in BENCHMARKS:
            parser.error(f"unknown benchmark {name}")
    started = time.monotonic()
    binary = harness.bridge_binary()
    RESULTS.mkdir(parents=True, exist_ok=True)
    tools = harness.Tools(RESULTS / "bin")
    tools.build()
    work = Path(tempfile.mkdtemp(prefix="smarthome-bench-devices-"))
    ctx = {"profile": PROFILES[profile], "tools": tools, "work": work, "binary": binary}
    results = {"profile": profile, "command": "python3 bench/devices.py" + (" --smoke" if args.smoke else ""),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": harness.machine(), "settings": PROFILES[profile], "targets": TARGETS, "benchmarks": {}}
    failed = []
    try:
        for name in selected:
            log(f"--- devices {name} (load average {os.getloadavg()[0]:.2f})")
            for attempt in (1, 2):
                try:
                    results["benchmarks"][name] = BENCHMARKS[name](ctx)
                    results["benchmarks"][name]["loadavg_1m_after"] = os.getloadavg()[0]
                    break
                except Exception as error:  # a broker can die on a shared machine: retry once
                    log(f"{name} failed (attempt {attempt}): {error}")
                    if attempt == 2:
                        failed.append(name)
                        results.setdefault("errors", {})[name] = str(error)
                finally:
                    bridgetest.stop_all()
    finally:
        bridgetest.stop_all()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    results["loadavg_after"] = os.getloadavg()
    rows = table(results)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"devices-{profile}-{stamp}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / f"latest-devices-{profile}.json").write_text(json.dumps(results, indent=2) + "\n")
    markdown = render_markdown(rows)
    (RESULTS / f"latest-devices-{profile}.md").write_text(markdown + "\n")
    m = results["machine"]
    print(f"\nSmartHomeBridge devices benchmark ({results['command']}), {results['date']}, {m['nproc']} × "
          f"{m['cpu_model']}, load average {m['loadavg_before'][0]:.2f} before, {results['loadavg_after'][0]:.2f} after, "
          f"{results['elapsed_s']:.0f} s")
    print(render_text(rows))
    for name in failed:
        print(f"{name}: FAILED: {results['errors'][name]}")
    print(f"\nresults: {path.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
