#!/usr/bin/env python3
"""`make run-devices`: the bridge on config/devices.yaml with the devices its rooms are bound to
(README, "Connect your devices"), all on one mosquitto of this script's own on a free loopback port:

- zigbee2mqtt: `livingroom_climate` (temperature, humidity; availability `{"state":"online"}` as
  zigbee2mqtt 2.x says it) and `livingroom_motion` (occupancy; availability `online`, as 1.x);
- Tasmota: `livingroom_lamp`, a plug that answers `cmnd/livingroom_lamp/POWER` on
  `stat/livingroom_lamp/POWER` and `RESULT`, and `bedroom_thermo`, SENSOR telemetry in °F;
- ESPHome: `bedroom-node`, a light that answers `.../light/ceiling/command` on its state topic;
- rtl_433: the real decoder (`rtl_433 -F json -y <frame>`) on a loop of known Bresser 6-in-1
  frames (from rtl_433's own src/devices/bresser_6in1.c), piped into `mosquitto_pub -l`.

Type commands on this terminal to play with availability and confirmation (`help` lists them);
Ctrl-C stops the bridge first (it publishes `offline`), then the devices and the broker.

Standard library only, with the mosquitto_pub / mosquitto_sub clients (Debian mosquitto-clients)
and rtl_433 (Debian rtl-433). Only 127.0.0.1 is contacted.

Environment: BRIDGE (default .build/debug/smarthome-bridge), SMARTHOME_HTTP_PORT (8080),
DEVICES_MQTT_PORT (1883, else the next free one), RUN_DIR (data/run-devices).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
BRIDGE = Path(os.environ.get("BRIDGE") or ROOT / ".build/debug/smarthome-bridge")
CONFIG = Path(os.environ.get("CONFIG") or ROOT / "config/devices.yaml")
RUN = Path(os.environ.get("RUN_DIR") or ROOT / "data/run-devices")
HTTP_PORT = int(os.environ.get("SMARTHOME_HTTP_PORT") or 8080)
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
Z2M = "zigbee2mqtt"

# Known frames of a Bresser 6-in-1 weather station, id 411042499 (rtl_433's bresser_6in1.c):
# 3.0 °C 95 %, 3.0 °C 95 %, 2.7 °C 96 %, 2.8 °C 94 %.
RTL433_FRAMES = [
    "{205}55555555545ba999263100058631fffffe66d006092bffe0cff8",
    "{205}55555555545ba94d063100058631fffffe665006092bffe14ff8",
    "{205}55555555545ba924d23100058631ff99fe68b004e92dffe073f8",
    "{202}55555555545ba813403100058631ff77fe6810050929ffe1180",
]
RTL433_PERIOD = 15  # seconds between frames; the Garden sensors expire after 1m

children: list[subprocess.Popen] = []
stopping = threading.Event()


def log(message: str) -> None:
    print(f"device-sim: {message}", flush=True)


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((HOST, port)) == 0


def healthy() -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{HTTP_PORT}/healthz", timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


def spawn(argv: list, **kwargs) -> subprocess.Popen:
    # A session of its own: the terminal's Ctrl-C reaches only this script, which stops the bridge
    # first and the broker last. setpriv's pdeathsig stops the child should this script be killed.
    if shutil.which("setpriv"):
        argv = ["setpriv", "--pdeathsig", "TERM", "--", *argv]
    process = subprocess.Popen(argv, start_new_session=True, **kwargs)
    children.append(process)
    return process


class Broker:
    def __init__(self) -> None:
        port = int(os.environ.get("DEVICES_MQTT_PORT") or 1883)
        wanted = port
        while listening(port):
            port += 1
            if port > wanted + 100:
                sys.exit(f"device-sim: no free MQTT port from {wanted} to {wanted + 100}")
        self.port = port
        RUN.chmod(0o755)  # readable by the mosquitto user, to which mosquitto started as root drops
        conf = RUN / "mosquitto.conf"
        conf.write_text(f"listener {port} {HOST}\nallow_anonymous true\npersistence false\nlog_dest stderr\n")
        conf.chmod(0o644)
        self.log = open(RUN / "mosquitto.log", "wb")
        self.process = spawn([MOSQUITTO, "-c", str(conf)], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(100):
            if listening(port):
                return
            if self.process.poll() is not None:
                sys.exit(f"device-sim: mosquitto ended:\n{(RUN / 'mosquitto.log').read_text()}")
            time.sleep(0.1)
        sys.exit("device-sim: mosquitto did not start listening")

    def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        # No client id of our own: threads publish at once, and a second client with the same id
        # would make the broker drop the first.
        argv = ["mosquitto_pub", "-h", HOST, "-p", str(self.port), "-q", "1", "-t", topic, "-m", payload]
        if retain:
            argv.append("-r")
        subprocess.run(argv, check=False, timeout=10, stdin=subprocess.DEVNULL)


class Devices:
    """Every simulated device's state, and what each publishes and answers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.lamp_on = False          # Tasmota livingroom_lamp
        self.ceiling_on = False       # ESPHome bedroom-node light ceiling
        self.muted: set[str] = set()  # devices that ignore commands (to see device_timeout)
        self.offline: set[str] = set()
        self.temperature = 22.0
        self.humidity = 45.0
        self.fahrenheit = 70.0
        self.occupied = False
        self.lock = threading.Lock()

    # Availability, in each firmware's words (README, "Connect your devices").
    AVAILABILITY = {
        "livingroom_climate": (f"{Z2M}/livingroom_climate/availability", '{"state":"online"}', '{"state":"offline"}'),
        "livingroom_motion": (f"{Z2M}/livingroom_motion/availability", "online", "offline"),
        "livingroom_lamp": ("tele/livingroom_lamp/LWT", "Online", "Offline"),
        "bedroom_thermo": ("tele/bedroom_thermo/LWT", "Online", "Offline"),
        "bedroom-node": ("bedroom-node/status", "online", "offline"),
    }

    def set_available(self, device: str, online: bool) -> None:
        topic, on, off = self.AVAILABILITY[device]
        with self.lock:
            (self.offline.discard if online else self.offline.add)(device)
        self.broker.publish(topic, on if online else off, retain=True)

    def announce(self) -> None:
        for device in self.AVAILABILITY:
            self.set_available(device, True)
        self.publish_lamp()
        self.publish_ceiling()
        self.telemetry()

    def publish_lamp(self) -> None:
        word = "ON" if self.lamp_on else "OFF"
        self.broker.publish("stat/livingroom_lamp/RESULT", json.dumps({"POWER": word}))
        self.broker.publish("stat/livingroom_lamp/POWER", word)

    def publish_ceiling(self) -> None:
        state = {"state": "ON" if self.ceiling_on else "OFF", "brightness": 255, "color_mode": "brightness"}
        self.broker.publish("bedroom-node/light/ceiling/state", json.dumps(state), retain=True)

    def telemetry(self) -> None:
        """zigbee2mqtt's device state and Tasmota's SENSOR and STATE telemetry."""
        with self.lock:
            self.temperature = min(26, max(18, self.temperature + random.uniform(-0.3, 0.3)))
            self.humidity = min(60, max(35, self.humidity + random.uniform(-1, 1)))
            self.fahrenheit = min(78, max(64, self.fahrenheit + random.uniform(-0.5, 0.5)))
            offline = set(self.offline)
        now = time.strftime("%Y-%m-%dT%H:%M:%S")
        if "livingroom_climate" not in offline:
            self.broker.publish(f"{Z2M}/livingroom_climate", json.dumps({
                "temperature": round(self.temperature, 2), "humidity": round(self.humidity, 1),
                "battery": 97, "linkquality": 120}), retain=True)
        if "bedroom_thermo" not in offline:
            self.broker.publish("tele/bedroom_thermo/SENSOR", json.dumps({
                "Time": now, "AM2301": {"Temperature": round(self.fahrenheit, 1), "Humidity": round(self.humidity + 3, 1),
                                        "DewPoint": 50.1}, "TempUnit": "F"}))
        if "livingroom_lamp" not in offline:
            self.broker.publish("tele/livingroom_lamp/STATE", json.dumps({
                "Time": now, "POWER": "ON" if self.lamp_on else "OFF", "Wifi": {"RSSI": 80}}))

    def motion(self) -> None:
        if "livingroom_motion" in self.offline:
            return
        self.occupied = random.random() < 0.4
        self.broker.publish(f"{Z2M}/livingroom_motion", json.dumps({
            "occupancy": self.occupied, "battery": 88, "illuminance": 40}), retain=True)

    def command(self, topic: str, payload: str) -> None:
        """A command the bridge sent to a device: answered as the device's firmware does."""
        if topic.startswith("cmnd/livingroom_lamp/POWER"):
            device = "livingroom_lamp"
        elif topic == "bedroom-node/light/ceiling/command":
            device = "bedroom-node"
        else:
            return
        if device in self.muted or device in self.offline:
            log(f"{device} ignores {payload!r} on {topic} (muted or offline)")
            return
        if device == "livingroom_lamp":
            word = payload.strip().upper()
            self.lamp_on = (not self.lamp_on) if word == "TOGGLE" else word in ("ON", "1")
            log(f"livingroom_lamp (Tasmota) switched {'ON' if self.lamp_on else 'OFF'}")
            self.publish_lamp()
        else:
            try:
                state = str(json.loads(payload).get("state", "")).upper()
            except (ValueError, AttributeError):
                return
            self.ceiling_on = state == "ON"
            log(f"bedroom-node ceiling (ESPHome) switched {state}")
            self.publish_ceiling()


