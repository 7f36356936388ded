"""Homie 5 end-to-end (README, "Homie"): the built bridge with homie.enabled on a private
mosquitto on loopback, read by ebus-sdk's Homie 5 Controller (a consumer from PyPI) and by strict
checks of the convention's MUST rules written here (ids, payloads, $description fields, retained
messages, the lifecycle). Prints one line per check and `N passed, N failed` last.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import paho.mqtt.client as paho
from ebus_sdk.homie import Controller

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BRIDGE = os.environ.get("BRIDGE") or os.path.join(ROOT, ".build", "debug", "smarthome-bridge")
HOST = "127.0.0.1"
PREFIX = "homie"
ROOT_DEVICE = "smarthome-bridge"
ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
FLOAT = re.compile(r"^-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?$")
DATATYPES = {"integer", "float", "boolean", "string", "enum", "color", "datetime", "duration", "json"}
STATES = {"init", "ready", "disconnected", "sleeping", "lost"}
DESCRIPTION_FIELDS = {"homie", "version", "nodes", "name", "type", "children", "root", "parent", "extensions"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for(what: str, check, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {timeout}s")
        time.sleep(0.1)


class Recorder:
    """Every message under homie/5/ with its retain flag, from a fresh subscription."""

    def __init__(self, port: int):
        self.lock = threading.Lock()
        self.messages: list[tuple[str, bytes, bool]] = []
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"homie-recorder-{os.getpid()}")
        self.client.on_message = self._message
        self.client.on_connect = lambda c, *_: c.subscribe(f"{PREFIX}/5/#", qos=1)
        self.client.connect(HOST, port)
        self.client.loop_start()

    def _message(self, client, userdata, message) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload), bool(message.retain)))

    def latest(self) -> dict[str, bytes]:
        with self.lock:
            return {t: p for t, p, _ in self.messages}

    def stop(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def strict_problems(messages: dict[str, bytes], retained: dict[str, bool]) -> list[str]:
    """The convention's MUST rules for what the bridge publishes under homie/5/."""
    problems = []
    devices = {}
    for topic, payload in messages.items():
        levels = topic.split("/")
        if levels[:2] != [PREFIX, "5"]:
            problems.append(f"{topic}: not under {PREFIX}/5/")
            continue
        for level in levels[2:]:
            if not (ID.match(level) or level in ("$state", "$description", "set")):
                problems.append(f"{topic}: level {level!r} is not a Homie id")
        if not retained.get(topic, False) and not topic.endswith("/set"):
            problems.append(f"{topic}: not retained")
        if payload.startswith(b"\xef\xbb\xbf"):
            problems.append(f"{topic}: UTF-8 BOM")
        if len(levels) == 4 and levels[3] == "$state" and payload.decode() not in STATES:
            problems.append(f"{topic}: state {payload!r}")
        if len(levels) == 4 and levels[3] == "$description":
            devices[levels[2]] = json.loads(payload)
    for device, d in devices.items():
        unknown = set(d) - DESCRIPTION_FIELDS
        if unknown:
            problems.append(f"{device}: unknown $description fields {unknown}")
        if d.get("homie") != "5.0" or not isinstance(d.get("version"), int) or not isinstance(d.get("name"), str):
            problems.append(f"{device}: homie/version/name {d.get('homie')!r} {d.get('version')!r} {d.get('name')!r}")
        for node_id, node in d.get("nodes", {}).items():
            if not ID.match(node_id):
                problems.append(f"{device}: node id {node_id!r}")
            for prop_id, prop in node.get("properties", {}).items():
                if not ID.match(prop_id):
                    problems.append(f"{device}/{node_id}: property id {prop_id!r}")
                if prop.get("datatype") not in DATATYPES:
                    problems.append(f"{device}/{node_id}/{prop_id}: datatype {prop.get('datatype')!r}")
                value = messages.get(f"{PREFIX}/5/{device}/{node_id}/{prop_id}")
                if value is None:
                    continue
                text = value.decode()
                if prop["datatype"] == "float" and not FLOAT.match(text):
                    problems.append(f"{device}/{node_id}/{prop_id}: float payload {text!r}")
                if prop["datatype"] == "boolean" and text not in ("true", "false"):
                    problems.append(f"{device}/{node_id}/{prop_id}: boolean payload {text!r}")
        if "root" in d and d["root"] not in devices:
            problems.append(f"{device}: root {d['root']!r} has no $description")
    return problems


