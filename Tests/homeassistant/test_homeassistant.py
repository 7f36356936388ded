"""End-to-end tests of the bridge against a real Home Assistant, all on loopback.

    python3 Tests/homeassistant/test_homeassistant.py [-k SUBSTRING]

Starts its own mosquitto, a headless Home Assistant (`hass --skip-pip` from the virtualenv that
setup_venv.sh builds, with a minimal configuration.yaml in a fresh directory), onboards it through
its REST API, adds the MQTT integration through the config-flow API, then runs the bridge on the
demo config and checks what Home Assistant makes of it. Standard library only, and the helpers
Tests/support/bridgetest.py shares with the other Python tests (ports, processes, mosquitto, the bridge).

Environment: HA_VENV (default .build/ha-venv), BRIDGE (default .build/debug/smarthome-bridge),
BRIDGE_CONFIG (default config/bridge.yaml), HA_TEST_KEEP=1 keeps the work directory,
MOSQUITTO (default /usr/sbin/mosquitto, where it is), MOSQUITTO_SUB / MOSQUITTO_PUB.

Prints one line per test and, last, `N passed, N failed`; exits 1 when any test failed.
Every wait has a timeout and every process it starts is stopped at the end.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import bridgetest  # noqa: E402  (Tests/support/bridgetest.py: ports, processes, mosquitto, the bridge)
from bridgetest import HOST, spawn, stop_process  # noqa: E402

ROOT = str(bridgetest.ROOT)
VENV = os.environ.get("HA_VENV") or os.path.join(ROOT, ".build", "ha-venv")
BRIDGE_CONFIG = os.environ.get("BRIDGE_CONFIG") or os.path.join(ROOT, "config", "bridge.yaml")
MOSQUITTO_SUB = os.environ.get("MOSQUITTO_SUB") or "mosquitto_sub"
BASE = "smarthome"
PREFIX = "homeassistant"
# The demo config's first user's password (config/bridge.yaml says so): to ask the bridge's own
# API whether it applied a light command.
DEMO_PASSWORDS = {"Cemalettin": "12345", "Mehmet": "123456"}
# The room that the "room removed" test drops: (user id, room name).
REMOVED_ROOM = ("2", "Balcony")

HA_START_TIMEOUT = 120  # first start also writes .storage; ~2 s here
HA_STOP_TIMEOUT = 30
ENTITY_TIMEOUT = 60
BRIDGE_TIMEOUT = 20

TIMINGS: dict[str, float] = {}


def log(*parts: object) -> None:
    print(*parts, flush=True)


class HTTPFailure(AssertionError):
    """An HTTP error answer: a failure when it lasts, a retry inside wait_for."""


def wait_for(what: str, check, timeout: float, interval: float = 0.5):
    """Calls check() until it returns a true value or an empty problem list; raises with the last
    problems after timeout seconds. check returns (ok, detail) or a list of problems."""
    last = None

    def attempt():
        nonlocal last
        try:
            result = check()
        except (OSError, urllib.error.URLError, ValueError, KeyError, HTTPFailure) as exc:  # not up yet
            result = [f"{type(exc).__name__}: {exc}"]
        if isinstance(result, list):
            if not result:
                return (None,)
            last = result
            return None
        return (result,) if result else None

    done = bridgetest.poll(attempt, timeout, interval)
    if done:
        return done[0]
    if isinstance(last, list):
        more = f" (and {len(last) - 12} more)" if len(last) > 12 else ""
        raise AssertionError(f"{what}: still not so after {timeout}s:\n    " + "\n    ".join(map(str, last[:12])) + more)
    raise AssertionError(f"{what}: still not so after {timeout}s")


class TimedOut(BaseException):
    """SIGTERM (run.sh's timeout): stop the tests, clean up, report."""


def tail(path: str, lines: int = 30, pattern: str | None = None) -> str:
    return bridgetest.tail(path, lines, pattern, indent="      ")


# --- the demo config ----------------------------------------------------------------------------


class Entity:
    """One entity the bridge must announce, derived from the bridge's config alone."""

    def __init__(self, user: dict, room: str, sensor: str):
        self.user_id = user["id"]
        self.username = user["username"]
        self.room = room
        self.room_id = room.lower()
        self.sensor = sensor
        self.node_id = f"{BASE}_{self.user_id}_{self.room_id}"
        self.state_topic = f"{BASE}/{self.user_id}/{self.room_id}/{sensor}"
        self.device_name = f"{self.username} {room}"
        self.unit = self.state_class = self.device_class = None
        if sensor in ("temperature", "humidity"):
            self.component = "sensor"
            self.device_class = sensor
            self.unit = "°C" if sensor == "temperature" else "%"
            self.state_class = "measurement"
        elif sensor in ("movement", "gas"):
            self.component = "binary_sensor"
            self.device_class = "motion" if sensor == "movement" else "gas"
        else:
            self.component = "light"
        self.config_topic = f"{PREFIX}/{self.component}/{self.node_id}/{sensor}/config"

    def __repr__(self) -> str:
        return f"{self.component} {self.username}/{self.room}/{self.sensor}"


CONNECTIVITY_TOPIC = f"{PREFIX}/binary_sensor/{BASE}_bridge/connectivity/config"


def legacy_configs(entities: list[Entity]) -> dict[str, dict]:
    """The discovery configs of the bridge before `default_entity_id` (README, "Home Assistant"):
    `object_id` = `unique_id` and only `<base>/bridge/state` as availability. Published before the
    bridge starts, they make the install the current bridge upgrades: every entity id in HA's
    registry comes from an `object_id`, and must stay when the new configs replace these."""
    bridge_device = f"{BASE}_bridge"
    configs = {CONNECTIVITY_TOPIC: {
        "name": "Connectivity", "unique_id": f"{bridge_device}_connectivity", "object_id": f"{bridge_device}_connectivity",
        "state_topic": f"{BASE}/bridge/state", "payload_on": "online", "payload_off": "offline",
        "device_class": "connectivity", "entity_category": "diagnostic",
        "device": {"identifiers": [bridge_device], "name": f"SmartHomeBridge ({BASE})"}}}
    for e in entities:
        config = {"name": e.sensor.capitalize(), "unique_id": f"{e.node_id}_{e.sensor}", "object_id": f"{e.node_id}_{e.sensor}",
                  "state_topic": e.state_topic, "availability": [{"topic": f"{BASE}/bridge/state"}],
                  "availability_mode": "all", "payload_available": "online", "payload_not_available": "offline",
                  "device": {"identifiers": [e.node_id], "name": e.device_name, "via_device": bridge_device}}
        if e.component == "sensor":
            config.update(device_class=e.device_class, unit_of_measurement=e.unit, state_class=e.state_class)
        elif e.component == "binary_sensor":
            config.update(device_class=e.device_class, payload_on="ON", payload_off="OFF")
        else:
            config.update(command_topic=f"{e.state_topic}/set", payload_on="ON", payload_off="OFF", optimistic=False)
        configs[e.config_topic] = config
    return configs


def read_users(path: str) -> list[dict]:
    """The users of a bridge config in the demo's shape (`- id:`, `username:`, `rooms: [..]`).
    A tiny reader, enough for config/bridge.yaml: the tests need no YAML library."""
    users: list[dict] = []
    in_users = False
    for raw in open(path, encoding="utf-8"):
        line = raw.split(" #")[0].rstrip()
        if re.match(r"^users:\s*$", line):
            in_users = True
            continue
        if in_users and re.match(r"^\S", line):
            in_users = False
        if not in_users:
            continue
        m = re.match(r'^\s*-\s+id:\s*"?([^"\s]+)"?', line)
        if m:
            users.append({"id": m.group(1), "rooms": []})
            continue
        m = re.match(r"^\s+username:\s*(\S+)", line)
        if m and users:
            users[-1]["username"] = m.group(1)
            continue
        m = re.match(r"^\s+rooms:\s*\[(.*)\]\s*$", line)
        if m and users:
            users[-1]["rooms"] = [r.strip() for r in m.group(1).split(",") if r.strip()]
    assert users and all(u.get("username") and u["rooms"] for u in users), f"cannot read the users of {path}"
    return users


def expected_entities(users: list[dict]) -> list[Entity]:
    out = []
    for user in users:
        for room in user["rooms"]:
            fourth = "gas" if room.lower() in ("kitchen", "bathroom") else "movement"
            for sensor in ("temperature", "humidity", "lights", fourth):
                out.append(Entity(user, room, sensor))
    return out


# The group the bridge's config gets (README, "Groups"): (user id, name, room names).
GROUP = ("1", "downstairs", ["Kitchen", "Livingroom"])
# The entities of each user's own device: every light, the group, the events; (user id, unique_id suffix).
EVENT_TYPES = ["gas", "alarm", "command_rejected"]
HOME_LIGHTS = [("1", "lights"), ("1", f"group_{GROUP[1]}"), ("2", "lights")]
HOME_ENTITIES = HOME_LIGHTS + [(u, t) for u in ("1", "2") for t in EVENT_TYPES]


def home_light_unique_id(user_id: str, suffix: str) -> str:
    return f"{BASE}_{user_id}_home_{suffix}"


def config_with_group(src: str, dst: str) -> None:
    """Copies the bridge config, giving user GROUP[0] the group GROUP under its rooms."""
    out, current, added = [], None, False
    for line in open(src, encoding="utf-8"):
        out.append(line)
        m = re.match(r'^\s*-\s+id:\s*"?([^"\s]+)"?', line)
        if m:
            current = m.group(1)
        if current == GROUP[0] and re.match(r"^\s+rooms:\s*\[", line) and not added:
            indent = line[:len(line) - len(line.lstrip())]
            out.append(f"{indent}groups:\n{indent}  - {{ name: {GROUP[1]}, rooms: [{', '.join(GROUP[2])}] }}\n")
            added = True
    assert added, f"user {GROUP[0]} has no rooms line in {src}"
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(out)


def config_without_room(src: str, dst: str, user_id: str, room: str) -> None:
    """Writes a copy of the bridge config without one room of one user."""
    out, current = [], None
    for line in open(src, encoding="utf-8"):
        m = re.match(r'^\s*-\s+id:\s*"?([^"\s]+)"?', line)
        if m:
            current = m.group(1)
        m = re.match(r"^(\s+rooms:\s*\[)(.*)(\].*)$", line.rstrip("\n"))
        if m and current == user_id:
            rooms = [r.strip() for r in m.group(2).split(",") if r.strip() != room]
            assert len(rooms) < len(m.group(2).split(",")), f"{room} not among user {user_id}'s rooms"
            line = m.group(1) + ", ".join(rooms) + m.group(3) + "\n"
        out.append(line)
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(out)


# --- mosquitto ----------------------------------------------------------------------------------


def start_broker(workdir: str) -> bridgetest.Broker:
    """mosquitto (anonymous, loopback) in workdir/mosquitto, logging notices too."""
    return bridgetest.Broker(os.path.join(workdir, "mosquitto"), log_types=("error", "warning", "notice"))


class Watch:
    """Every message under the bridge's base topic and the discovery prefix, as mosquitto_sub
    sees them, with arrival times."""

    def __init__(self, broker: bridgetest.Broker):
        self.lock = threading.Lock()
        self.messages: list[tuple[float, str, str, bool]] = []  # (time, topic, payload, retained)
        self.latest: dict[str, str] = {}
        self.proc = spawn(
            [MOSQUITTO_SUB, "-h", HOST, "-p", str(broker.port), "-q", "1", "-i", f"ha-e2e-watch-{os.getpid()}",
             "-t", f"{BASE}/#", "-t", f"{PREFIX}/#", "-F", "%r %t %x"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        time.sleep(0.3)

    def _read(self) -> None:
        for raw in self.proc.stdout:
            parts = raw.decode("utf-8", "replace").rstrip("\n").split(" ", 2)
            if len(parts) < 2:
                continue
            retained, topic = parts[0] == "1", parts[1]
            payload = bytes.fromhex(parts[2]).decode("utf-8", "replace") if len(parts) > 2 else ""
            with self.lock:
                self.messages.append((time.time(), topic, payload, retained))
                self.latest[topic] = payload

    def value(self, topic: str) -> str | None:
        with self.lock:
            return self.latest.get(topic)

    def since(self, t: float, topic: str | None = None) -> list[tuple[float, str, str, bool]]:
        with self.lock:
            return [m for m in self.messages if m[0] >= t and (topic is None or m[1] == topic)]

    def recent_values(self, topic: str, seconds: float) -> set[str]:
        """The latest value and every value published on topic within the last seconds: what HA may
        show at this moment, given that readings change every second."""
        t = time.time() - seconds
        with self.lock:
            values = {m[2] for m in self.messages if m[1] == topic and m[0] >= t}
            if topic in self.latest:
                values.add(self.latest[topic])
        return values

    def stop(self) -> None:
        stop_process(self.proc)


# --- Home Assistant -----------------------------------------------------------------------------


class WebSocket:
    """Just enough of RFC 6455 for HA's websocket API: masked text frames out, unfragmented or
    fragmented text frames in, pings answered."""

    def __init__(self, port: int, path: str, timeout: float = 15):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("websocket handshake: connection closed")
            buf += chunk
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        status = head.split(b"\r\n")[0]
        if b" 101 " not in status:
            raise OSError(f"websocket handshake: {status!r}")

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode: int, data: bytes) -> None:
        head = bytes([0x80 | opcode])
        n = len(data)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def send(self, obj) -> None:
        self._send_frame(0x1, json.dumps(obj).encode())

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            data = self._exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 0x9:
                self._send_frame(0xA, data)
                continue
            if opcode == 0x8:
                raise OSError("websocket closed by server")
            if opcode in (0x1, 0x0):
                message += data
                if b0 & 0x80:
                    return json.loads(message)

    def close(self) -> None:
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


class HomeAssistant:
    def __init__(self, workdir: str, broker: bridgetest.Broker):
        self.port = bridgetest.free_port()
        self.broker = broker
        self.dir = os.path.join(workdir, "ha-config")
        os.makedirs(self.dir)
        self.logs: list[str] = []  # one log file per start: HA rotates its log at start
        self.out = os.path.join(self.dir, "hass.stdout")
        self.url = f"http://{HOST}:{self.port}"
        self.client_id = self.url + "/"
        self.access_token = self.refresh_token = None
        self.proc: subprocess.Popen | None = None
        # A minimal configuration, not default_config: (which would load integrations that want
        # the internet or hardware). HA still sets up its default integrations (frontend, person,
        # ...); setup_venv.sh installs their requirements.
        with open(os.path.join(self.dir, "configuration.yaml"), "w") as f:
            f.write(f"""homeassistant:
  name: SmartHomeBridge e2e
  latitude: 0
  longitude: 0
  elevation: 0
  unit_system: metric
  time_zone: UTC
  currency: EUR
  country: DE
http:
  server_host: {HOST}
  server_port: {self.port}
api:
config:
onboarding:
logger:
  default: warning
  logs:
    homeassistant.components.mqtt: info
    homeassistant.setup: info
    homeassistant.bootstrap: info
""")

    # process

    def start(self) -> float:
        hass = os.path.join(VENV, "bin", "hass")
        assert os.access(hass, os.X_OK), f"{hass} missing: run Tests/homeassistant/setup_venv.sh"
        start = time.monotonic()
        self.logs.append(os.path.join(self.dir, f"home-assistant-{len(self.logs) + 1}.log"))
        self.proc = spawn([hass, "--skip-pip", "-c", self.dir, "--log-file", self.log],
                          stdout=open(self.out, "a"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"hass exited with {self.proc.returncode}:\n{tail(self.log, 20)}\n{tail(self.out, 20)}")
            # /api/onboarding answers without a token, before and after onboarding.
            with urllib.request.urlopen(self.url + "/api/onboarding", timeout=5) as r:
                return r.status == 200

        wait_for("Home Assistant answering on /api/onboarding", up, HA_START_TIMEOUT, 0.2)
        return time.monotonic() - start

    @property
    def log(self) -> str:
        return self.logs[-1] if self.logs else os.path.join(self.dir, "home-assistant-1.log")

    def stop(self) -> float:
        return stop_process(self.proc, HA_STOP_TIMEOUT, signal.SIGTERM, log=log)

    # REST

    def request(self, method: str, path: str, body=None, form: bool = False, auth: bool = True, retry: bool = True):
        headers = {}
        data = None
        if body is not None:
            if form:
                data = urllib.parse.urlencode(body).encode()
                headers["Content-Type"] = "application/x-www-form-urlencoded"
            else:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
        if auth:
            headers["Authorization"] = f"Bearer {self.access_token}"
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                text = r.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 401 and auth and retry and self.refresh_token:
                self.refresh()
                return self.request(method, path, body, form, auth, retry=False)
            raise HTTPFailure(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
        return json.loads(text) if text else None

    def onboard(self) -> None:
        steps = self.request("GET", "/api/onboarding", auth=False)
        assert {"step": "user", "done": False} in steps, f"onboarding not at the user step: {steps}"
        user = self.request("POST", "/api/onboarding/users", {
            "client_id": self.client_id, "name": "E2E", "username": "e2e",
            "password": "e2e-password-" + base64.b16encode(os.urandom(6)).decode(), "language": "en"}, auth=False)
        token = self.request("POST", "/auth/token", {
            "grant_type": "authorization_code", "code": user["auth_code"], "client_id": self.client_id},
            form=True, auth=False)
        self.access_token, self.refresh_token = token["access_token"], token["refresh_token"]
        # core_config (it wants to detect location over the internet) and the later steps are
        # left undone on purpose: the API works once the user exists.

    def refresh(self) -> None:
        token = self.request("POST", "/auth/token", {
            "grant_type": "refresh_token", "refresh_token": self.refresh_token, "client_id": self.client_id},
            form=True, auth=False, retry=False)
        self.access_token = token["access_token"]

    def add_mqtt(self) -> dict:
        flow = self.request("POST", "/api/config/config_entries/flow", {"handler": "mqtt", "show_advanced_options": False})
        assert flow.get("type") == "form" and flow.get("step_id") == "broker", f"mqtt flow: {flow}"
        done = self.request("POST", f"/api/config/config_entries/flow/{flow['flow_id']}",
                            {"broker": HOST, "port": self.broker.port})
        assert done.get("type") == "create_entry", f"mqtt flow did not create an entry: {done}"
        assert done["result"]["state"] == "loaded", f"mqtt entry not loaded: {done['result']}"
        return done["result"]

    def states(self) -> dict[str, dict]:
        return {s["entity_id"]: s for s in self.request("GET", "/api/states")}

    def call(self, domain: str, service: str, data: dict):
        return self.request("POST", f"/api/services/{domain}/{service}", data)

    def ws(self, *commands: dict) -> list:
        """Runs websocket commands (config/entity_registry/list, ...) and returns their results."""
        sock = WebSocket(self.port, "/api/websocket")
        try:
            assert sock.recv()["type"] == "auth_required"
            sock.send({"type": "auth", "access_token": self.access_token})
            reply = sock.recv()
            assert reply["type"] == "auth_ok", f"websocket auth: {reply}"
            results = []
            for i, command in enumerate(commands, start=1):
                sock.send({"id": i, **command})
                while True:
                    reply = sock.recv()
                    if reply.get("id") == i and reply.get("type") == "result":
                        break
                assert reply.get("success"), f"websocket {command['type']}: {reply}"
                results.append(reply["result"])
            return results
        finally:
            sock.close()

    def registry(self) -> tuple[dict[str, dict], dict[str, dict]]:
        """(mqtt entities by unique_id, devices by id)."""
        entities, devices = self.ws({"type": "config/entity_registry/list"}, {"type": "config/device_registry/list"})
        return ({e["unique_id"]: e for e in entities if e.get("platform") == "mqtt"},
                {d["id"]: d for d in devices})


# --- the bridge ---------------------------------------------------------------------------------


class Bridge(bridgetest.Bridge):
    """The bridge on a copy of BRIDGE_CONFIG in workdir/bridge, ready once it publishes
    bridge/state online (as `watch` sees it)."""

    def __init__(self, workdir: str, broker: bridgetest.Broker, watch: Watch):
        directory = os.path.join(workdir, "bridge")
        os.makedirs(directory)
        config = os.path.join(directory, "bridge.yaml")
        config_with_group(BRIDGE_CONFIG, config)
        super().__init__(directory, broker, config,
                         env={"SMARTHOME_SOURCE_INTERVAL": "1", "SMARTHOME_SOURCE_SEED": "7"})
        self.watch = watch
        self.log = str(self.log_path)

    def start(self, config: str | None = None) -> float:
        t0 = time.time()
        with open(self.log, "a") as out:
            out.write(f"--- start {time.strftime('%H:%M:%S')} config={config or self.config}\n")

        def online():
            return any(m[2] == "online" for m in self.watch.since(t0, f"{BASE}/bridge/state"))

        return super().start(config, ready=online, timeout=BRIDGE_TIMEOUT, interval=0.1,
                             message="the bridge publishing bridge/state online")

    def stop(self, sig: int = signal.SIGTERM) -> float:
        return super().stop(sig, 15, log=log)

    def api(self, username: str, path: str, body: dict | None = None):
        base = f"http://{HOST}:{self.http_port}"
        login = urllib.request.Request(base + "/api/v1/login", method="POST",
                                       data=json.dumps({"username": username, "password": DEMO_PASSWORDS[username]}).encode(),
                                       headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(login, timeout=10) as r:
            token = json.loads(r.read())["token"]
        get = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"},
                                     data=None if body is None else json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        with urllib.request.urlopen(get, timeout=10) as r:
            return json.loads(r.read())


# --- the checks ---------------------------------------------------------------------------------


class World:
    """Broker, watcher, Home Assistant and the bridge, set up once for all tests (HA's start and
    onboarding are the slow part)."""

    def __init__(self):
        self.workdir = str(bridgetest.temporary_directory("ha-e2e"))
        self.broker = self.watch = self.ha = self.bridge = None
        self.users = read_users(BRIDGE_CONFIG)
        self.entities = expected_entities(self.users)  # less the removed room once it is removed

    def setup(self) -> None:
        log(f"work directory {self.workdir}")
        self.broker = start_broker(self.workdir)
        self.watch = Watch(self.broker)
        self.ha = HomeAssistant(self.workdir, self.broker)
        TIMINGS["ha_first_start"] = self.ha.start()
        log(f"Home Assistant up on {self.ha.url} in {TIMINGS['ha_first_start']:.1f}s (mosquitto on {self.broker.port})")
        t = time.monotonic()
        self.ha.onboard()
        entry = self.ha.add_mqtt()
        TIMINGS["ha_onboard_and_mqtt"] = time.monotonic() - t
        log(f"onboarded, MQTT entry {entry['entry_id']} {entry['state']} in {TIMINGS['ha_onboard_and_mqtt']:.1f}s")
        self.install_legacy()
        self.bridge = Bridge(self.workdir, self.broker, self.watch)
        TIMINGS["bridge_start"] = self.bridge.start()

    def install_legacy(self) -> None:
        """An existing install: HA has every entity from the earlier `object_id` configs."""
        t = time.monotonic()
        legacy = legacy_configs(self.entities)
        for topic, config in legacy.items():
            self.broker.publish(topic, json.dumps(config), retain=True)
        want = {c["unique_id"]: f"{topic.split('/')[1]}.{c['object_id']}" for topic, c in legacy.items()}

        def registered():
            by_unique, _ = self.ha.registry()
            return [f"{u}: {by_unique[u]['entity_id'] if u in by_unique else 'not registered'}, want {eid}"
                    for u, eid in want.items() if by_unique.get(u, {}).get("entity_id") != eid]

        wait_for("HA registering the earlier configs' entities by their object_id", registered, ENTITY_TIMEOUT, 1.0)
        self.legacy_ids = want
        TIMINGS["legacy_install"] = time.monotonic() - t
        log(f"earlier configs installed: {len(want)} entities by object_id in {TIMINGS['legacy_install']:.1f}s")

    def teardown(self) -> None:
        for thing in (self.bridge, self.ha, self.watch, self.broker):
            if thing is not None:
                try:
                    thing.stop()
                except Exception as exc:  # keep stopping the others
                    log(f"    stopping {type(thing).__name__}: {exc}")

    # mapping bridge entities to HA entities

    def resolve(self, entities: list[Entity]) -> tuple[dict[str, str], list[str]]:
        """entity -> HA entity_id via the retained discovery config's unique_id and HA's entity
        registry; also checks the registry's device name. Returns (ids by config topic, problems)."""
        by_unique, devices = self.ha.registry()
        ids, problems = {}, []
        for e in entities:
            payload = self.watch.value(e.config_topic)
            if not payload:
                problems.append(f"{e}: no discovery config on {e.config_topic}")
                continue
            unique_id = json.loads(payload).get("unique_id")
            entry = by_unique.get(unique_id)
            if entry is None:
                problems.append(f"{e}: unique_id {unique_id!r} not in HA's entity registry")
                continue
            device = devices.get(entry.get("device_id") or "")
            if device is None:
                problems.append(f"{e}: {entry['entity_id']} has no device")
            elif (device.get("name_by_user") or device.get("name")) != e.device_name:
                problems.append(f"{e}: device named {device.get('name')!r}, want {e.device_name!r}")
            ids[e.config_topic] = entry["entity_id"]
        return ids, problems

    def entity_problems(self, e: Entity, state: dict | None, available: bool = True) -> list[str]:
        if state is None:
            return [f"{e}: not in /api/states"]
        attrs, value = state["attributes"], state["state"]
        eid = state["entity_id"]
        if not available:
            return [] if value == "unavailable" else [f"{e} {eid}: {value!r}, want unavailable"]
        problems = []
        if not eid.startswith(e.component + "."):
            problems.append(f"{e}: is {eid}")
        for key, want in (("device_class", e.device_class), ("unit_of_measurement", e.unit), ("state_class", e.state_class)):
            if attrs.get(key) != want:
                problems.append(f"{e} {eid}: {key} {attrs.get(key)!r}, want {want!r}")
        recent = self.watch.recent_values(e.state_topic, 3)
        if value in ("unavailable", "unknown"):
            problems.append(f"{e} {eid}: {value} (MQTT {e.state_topic}: {sorted(recent)})")
        elif e.component == "sensor":
            try:
                ok = any(float(value) == float(v) for v in recent if v)
            except ValueError:
                ok = False
            if not ok:
                problems.append(f"{e} {eid}: state {value!r}, MQTT {e.state_topic} {sorted(recent)}")
        elif value not in {{"ON": "on", "OFF": "off"}.get(v) for v in recent}:
            problems.append(f"{e} {eid}: state {value!r}, MQTT {e.state_topic} {sorted(recent)}")
        return problems

    def check_all(self, entities: list[Entity], available: bool = True) -> list[str]:
        ids, problems = self.resolve(entities)
        states = self.ha.states()
        for e in entities:
            if e.config_topic in ids:
                problems += self.entity_problems(e, states.get(ids[e.config_topic]), available)
        return problems

    def bridge_connectivity(self) -> str | None:
        """The HA state of the bridge device's connectivity binary_sensor: the one discovery config
        with device_class connectivity on <base>/bridge/state."""
        unique_id = None
        with self.watch.lock:
            latest = dict(self.watch.latest)
        for topic, payload in latest.items():
            if topic.startswith(f"{PREFIX}/binary_sensor/") and topic.endswith("/config") and payload:
                config = json.loads(payload)
                if config.get("device_class") == "connectivity" and config.get("state_topic") == f"{BASE}/bridge/state":
                    unique_id = config.get("unique_id")
        if unique_id is None:
            return None
        by_unique, _ = self.ha.registry()
        entry = by_unique.get(unique_id)
        if entry is None:
            return None
        state = self.ha.states().get(entry["entity_id"])
        return state and state["state"]

    def wait_all_ok(self, what: str, timeout: float = ENTITY_TIMEOUT) -> None:
        wait_for(what, lambda: self.check_all(self.entities), timeout, 1.0)

    def entity_id(self, user_id: str, room: str, sensor: str) -> tuple[Entity, str]:
        e = next(x for x in self.entities if x.user_id == user_id and x.room == room and x.sensor == sensor)
        ids, problems = self.resolve([e])
        assert not problems, problems
        return e, ids[e.config_topic]


def test_entities(w: World) -> None:
    """Every entity of the demo config appears in /api/states with the right state, unit, device
    class and state class."""
    assert len(w.entities) == 64, f"the demo config should give 64 room entities, read {len(w.entities)}"
    t = time.monotonic()
    w.wait_all_ok("all 64 room entities in HA with the MQTT state, unit, device_class, state_class")
    TIMINGS["entities_after_bridge_start"] = time.monotonic() - t
    wait_for("the bridge's connectivity sensor on", lambda: w.bridge_connectivity() == "on", 20)
    # Each room one device, named "<username> <Room>".
    ids, _ = w.resolve(w.entities)
    by_unique, devices = w.ha.registry()
    room_devices = {by_unique[json.loads(w.watch.value(e.config_topic))["unique_id"]]["device_id"] for e in w.entities}
    assert len(room_devices) == 16, f"{len(room_devices)} devices for 16 rooms"
    # Nothing else: the 64 and the bridge's connectivity sensor.
    home = {home_light_unique_id(u, x) for u, x in HOME_ENTITIES}
    extra = sorted(e["entity_id"] for u, e in by_unique.items() if e["entity_id"] not in ids.values() and u not in home)
    assert len(extra) == 1 and extra[0].startswith("binary_sensor."), f"MQTT entities beyond the rooms': {extra}"
    missing = sorted(home - set(by_unique))
    assert not missing, f"home entities (every light, the group, the events) not in HA: {missing}"


def test_entity_ids_kept_from_object_id(w: World) -> None:
    """The current configs (default_entity_id, no object_id, the room's availability) replaced the
    earlier ones: every entity keeps the id its object_id gave it, and that id is the config's
    default_entity_id, which current HA would pick for a fresh install."""
    def updated():
        # The earlier configs' devices had no model: the current ones say `simulated`.
        by_unique, devices = w.ha.registry()
        return [f"{e}: device model {devices.get(by_unique.get(f'{e.node_id}_{e.sensor}', {}).get('device_id') or '', {}).get('model')!r}"
                for e in w.entities
                if devices.get(by_unique.get(f"{e.node_id}_{e.sensor}", {}).get("device_id") or "", {}).get("model") != "simulated"]

    wait_for("HA applying the current configs to the earlier entities", updated, ENTITY_TIMEOUT, 1.0)
    by_unique, _ = w.ha.registry()
    problems = []
    for topic in [CONNECTIVITY_TOPIC] + [e.config_topic for e in w.entities]:
        config = json.loads(w.watch.value(topic) or "{}")
        unique_id = config.get("unique_id")
        if "object_id" in config:
            problems.append(f"{topic}: still carries object_id")
        if config.get("default_entity_id") != f"{topic.split('/')[1]}.{unique_id}":
            problems.append(f"{topic}: default_entity_id {config.get('default_entity_id')!r}")
        topics = [a.get("topic") for a in config.get("availability", [])]
        if topic != CONNECTIVITY_TOPIC and (len(topics) != 2 or not topics[1].endswith("/availability")
                                            or config.get("availability_mode") != "all"):
            problems.append(f"{topic}: availability {topics} {config.get('availability_mode')}")
        entry = by_unique.get(unique_id)
        if entry is None or entry["entity_id"] != w.legacy_ids.get(unique_id):
            problems.append(f"{topic}: entity {entry and entry['entity_id']}, before the upgrade {w.legacy_ids.get(unique_id)}")
        elif entry["entity_id"] != config.get("default_entity_id"):
            problems.append(f"{topic}: entity {entry['entity_id']} is not default_entity_id {config.get('default_entity_id')}")
    assert not problems, "\n    ".join(problems[:12])
    new = sorted(u for u in by_unique if u not in w.legacy_ids)
    assert new == sorted(home_light_unique_id(u, x) for u, x in HOME_ENTITIES), \
        f"entities beyond those of the earlier configs and the new home entities: {new}"


def test_room_availability(w: World) -> None:
    """Every room publishes its availability retained; a room said offline makes its entities
    unavailable in HA (availability_mode all) and online again brings them back."""
    missing = [e.room for e in w.entities if w.watch.value(f"{BASE}/{e.user_id}/{e.room_id}/availability") != "online"]
    assert not missing, f"rooms without availability online: {sorted(set(missing))}"
    kitchen = [e for e in w.entities if e.user_id == "1" and e.room == "Kitchen"]
    topic = f"{BASE}/1/kitchen/availability"
    w.broker.publish(topic, "offline", retain=True)
    try:
        wait_for("user 1's Kitchen entities unavailable", lambda: w.check_all(kitchen, available=False), 20, 0.5)
    finally:
        w.broker.publish(topic, "online", retain=True)
    w.wait_all_ok("every entity available with the Kitchen online again", 30)


def test_reading_changes(w: World) -> None:
    """A changed reading shows up in /api/states."""
    numeric = [e for e in w.entities if e.component == "sensor"]
    ids, problems = w.resolve(numeric)
    assert not problems, problems
    states = w.ha.states()
    before = {e.config_topic: states[ids[e.config_topic]]["state"] for e in numeric}
    t0 = time.time()

    def changed():
        states = w.ha.states()
        for e in numeric:
            now = states[ids[e.config_topic]]["state"]
            published = {m[2] for m in w.watch.since(t0, e.state_topic)}
            if now != before[e.config_topic] and now in published:
                return f"{ids[e.config_topic]}: {before[e.config_topic]} -> {now}"
        return None

    detail = wait_for("a reading published after the first check showing in HA", changed, 30, 0.5)
    log(f"    {detail}")


def test_light_turn_off(w: World) -> None:
    """light.turn_off through HA reaches the bridge, which applies it; HA's state follows."""
    e, eid = w.entity_id("1", "Kitchen", "lights")
    set_topic = f"{BASE}/1/kitchen/lights/set"

    def bridge_lights() -> str:
        room = w.bridge.api("Cemalettin", "/api/v1/rooms/kitchen")
        return dict(zip(room["SensorNames"], room["SensorValues"]))["Lights"]

    def switch(service: str, want: str) -> None:
        t0 = time.time()
        w.ha.call("light", service, {"entity_id": eid})
        word = want.upper()
        wait_for(f"HA sending {word} on {set_topic}",
                 lambda: any(m[2] == word for m in w.watch.since(t0, set_topic)), 10, 0.1)
        wait_for(f"the bridge publishing {word} on {e.state_topic}", lambda: w.watch.value(e.state_topic) == word, 10, 0.1)
        wait_for(f"the bridge's API showing the kitchen lights {want}", lambda: bridge_lights().lower() == want, 10, 0.2)
        wait_for(f"{eid} {want} in HA", lambda: w.ha.states()[eid]["state"] == want, 10, 0.2)

    if w.ha.states()[eid]["state"] != "on":
        switch("turn_on", "on")
    switch("turn_off", "off")
    switch("turn_on", "on")  # and back, so both directions are seen


def test_group_light(w: World) -> None:
    """The group and every-light lights: light.turn_on/turn_off of the group in HA switches each of
    its rooms (and only those); every light of the user follows its own light; their states in HA
    follow the bridge's group states (ON only when all their lights are on)."""
    user_id, name, rooms = GROUP
    by_unique, _ = w.ha.registry()
    group_eid = by_unique[home_light_unique_id(user_id, f"group_{name}")]["entity_id"]
    all_eid = by_unique[home_light_unique_id(user_id, "lights")]["entity_id"]
    members = [w.entity_id(user_id, room, "lights")[1] for room in rooms]
    others = [w.entity_id(user_id, e.room, "lights")[1] for e in w.entities
              if e.user_id == user_id and e.sensor == "lights" and e.room not in rooms]
    group_topic = f"{BASE}/{user_id}/groups/{name}"

    def states(eids: list[str]) -> dict[str, str]:
        current = w.ha.states()
        return {eid: current[eid]["state"] for eid in eids}

    for service, want in (("turn_off", "off"), ("turn_on", "on"), ("turn_off", "off")):
        others_before = states(others)
        t0 = time.time()
        w.ha.call("light", service, {"entity_id": group_eid})
        wait_for(f"HA sending {want.upper()} on {group_topic}/set",
                 lambda: any(m[2] == want.upper() for m in w.watch.since(t0, f"{group_topic}/set")), 10, 0.1)
        wait_for(f"the group's rooms {want} in HA",
                 lambda: [f"{eid} {v}" for eid, v in states(members).items() if v != want], 15, 0.2)
        wait_for(f"the bridge publishing {want.upper()} on {group_topic}", lambda: w.watch.value(group_topic) == want.upper(), 10, 0.1)
        wait_for(f"{group_eid} {want} in HA", lambda: states([group_eid])[group_eid] == want, 10, 0.2)
        assert states(others) == others_before, f"rooms outside the group changed: {others_before} -> {states(others)}"

    t0 = time.time()
    w.ha.call("light", "turn_on", {"entity_id": all_eid})
    wait_for("every light of the user on in HA",
             lambda: [f"{eid} {v}" for eid, v in states(members + others).items() if v != "on"], 15, 0.2)
    wait_for(f"{all_eid} and {group_eid} on in HA", lambda: set(states([all_eid, group_eid]).values()) == {"on"}, 10, 0.2)
    w.ha.call("light", "turn_off", {"entity_id": members[0]})
    wait_for(f"{group_eid} and {all_eid} off once one of their lights is",
             lambda: set(states([all_eid, group_eid]).values()) == {"off"}, 10, 0.2)


def test_event_entities(w: World) -> None:
    """Each user's events are HA event entities: a refused command (made by the bridge), an alarm
    that fires (set through the bridge's API) and a gas event (in the bridge's shape: the simulator
    makes them too rarely to wait for) each fire their own entity, with the event's fields as
    attributes, and no other."""
    by_unique, _ = w.ha.registry()
    eids = {t: by_unique[home_light_unique_id("1", t)]["entity_id"] for t in EVENT_TYPES}

    def states() -> dict[str, dict]:
        current = w.ha.states()
        return {t: current[eid] for t, eid in eids.items()}

    def fired(kind: str, before: dict[str, dict], **attributes) -> None:
        def check():
            now = states()
            problems = [f"{t} changed ({before[t]['state']} -> {now[t]['state']})" for t in EVENT_TYPES
                        if t != kind and now[t]["state"] != before[t]["state"]]
            if now[kind]["state"] == before[kind]["state"]:
                problems.append(f"{eids[kind]} not fired ({now[kind]['state']})")
            else:
                attrs = now[kind]["attributes"]
                problems += [f"{eids[kind]} {k}={attrs.get(k)!r}, want {v!r}"
                             for k, v in dict(event_type=kind, **attributes).items() if attrs.get(k) != v]
            return problems

        wait_for(f"{eids[kind]} firing", check, 15, 0.2)

    assert all(s["attributes"].get("event_types") == [t] for t, s in states().items()), states()
    before = states()
    w.broker.publish(f"{BASE}/1/kitchen/lights/set", "DIM")
    fired("command_rejected", before, reason="bad_payload", room="kitchen", source="mqtt")

    before = states()
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    alarm = w.bridge.api("Cemalettin", "/api/v1/alarms", {"title": "HA event test", "fireDate": at})
    fired("alarm", before, uuid=alarm["uuid"], title="HA event test")

    before = states()
    w.broker.publish(f"{BASE}/1/events", json.dumps({"type": "gas", "room": "kitchen", "state": "ON",
                                                     "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
    fired("gas", before, room="kitchen", state="ON")


def test_birth_message(w: World) -> None:
    """homeassistant/status online re-sent: the bridge republishes every config within a few
    seconds, and no entity is unavailable."""
    want = {e.config_topic for e in w.entities}

    def quiet():
        # HA sends its own birth message a few seconds after the MQTT entry connects, and the
        # bridge answers 1-3 s later: wait until no config has come for 4 s, so that what comes
        # next answers ours.
        last = max((m[0] for m in w.watch.since(0) if m[1] in want), default=0)
        return time.time() - last >= 4

    wait_for("the bridge quiet before the birth message", quiet, 20, 0.2)
    t0 = time.time()
    w.broker.publish(f"{PREFIX}/status", "online")

    def republished():
        seen = {m[1] for m in w.watch.since(t0) if m[1].endswith("/config") and m[2]}
        return [f"{t} not republished" for t in sorted(want - seen)]

    wait_for("every config republished after the birth message", republished, 10, 0.2)
    first = min((m[0] for m in w.watch.since(t0) if m[1] in want), default=t0)
    log(f"    configs republished {first - t0:.1f}s after the birth message")
    time.sleep(1)
    w.wait_all_ok("all entities available after the birth message", 30)


def test_ha_restart(w: World) -> None:
    """HA restarted while the bridge runs: no entity stays unavailable."""
    before, problems = w.resolve(w.entities)
    assert not problems, problems
    TIMINGS["ha_stop"] = w.ha.stop()
    TIMINGS["ha_restart"] = w.ha.start()
    log(f"    HA stopped in {TIMINGS['ha_stop']:.1f}s, up again in {TIMINGS['ha_restart']:.1f}s")
    t = time.monotonic()
    w.wait_all_ok("all entities available with their states after HA's restart")
    TIMINGS["entities_after_ha_restart"] = time.monotonic() - t
    after, _ = w.resolve(w.entities)
    assert after == before, f"entity ids changed across HA's restart: {set(after.items()) ^ set(before.items())}"
    wait_for("the bridge's connectivity sensor on", lambda: w.bridge_connectivity() == "on", 20)


def _bridge_down_and_up(w: World, sig: int) -> None:
    before, problems = w.resolve(w.entities)
    assert not problems, problems
    w.bridge.stop(sig)
    wait_for("every room entity unavailable with the bridge stopped",
             lambda: w.check_all(w.entities, available=False), 20, 0.5)
    wait_for("the bridge's connectivity sensor off", lambda: w.bridge_connectivity() == "off", 20)
    w.bridge.start()
    w.wait_all_ok("all entities available again with the bridge started")
    after, _ = w.resolve(w.entities)
    assert after == before, f"entity ids changed across the bridge's restart (unique_id not stable?): {set(after.items()) ^ set(before.items())}"
    wait_for("the bridge's connectivity sensor on", lambda: w.bridge_connectivity() == "on", 20)


def test_bridge_stopped(w: World) -> None:
    """Bridge stopped (SIGTERM): its entities become unavailable in HA; started again: available."""
    _bridge_down_and_up(w, signal.SIGTERM)


def test_bridge_killed(w: World) -> None:
    """Bridge killed (SIGKILL, so only its last will says offline): the same."""
    _bridge_down_and_up(w, signal.SIGKILL)


def test_room_removed(w: World) -> None:
    """A room removed from the config: after the bridge restarts, its entities are gone from HA."""
    user_id, room = REMOVED_ROOM
    reduced = os.path.join(w.bridge.directory, "bridge-without-room.yaml")
    config_without_room(w.bridge.config, reduced, user_id, room)
    gone = [e for e in w.entities if e.user_id == user_id and e.room == room]
    kept = [e for e in w.entities if e not in gone]
    assert len(gone) == 4 and len(kept) == 60
    assert sum(1 for e in kept if e.room == room) == 4, "the other user's room of that name stays"
    ids, problems = w.resolve(gone)
    assert not problems, problems
    w.bridge.stop()
    w.bridge.start(reduced)
    w.entities = kept

    def removed():
        problems = []
        for e in gone:
            if w.watch.value(e.config_topic):
                problems.append(f"{e}: config on {e.config_topic} not cleared")
        states = w.ha.states()
        by_unique, _ = w.ha.registry()
        for e in gone:
            eid = ids[e.config_topic]
            if eid in states:
                problems.append(f"{e}: {eid} still in /api/states ({states[eid]['state']})")
            if any(x["entity_id"] == eid for x in by_unique.values()):
                problems.append(f"{e}: {eid} still in HA's entity registry")
        return problems

    wait_for(f"user {user_id}'s {room} gone from HA", removed, 30, 0.5)
    w.wait_all_ok("the other 60 entities still there and available")
    by_unique, _ = w.ha.registry()
    assert len(by_unique) == 70, f"{len(by_unique)} MQTT entities in HA's registry, want 60 + 9 home entities + connectivity"


def test_reload(w: World) -> None:
    """README "Managing the home": SIGHUP with the removed room back in the file brings its entities
    back on the same MQTT connection (no new connection at the broker, no bridge/state sent, no
    entity unavailable on the way); SIGHUP without it removes them again."""
    user_id, room = REMOVED_ROOM
    running = w.bridge.process.popen.args[-1]  # the file the bridge runs on (test_room_removed's)
    back = [Entity(next(u for u in w.users if u["id"] == user_id), room, sensor)
            for sensor in ("temperature", "humidity", "lights", "movement")]
    kept = list(w.entities)
    kept_ids, problems = w.resolve(kept)
    assert not problems, problems
    connections = lambda: open(w.broker.log_path, errors="replace").read().count("New client connected")
    before = connections()
    t0 = time.time()
    shutil.copyfile(w.bridge.config, running)
    w.bridge.process.popen.send_signal(signal.SIGHUP)
    wait_for("the bridge's reload", lambda: [] if "config reloaded added=1" in open(w.bridge.log).read()
             else ["no 'config reloaded added=1' in the bridge's log"], 20, 0.2)
    unavailable = []

    def all_back():
        states = w.ha.states()
        unavailable.extend(eid for eid in kept_ids.values() if states.get(eid, {}).get("state") == "unavailable")
        return w.check_all(kept + back)

    wait_for(f"user {user_id}'s {room} back in HA", all_back, ENTITY_TIMEOUT, 1.0)
    w.entities = kept + back
    assert not unavailable, f"entities unavailable during the reload: {sorted(set(unavailable))[:10]}"
    assert not w.watch.since(t0, f"{BASE}/bridge/state"), "bridge/state sent again: the bridge reconnected"
    assert connections() == before, "a new MQTT connection during the reload"

    by_unique, _ = w.ha.registry()
    ids, problems = w.resolve(back)
    assert not problems, problems
    config_without_room(w.bridge.config, running, user_id, room)
    w.bridge.process.popen.send_signal(signal.SIGHUP)

    def gone():
        states = w.ha.states()
        return [f"{e}: {ids[e.config_topic]} still in /api/states" for e in back if ids[e.config_topic] in states] + [
            f"{e}: config not cleared" for e in back if w.watch.value(e.config_topic)]

    wait_for(f"user {user_id}'s {room} gone again", gone, 30, 0.5)
    w.entities = kept
    w.wait_all_ok("the other entities still there and available")
    assert connections() == before, "a new MQTT connection during the second reload"


def test_ha_log_clean(w: World) -> None:
    """HA logged no error at all, and no warning about MQTT or discovery (where it says which key
    of a discovery payload it rejects), over all its starts."""
    allowed = (r"Skipping pip installation", r"Support for the running Python version")
    bad = []
    for path in w.ha.logs:
        with open(path, errors="replace") as f:
            for line in f:
                if re.match(r"\S+ \S+ ERROR ", line) or (re.match(r"\S+ \S+ WARNING ", line) and re.search(r"mqtt|discovery", line, re.I)):
                    if not any(re.search(a, line) for a in allowed):
                        bad.append(f"{os.path.basename(path)}: {line.rstrip()[:2000]}")
    assert not bad, "HA's log:\n    " + "\n    ".join(bad[:10])


TESTS = [test_entities, test_entity_ids_kept_from_object_id, test_room_availability, test_reading_changes, test_light_turn_off, test_group_light, test_event_entities, test_birth_message, test_ha_restart,
         test_bridge_stopped, test_bridge_killed, test_room_removed, test_reload, test_ha_log_clean]


def main() -> int:
    only = None
    if len(sys.argv) > 2 and sys.argv[1] == "-k":
        only = sys.argv[2]
    tests = [t for t in TESTS if not only or only in t.__name__]

    def on_term(signum, frame):
        raise TimedOut()

    signal.signal(signal.SIGTERM, on_term)
    started = time.monotonic()
    w = World()
    passed = failed = 0
    timed_out = False
    try:
        try:
            w.setup()
        except Exception:
            log("FAIL setup")
            log(traceback.format_exc())
            failed = len(tests)
        else:
            for i, test in enumerate(tests):
                t = time.monotonic()
                try:
                    test(w)
                except TimedOut:
                    timed_out = True
                    failed += len(tests) - i
                    log(f"FAIL {test.__name__} ({time.monotonic() - t:.1f}s): SIGTERM (time limit); "
                        f"{len(tests) - i - 1} tests not run")
                    break
                except Exception as exc:
                    failed += 1
                    log(f"FAIL {test.__name__} ({time.monotonic() - t:.1f}s): {exc}")
                    if not isinstance(exc, AssertionError):
                        log(traceback.format_exc())
                else:
                    passed += 1
                    log(f"ok   {test.__name__} ({time.monotonic() - t:.1f}s)")
    except TimedOut:
        timed_out = True
        failed = len(tests) - passed
        log("FAIL setup: SIGTERM (time limit)")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the clean-up finish
        w.teardown()
    if failed:
        if w.ha is not None:
            log(f"  HA log, warnings and errors ({w.ha.log}):\n{tail(w.ha.log, 40, r'WARNING|ERROR')}")
        if w.bridge is not None:
            log(f"  bridge log ({w.bridge.log}):\n{tail(w.bridge.log, 30)}")
    TIMINGS["total"] = time.monotonic() - started
    log("timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()))
    if failed == 0 and not os.environ.get("HA_TEST_KEEP"):
        bridgetest.remove_directory(w.workdir)
    else:
        log(f"work directory kept: {w.workdir}")
    log(f"{passed} passed, {failed} failed")
    return 124 if timed_out else (1 if failed else 0)


if __name__ == "__main__":
    sys.exit(main())