def listen_for_commands(broker: Broker, devices: Devices) -> None:
    process = spawn(["mosquitto_sub", "-h", HOST, "-p", str(broker.port), "-i", "device-sim-sub", "-q", "1", "-v",
                     "-t", "cmnd/livingroom_lamp/#", "-t", "bedroom-node/light/ceiling/command"],
                    stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    for line in process.stdout:
        topic, _, payload = line.rstrip("\n").partition(" ")
        devices.command(topic, payload)


def rtl433_loop(broker: Broker) -> None:
    """rtl_433's own decoder on known frames, its JSON lines into `rtl_433/<host>/events` (the
    topic rtl_433's MQTT output uses by default)."""
    publisher = spawn(["mosquitto_pub", "-h", HOST, "-p", str(broker.port), "-i", "device-sim-rtl433", "-q", "1",
                       "-t", f"rtl_433/{socket.gethostname()}/events", "-l"],
                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    index = 0
    while not stopping.is_set():
        if not rtl433_paused.is_set():
            frame = RTL433_FRAMES[index % len(RTL433_FRAMES)]
            index += 1
            decoded = subprocess.run(["rtl_433", "-F", "json", "-y", frame], capture_output=True, text=True,
                                     timeout=20, stdin=subprocess.DEVNULL)
            for line in decoded.stdout.splitlines():
                if line.startswith("{"):
                    try:
                        publisher.stdin.write(line.encode() + b"\n")
                        publisher.stdin.flush()
                    except BrokenPipeError:
                        return
        stopping.wait(RTL433_PERIOD)


rtl433_paused = threading.Event()


def every(seconds: float, action) -> None:
    while not stopping.wait(seconds):
        try:
            action()
        except Exception as error:  # a failed publish must not end the demo
            log(f"{action.__name__} failed: {error}")


HELP = """commands:
  offline DEVICE | online DEVICE   the device's availability (room goes offline / online)
  mute DEVICE | unmute DEVICE      stop / resume answering commands (device_timeout, 504)
  rtl433 off | rtl433 on           stop / resume the rtl_433 frames (Garden stale after 1m)
  lamp on | lamp off               someone presses the Tasmota lamp's button
devices: """ + ", ".join(Devices.AVAILABILITY)


def console(devices: Devices) -> None:
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        verb, argument = words[0].lower(), (words[1] if len(words) > 1 else "")
        if verb in ("offline", "online") and argument in Devices.AVAILABILITY:
            devices.set_available(argument, verb == "online")
        elif verb in ("mute", "unmute") and argument in Devices.AVAILABILITY:
            (devices.muted.add if verb == "mute" else devices.muted.discard)(argument)
        elif verb == "rtl433" and argument in ("on", "off"):
            (rtl433_paused.set if argument == "off" else rtl433_paused.clear)()
        elif verb == "lamp" and argument in ("on", "off"):
            devices.lamp_on = argument == "on"
            devices.publish_lamp()
        else:
            print(HELP, flush=True)
            continue
        log(f"{verb} {argument}: done")


def main() -> int:
    for tool in ("mosquitto_pub", "mosquitto_sub", "rtl_433"):
        if not shutil.which(tool):
            sys.exit(f"device-sim: {tool} is missing (apt-get install mosquitto-clients rtl-433)")
    if not BRIDGE.exists():
        sys.exit(f"device-sim: no bridge at {BRIDGE} (make build)")
    if listening(HTTP_PORT):
        sys.exit(f"device-sim: port {HTTP_PORT} is taken (SMARTHOME_HTTP_PORT chooses another)")
    RUN.mkdir(parents=True, exist_ok=True)
    broker = Broker()
    devices = Devices(broker)
    devices.announce()
    url = f"mqtt://{HOST}:{broker.port}"
    storage = RUN / "bridge"  # the bridge's alone: it holds the token signing key
    storage.mkdir(mode=0o700, exist_ok=True)
    env = dict(os.environ, SMARTHOME_MQTT_URL=url, SMARTHOME_HTTP_PORT=str(HTTP_PORT),
               SMARTHOME_STORAGE_PATH=str(storage / "bridge.sqlite"))
    bridge = spawn([str(BRIDGE), "--config", str(CONFIG)], env=env, stdin=subprocess.DEVNULL)
    # Tasmota's telemetry is not retained: send the first right when the bridge can hear it.
    for _ in range(200):
        if bridge.poll() is not None or healthy():
            break
        time.sleep(0.1)
    devices.telemetry()
    for target in (lambda: listen_for_commands(broker, devices), lambda: rtl433_loop(broker),
                   lambda: every(10, devices.telemetry), lambda: every(7, devices.motion),
                   lambda: console(devices)):
        threading.Thread(target=target, daemon=True).start()
    print(f"""
device-sim: broker {url} (log: {RUN / 'mosquitto.log'}), bridge http://{HOST}:{HTTP_PORT}
  watch:   mosquitto_sub -p {broker.port} -v -t 'smarthome/1/#' -t 'zigbee2mqtt/#' -t 'tele/#' -t 'stat/#' -t 'cmnd/#' -t 'bedroom-node/#' -t 'rtl_433/#'
  light:   mosquitto_pub -p {broker.port} -t smarthome/1/livingroom/lights/set -m ON     (Tasmota answers)
           mosquitto_pub -p {broker.port} -t smarthome/1/bedroom/lights/set -m ON        (ESPHome answers)
  room:    curl http://{HOST}:{HTTP_PORT}/rooms/1/Livingroom     (SensorLastSeen: when each was heard)
  offline: type 'offline livingroom_motion' here; 'help' for more. Ctrl-C stops everything.
""", flush=True)
    try:
        while bridge.poll() is None:
            time.sleep(0.2)
        log(f"the bridge ended with status {bridge.returncode}")
        return bridge.returncode or 1
    except KeyboardInterrupt:
        return 0
    finally:
        stopping.set()
        if bridge.poll() is None:
            bridge.send_signal(signal.SIGINT)  # publishes smarthome/bridge/state offline
            try:
                bridge.wait(15)
            except subprocess.TimeoutExpired:
                bridge.kill()
        for process in reversed(children):
            if process.poll() is None:
                process.terminate()
        for process in children:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


def interrupt(*_) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    # Also when started in the background, where SIGINT arrives ignored.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    sys.exit(main())
