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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = Path(os.environ.get("BRIDGE", ROOT / ".build/debug/smarthome-bridge"))
WEB_ROOT = ROOT / "web"
ARTIFACTS = Path(os.environ.get("ARTIFACTS", ROOT / "Tests/browser/artifacts"))
MOSQUITTO = next((p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto")
                  if os.access(p, os.X_OK)), "mosquitto")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout, interval=0.05, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")


def accepting(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Broker:
    """mosquitto on a free loopback port, no persistence, anonymous clients allowed."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.port = free_port()
        config = self.directory / "mosquitto.conf"
        config.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                          "log_dest stderr\nlog_type error\nlog_type warning\n")
        self.log = open(self.directory / "mosquitto.log", "wb")
        self.process = _spawn([MOSQUITTO, "-c", str(config)], stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: accepting(self.port) or self.process.poll() is not None, 10, message="mosquitto")
        if self.process.poll() is not None:
            raise RuntimeError(f"mosquitto did not start on port {self.port}")

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"

    def publish(self, topic, payload):
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "-q", "1", "-t", topic, "-m", payload],
                       check=True, timeout=10)

    def subscribe(self, *topics):
        return Subscriber(self.port, topics)

    def stop(self):
        stop_process(self.process)
        self.log.close()


class Subscriber:
    """mosquitto_sub -v in the background; lines arrive in a queue."""

    def __init__(self, port, topics):
        args = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-v", "-q", "1"]
        for topic in topics:
            args += ["-t", topic]
        self.process = _spawn(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
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
        stop_process(self.process)


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


class Bridge:
    """The bridge binary on the demo config (plus a room only user 2 has), with its own database."""

    def __init__(self, directory, broker):
        self.directory = Path(directory)
        self.port = free_port()
        self.config = self.directory / "bridge.yaml"
        demo = (ROOT / "config/bridge.yaml").read_text()
        # User 2 (Mehmet) gets a room user 1 doesn't have, to show the page never shows it to user 1.
        changed, count = re.subn(r"(username: Mehmet\n(?:.*\n)*?\s*rooms: \[[^\]]*)\]", r"\1, Attic]", demo, count=1)
        if count != 1:
            raise RuntimeError("config/bridge.yaml: Mehmet's rooms list not found")
        self.config.write_text(changed)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SMARTHOME_")}
        self.env.update({
            "SMARTHOME_MQTT_URL": broker.url,
            "SMARTHOME_HTTP_PORT": str(self.port),
            "SMARTHOME_STORAGE_PATH": str(self.directory / "bridge.sqlite"),
            "SMARTHOME_HTTP_WEB_ROOT": str(WEB_ROOT),
            "SMARTHOME_SOURCE_INTERVAL": "1",
        })
        self.log_path = self.directory / "bridge.log"
        self.process = None
        self.start()

    @property
    def base(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.log = open(self.log_path, "ab")
        self.process = _spawn([str(BRIDGE), "--config", str(self.config)], env=self.env,
                                        stdout=self.log, stderr=subprocess.STDOUT, cwd=self.directory)
        wait_until(lambda: self.healthy() or self.process.poll() is not None, 20, 0.05, "the bridge's /healthz")
        if self.process.poll() is not None:
            raise RuntimeError(f"the bridge exited at start; log:\n{self.log_path.read_text()[-3000:]}")

    def healthy(self):
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=1) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self):
        if self.process:
            stop_process(self.process)
            self.process = None
            self.log.close()

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


_started = []


def _spawn(*args, **kwargs):
    """Popen, remembered so that an interrupted run still stops what it started."""
    process = subprocess.Popen(*args, **kwargs)
    _started.append(process)
    return process


_browsers = []


@atexit.register
def _stop_everything():
    for driver in _browsers:
        try:
            driver.quit()
        except Exception:  # already gone
            pass
    for process in reversed(_started):
        stop_process(process, timeout=5)


def _interrupt(*_):
    raise KeyboardInterrupt("SIGTERM")


# SIGTERM (a CI timeout, kill) interrupts the run like Ctrl-C; the atexit handler above then stops
# the browser, the bridge and the broker.
signal.signal(signal.SIGTERM, _interrupt)


def stop_process(process, timeout=10):
    if process in _started:
        _started.remove(process)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


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


def temporary_directory(name):
    return tempfile.mkdtemp(prefix=f"smarthome-browser-{name}-")


def copy_logs(directory, destination):
    """The bridge's and the broker's logs, for a person looking into a failure."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in ("bridge.log", "mosquitto.log"):
        source = Path(directory) / name
        if source.exists():
            shutil.copyfile(source, destination / name)


def remove_directory(path):
    shutil.rmtree(path, ignore_errors=True)
