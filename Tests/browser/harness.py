"""What the dashboard's browser tests run against: a real mosquitto and the real bridge binary on
free loopback ports, headless Chromium through chromedriver, MQTT clients and the HTTP API.

Nothing here talks to anything but 127.0.0.1: Chromium is started with every background service
off, a proxy that goes nowhere and a resolver that resolves nothing but loopback.
"""

import atexit
import base64
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import bridgetest  # noqa: E402  (Tests/support/bridgetest.py: ports, processes, mosquitto, the bridge)
from bridgetest import ROOT, wait_until  # noqa: E402,F401  (wait_until: for the tests)

WEB_ROOT = ROOT / "web"

USER1_ROOMS = ["Livingroom", "Bathroom", "Bedroom", "Kitchen", "Garden", "Saloon", "Babyroom", "Balcony"]
# What Chromium logs for an API answer a test provokes on purpose (a wrong password, a bad alarm).
NETWORK_ERROR = r"Failed to load resource: the server responded with a status of {status}"
ARTIFACTS = Path(os.environ.get("ARTIFACTS", ROOT / "Tests/browser/artifacts"))


class Broker(bridgetest.Broker):
    """bridgetest's mosquitto, with subscribers for the tests."""

    def subscribe(self, *topics):
        return Subscriber(self.port, topics)


class Subscriber:
    """mosquitto_sub -v in the background; lines arrive in a queue."""

    def __init__(self, port, topics):
        args = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-v", "-q", "1"]
        for topic in topics:
            args += ["-t", topic]
        self.process = bridgetest.spawn(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, expected, timeout=5):
        """Waits for the line `expected` (`topic payload`) and returns it."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{expected!r} did not arrive on the broker within {timeout} s; got {self.seen}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(line)
            if line == expected:
                return line

    def close(self):
        bridgetest.stop_process(self.process)


class RawPublisher:
    """A minimal MQTT 3.1.1 client (CONNECT, PUBLISH at QoS 0) on one kept-open socket, so that
    timing a publish measures the broker, the bridge and the page rather than a process start."""

    def __init__(self, port, client_id="dashboard-latency"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cid = client_id.encode()
        body = b"\x00\x04MQTT\x04\x02\x00\x3c" + len(cid).to_bytes(2, "big") + cid
        self._send(0x10, body)
        ack = self._read(4)
        if ack[0] != 0x20 or ack[3] != 0:
            raise RuntimeError(f"CONNACK refused: {ack!r}")

    def _send(self, header, body):
        length = len(body)
        encoded = bytearray()
        while True:
            byte, length = length % 128, length // 128
            encoded.append(byte | (0x80 if length else 0))
            if not length:
                break
        self.sock.sendall(bytes([header]) + bytes(encoded) + body)

    def _read(self, count):
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise RuntimeError("broker closed the connection")
            data += chunk
        return data

    def publish(self, topic, payload):
        t = topic.encode()
        self._send(0x30, len(t).to_bytes(2, "big") + t + payload.encode())

    def close(self):
        try:
            self._send(0xE0, b"")
        finally:
            self.sock.close()


ATTIC = (", { name: Attic, id: attic, sensors: ["
         "{ name: Temperature, mqtt: { topic: devices/attic/temperature } }, "
         "{ name: Humidity, mqtt: { topic: devices/attic/humidity } }, Lights, Movement] }")


class Bridge(bridgetest.Bridge):
    """The bridge binary on the demo config (plus a room only user 2 has), with its own database,
    serving web/; started here."""

    def __init__(self, directory, broker):
        config = Path(directory) / "bridge.yaml"
        demo = (ROOT / "config/bridge.yaml").read_text()
        # User 2 (Mehmet) gets a room user 1 doesn't have, to show the page never shows it to user 1;
        # its temperature and humidity are bound to MQTT devices (the tests publish as them), to show
        # when each was last heard from (README, "Connect your devices").
        changed, count = re.subn(r"(username: Mehmet\n(?:.*\n)*?\s*rooms: \[[^\]]*)\]", lambda m: m.group(1) + ATTIC + "]",
                                 demo, count=1)
        if count != 1:
            raise RuntimeError("config/bridge.yaml: Mehmet's rooms list not found")
        # Mehmet is an admin, to show the settings page's unbound devices (README, "Admins and unbound devices").
        changed, count = re.subn(r"(\n(\s*)username: Mehmet\n)", lambda m: m.group(1) + m.group(2) + "admin: true\n", changed, count=1)
        if count != 1:
            raise RuntimeError("config/bridge.yaml: Mehmet not found")
        config.write_text(changed)
        super().__init__(directory, broker, config,
                         env={"SMARTHOME_HTTP_WEB_ROOT": str(WEB_ROOT), "SMARTHOME_SOURCE_INTERVAL": "1"})
        self.start()

    def api(self, method, path, body=None, token=None):
        """(status, JSON or None) of one API request."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base}/api/v1{path}", data=data, method=method)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None


_browsers = []


@atexit.register  # registered after bridgetest's: runs first, before the bridge and broker stop
def _quit_browsers():
    for driver in _browsers:
        try:
            driver.quit()
        except Exception:  # already gone
            pass


# SIGTERM (a CI timeout, kill) interrupts the run like Ctrl-C; the atexit handlers then stop the
# browser, the bridge and the broker.
bridgetest.interrupt_on_sigterm()


# ---- the browser ---------------------------------------------------------------------------

DESKTOP = (1280, 800)
PHONE = (390, 844)


def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in (
        "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}", "--force-device-scale-factor=1", "--lang=en-US",
        "--hide-scrollbars", "--no-first-run", "--no-default-browser-check",
        # No traffic anywhere but loopback: no background services, a proxy that goes nowhere for
        # anything that isn't loopback (Chromium never proxies loopback), and no name resolution.
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
        "--disable-client-side-phishing-detection", "--no-pings", "--metrics-recording-only",
        "--disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication,"
        "CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
        "--proxy-server=http://127.0.0.1:9",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(service=service, options=options)
    _browsers.append(driver)
    driver.set_page_load_timeout(20)
    driver.set_script_timeout(20)
    return driver


def screenshot(driver, path, width, height, mobile):
    """A PNG of the whole page at that viewport size (a phone's, or a desktop's); returns the page's
    width there, which is the viewport's unless something sticks out sideways."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
    try:
        time.sleep(0.4)  # layout, the charts' redraw to the new width, and a frame
        page_width = driver.execute_script("return document.documentElement.scrollWidth")
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        content = metrics.get("cssContentSize") or metrics["contentSize"]
        full = max(height, min(int(content["height"]), 2400))
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": full, "scale": 1},
        })
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return page_width
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        time.sleep(0.2)