class Run:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="homie-e2e-")
        self.port = free_port()
        conf = os.path.join(self.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write(f"listener {self.port} {HOST}\nallow_anonymous true\npersistence false\n")
        self.broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", conf], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        wait_for("mosquitto listening", lambda: self._listening(), 10)
        self.bridge = None

    def _listening(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1):
                return True
        except OSError:
            return False

    def start_bridge(self) -> None:
        env = dict(os.environ, SMARTHOME_MQTT_URL=f"mqtt://{HOST}:{self.port}", SMARTHOME_HTTP_PORT=str(free_port()),
                   SMARTHOME_STORAGE_PATH=os.path.join(self.dir, "bridge.sqlite"), SMARTHOME_SOURCE_INTERVAL="1",
                   SMARTHOME_SOURCE_SEED="7", SMARTHOME_HOMIE_ENABLED="true")
        self.bridge = subprocess.Popen([BRIDGE, "--config", os.path.join(ROOT, "config", "bridge.yaml")], env=env,
                                       cwd=self.dir, stdout=open(os.path.join(self.dir, "bridge.log"), "a"),
                                       stderr=subprocess.STDOUT)

    def stop_bridge(self, sig: int) -> None:
        self.bridge.send_signal(sig)
        self.bridge.wait(15)

    def close(self) -> None:
        for proc in (self.bridge, self.broker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)


def main() -> int:
    run = Run()
    results: list[tuple[str, str | None]] = []

    def check(name: str, body) -> None:
        try:
            body()
            results.append((name, None))
            print(f"ok   {name}", flush=True)
        except Exception as exc:  # a failed check is reported, the others still run
            results.append((name, f"{type(exc).__name__}: {exc}"))
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)

    controller = None
    recorder = None
    try:
        run.start_bridge()
        controller = Controller(mqtt_cfg={"host": HOST, "port": run.port}, homie_domain=PREFIX,
                                root_device_id=ROOT_DEVICE)
        controller.start_discovery()
        devices = {"smarthome-1": "Cemalettin", "smarthome-2": "Mehmet"}

        def discovered():
            def ready():
                return all(controller.get_effective_state(d) == "ready" for d in [ROOT_DEVICE, *devices]) and \
                    all((controller.get_device(d).properties.get("kitchen") or {}).get("temperature") for d in devices)
            wait_for("the controller seeing the root and both homes ready, with values", ready)
            root = controller.get_device(ROOT_DEVICE)
            assert sorted(root.description["children"]) == sorted(devices), root.description
            for device_id, username in devices.items():
                d = controller.get_device(device_id).description
                assert d["name"] == f"{username} home" and d["root"] == ROOT_DEVICE, d
                assert len(d["nodes"]) == 8, sorted(d["nodes"])
                kitchen = d["nodes"]["kitchen"]["properties"]
                assert kitchen["temperature"] == {"name": "Temperature", "datatype": "float", "unit": "°C"}, kitchen
                assert kitchen["humidity"]["unit"] == "%" and kitchen["gas"]["datatype"] == "boolean", kitchen
                assert kitchen["lights"]["settable"] is True and kitchen["lights"]["datatype"] == "boolean", kitchen
                assert "settable" not in kitchen["gas"], kitchen

        check("ebus-sdk's controller discovers the tree: root, two homes, 8 rooms each, datatypes and units",
              discovered)

        def strict():
            time.sleep(1)  # a fresh subscriber gets the retained state at once
            nonlocal recorder
            recorder = Recorder(run.port)
            wait_for("the retained homie/5 state", lambda: len(recorder.latest()) > 60, 10)
            time.sleep(0.5)
            with recorder.lock:
                first = {}
                for t, _, r in recorder.messages:
                    first.setdefault(t, r)
            problems = strict_problems(recorder.latest(), first)
            assert not problems, "\n    ".join(problems[:15])

        check("every message follows Homie 5's MUST rules (ids, retained, payloads, $description)", strict)

        def values_follow():
            def same():
                device = controller.get_device("smarthome-1")
                mqtt = recorder.latest()
                value = device.properties.get("kitchen", {}).get("temperature")
                return value and mqtt.get("homie/5/smarthome-1/kitchen/temperature", b"").decode() == value
            wait_for("the controller's temperature equal to the retained property", same)
            before = controller.get_device("smarthome-1").properties["livingroom"]["temperature"]
            wait_for("a new reading reaching the controller",
                     lambda: controller.get_device("smarthome-1").properties["livingroom"]["temperature"] != before, 30)

        check("readings reach the controller as property values", values_follow)

        def set_lights():
            for value in ("true", "false"):
                assert controller.set_property("smarthome-1", "kitchen", "lights", value), "set_property failed"
                wait_for(f"kitchen lights {value} in the controller",
                         lambda: controller.get_device("smarthome-1").properties["kitchen"]["lights"] == value, 10)
                word = "ON" if value == "true" else "OFF"
                out = subprocess.run(["mosquitto_sub", "-h", HOST, "-p", str(run.port), "-C", "1", "-W", "5",
                                      "-t", "smarthome/1/kitchen/lights"], capture_output=True, text=True)
                assert out.stdout.strip() == word, f"smarthome/1/kitchen/lights {out.stdout!r}, want {word}"
            events = subprocess.Popen(["mosquitto_sub", "-h", HOST, "-p", str(run.port), "-C", "1", "-W", "10",
                                       "-t", "smarthome/1/events"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)  # subscribed before the command: events are not retained
            assert controller.set_property("smarthome-1", "kitchen", "lights", "maybe"), "set_property failed"
            out, _ = events.communicate(timeout=15)
            assert '"reason":"bad_payload"' in out, f"events: {out!r}"
            assert controller.get_device("smarthome-1").properties["kitchen"]["lights"] == "false"

        check("set_property on a light switches it through the command path; a bad payload is rejected",
              set_lights)

        def killed():
            run.stop_bridge(signal.SIGKILL)
            try:
                wait_for("the root lost (its will) and every home lost with it",
                         lambda: all(controller.get_effective_state(d) == "lost" for d in [ROOT_DEVICE, *devices]))
            except AssertionError as exc:
                states = {d: (controller.get_device(d).state, controller.get_effective_state(d))
                          for d in [ROOT_DEVICE, *devices]}
                raise AssertionError(f"{exc}; (own, effective) states {states}") from None

        check("SIGKILL: the root's will says lost, and the homes are lost through it", killed)

        def restarted_and_stopped():
            run.start_bridge()
            wait_for("everything ready again",
                     lambda: all(controller.get_effective_state(d) == "ready" for d in [ROOT_DEVICE, *devices]))
            run.stop_bridge(signal.SIGTERM)
            wait_for("every device disconnected after a clean stop",
                     lambda: all(controller.get_device(d).state == "disconnected" for d in [ROOT_DEVICE, *devices]))

        check("restart: ready again; SIGTERM: every device disconnected", restarted_and_stopped)
    finally:
        if controller is not None:
            controller.stop()
        if recorder is not None:
            recorder.stop()
        run.close()
    failed = sum(1 for _, problem in results if problem is not None)
    if failed == 0:
        shutil.rmtree(run.dir, ignore_errors=True)
    else:
        print(f"work directory kept: {run.dir}")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
