#!/usr/bin/env python3
"""What a reload of the demo config costs (README, "Managing the home"; bench/README.md).

    python3 bench/reload.py                 # 5 rounds of each case
    python3 bench/reload.py --rounds 10 --keep

The bridge on config/bridge.yaml (the demo: 2 users, 16 rooms) with its own mosquitto. The
simulator is slowed to one step an hour (source.interval) so that the messages counted are the
reload's: a `mosquitto_sub -t '#'` counts every message the broker delivers after the retained
state has arrived. Each round sends SIGHUP for three files in turn:

  unchanged   the same file again
  add+remove  user 1 gets an Office (4 sensors) and loses the Balcony
  back        the demo file again (the Office goes, the Balcony comes back)

and reports, per case, the bridge's own time for the reload (its `config reloaded ... ms=` log line,
from reading the file to the last message handed to libmosquitto) and the messages delivered.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "support"))
import bridgetest as bt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROOMS = "    rooms: [Livingroom, Bathroom, Bedroom, Kitchen, Garden, Saloon, Babyroom, Balcony]\n"
EDITED = "    rooms: [Livingroom, Bathroom, Bedroom, Kitchen, Garden, Saloon, Babyroom, Office]\n"


def quiet(path: Path, seconds: float = 1.0, timeout: float = 30) -> int:
    """Waits until the subscriber's file has not grown for `seconds`; returns its line count."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        count = path.read_text().count("\n") if path.exists() else 0
        if count != last:
            last, since = count, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return count
        time.sleep(0.05)
    return last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder with the logs")
    options = parser.parse_args()
    directory = bt.temporary_directory("reload-bench")
    counter = None
    try:
        demo = (ROOT / "config" / "bridge.yaml").read_text()
        assert ROOMS in demo, "the demo config's rooms of user 1 changed; update bench/reload.py"
        config = directory / "bridge.yaml"
        config.write_text(demo)
        broker = bt.Broker(directory / "broker")
        bridge = bt.Bridge(directory / "bridge", broker, config, env={
            "SMARTHOME_SOURCE_INTERVAL": "3600", "SMARTHOME_SOURCE_SEED": "42"})
        bridge.start()
        bt.wait_until(lambda: "recorded the announced Home Assistant configs" in bridge.log_path.read_text(), 20,
                      message="the discovery sweep")
        received = directory / "received.txt"
        with received.open("w") as out:
            counter = subprocess.Popen(["mosquitto_sub", "-h", bt.HOST, "-p", str(broker.port), "-q", "1",
                                        "-t", "#", "-F", "%t"], stdout=out, stderr=subprocess.DEVNULL)
        retained = quiet(received)
        cases = {"unchanged": demo, "add+remove": demo.replace(ROOMS, EDITED), "back": demo}
        results: dict[str, dict[str, list]] = {name: {"ms": [], "messages": []} for name in cases}
        for _ in range(options.rounds):
            for name, text in cases.items():
                config.write_text(text)
                before = quiet(received)
                reloads = bridge.log_path.read_text().count("config reloaded")
                bridge.process.popen.send_signal(signal.SIGHUP)
                bt.wait_until(lambda: bridge.log_path.read_text().count("config reloaded") > reloads, 20,
                              message="the reload")
                after = quiet(received)
                line = [l for l in bridge.log_path.read_text().splitlines() if "config reloaded" in l][-1]
                results[name]["ms"].append(float(re.search(r"ms=([0-9.]+)", line).group(1)))
                results[name]["messages"].append(after - before)
        connections = bridge.log_path.read_text().count("connected to broker")
        print(f"demo config, {options.rounds} rounds; retained state at subscribe: {retained} messages; "
              f"bridge connections: {connections}")
        print("| reload | time (bridge, median ms) | messages delivered (median) |")
        print("|---|---|---|")
        for name, figures in results.items():
            print(f"| {name} | {statistics.median(figures['ms']):.1f} | {statistics.median(figures['messages']):.0f} |")
        out = ROOT / "bench" / "results"
        out.mkdir(parents=True, exist_ok=True)
        (out / "latest-reload.json").write_text(json.dumps({"rounds": options.rounds, "retained": retained,
                                                            "connections": connections, "results": results}, indent=2))
        bridge.stop()
        broker.stop()
        return 0
    finally:
        if counter is not None:
            counter.terminate()
        bt.stop_all()
        if options.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
