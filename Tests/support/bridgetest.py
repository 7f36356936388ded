"""What the Python tests and benchmarks share: free loopback ports, waiting with a timeout, child
processes that are stopped at the end (also on SIGTERM, and by the kernel should the harness be
killed), a private mosquitto, the bridge binary with its own SQLite file, HTTP port and
`SMARTHOME_*` variables, temporary folders and logs.

Used by Tests/browser, Tests/stack, Tests/homeassistant and bench/ (each adds this folder to
sys.path). Standard library only; Python 3.11. Only 127.0.0.1 is ever contacted.

Environment: BRIDGE (the binary; default .build/debug/smarthome-bridge), MOSQUITTO, MOSQUITTO_PUB.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[2]
BRIDGE = Path(os.environ.get("BRIDGE") or ROOT / ".build/debug/smarthome-bridge").resolve()
MOSQUITTO = os.environ.get("MOSQUITTO") or next(
    (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto") if os.access(p, os.X_OK)),
    shutil.which("mosquitto") or "mosquitto")
MOSQUITTO_PUB = os.environ.get("MOSQUITTO_PUB") or "mosquitto_pub"
SETPRIV = shutil.which("setpriv")


# ---- ports and waiting -------------------------------------------------------------------------

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def accepting(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def poll(predicate, timeout: float, interval: float = 0.05):
    """Calls predicate() until it returns a true value or timeout seconds have passed (it is called
    once more then); returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def wait_until(predicate, timeout: float, interval: float = 0.05, message: str = "condition"):
    """poll(), raising AssertionError when the predicate never came true."""
    value = poll(predicate, timeout, interval)
    if not value:
        raise AssertionError(f"timed out after {timeout} s waiting for {message}")
    return value


def wait_for_port(port: int, timeout: float, process: subprocess.Popen | None = None, name: str = "the process",
                  log: str | Path | None = None) -> None:
    """Until something accepts connections on port; RuntimeError when process exits first or
    nothing listens within timeout seconds."""
    def up():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before listening on {port}"
                               + (f":\n{tail(log)}" if log else ""))
        return accepting(port)

    if not poll(up, timeout, 0.02):
        raise RuntimeError(f"nothing listening on {HOST}:{port} after {timeout} s")


def http_get(url: str, headers: dict | None = None, timeout: float = 5) -> tuple[int, dict, bytes]:
    """(status, headers, body) of a GET; an HTTP error status is an answer, not an exception."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


# ---- processes ---------------------------------------------------------------------------------

_started: list[subprocess.Popen] = []


def spawn(argv: list, **kwargs) -> subprocess.Popen:
    """Popen in its own session (so stop_process reaches its children too), remembered so that
    stop_all() stops it, and killed by the kernel (setpriv --pdeathsig) should the harness die
    without stopping it. setpriv execs the program, so the pid is the program's."""
    prefix = [SETPRIV, "--pdeathsig", "KILL", "--"] if SETPRIV else []
    process = subprocess.Popen(prefix + [str(a) for a in argv], start_new_session=True, **kwargs)
    _started.append(process)
    return process


def stop_process(process: subprocess.Popen | None, timeout: float = 10, sig: int = signal.SIGTERM,
                 log=None) -> float:
    """Sends sig to the process's group, waits up to timeout seconds, then SIGKILLs the group.
    Returns the seconds it took; log, when given, is told about a SIGKILL."""
    if process is None:
        return 0.0
    if process in _started:
        _started.remove(process)
    if process.poll() is not None:
        return 0.0
    start = time.monotonic()
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        if log:
            log(f"{program(process)} (pid {process.pid}) ignored signal {sig} for {timeout} s: SIGKILL")
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)
    return time.monotonic() - start


def program(process: subprocess.Popen) -> str:
    """The name of the program a spawn()ed process runs (not setpriv's)."""
    args = process.args[4:] if SETPRIV and process.args[:1] == [SETPRIV] else process.args
    return os.path.basename(str(args[0]))


@atexit.register
def stop_all(timeout: float = 5) -> None:
    """Stops every process spawn() started and nobody stopped yet, the last started first."""
    for process in list(reversed(_started)):
        stop_process(process, timeout)


def interrupt_on_sigterm() -> None:
    """SIGTERM (a CI timeout, kill) interrupts the run as Ctrl-C does, so that finally blocks and
    stop_all() still stop what was started."""
    def interrupt(*_):
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)


class Process:
    """A spawned child with its output (stdout and stderr) in a log file, appended to or new."""

    def __init__(self, name: str, argv: list, log_path: str | Path, env: dict | None = None,
                 cwd: str | Path | None = None, append: bool = False):
        self.name = name
        self.log_path = Path(log_path)
        self.log_file = open(self.log_path, "ab" if append else "wb")
        self.popen = spawn(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=self.log_file,
                           stderr=self.log_file)
        self.pid = self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        if not self.log_file.closed:
            self.log_file.flush()
        return tail(self.log_path, lines)

    def stop(self, timeout: float = 15, sig: int = signal.SIGTERM, log=None) -> int | None:
        """Stops it (stop_process) and returns its exit status."""
        stop_process(self.popen, timeout, sig, log)
        self.log_file.close()
        return self.popen.returncode


# ---- files -------------------------------------------------------------------------------------

def temporary_directory(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"smarthome-{name}-"))


def remove_directory(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def tail(path: str | Path | None, lines: int = 15, pattern: str | None = None, indent: str = "") -> str:
    """The last lines of a log (those matching pattern, when given), or "(no log)"."""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except (OSError, TypeError):
        return "(no log)"
    if pattern:
        text = [line for line in text if re.search(pattern, line)]
    return "\n".join(indent + line[:400] for line in text[-lines:])


def copy_logs(directory: str | Path, destination: str | Path, names=("bridge.log", "mosquitto.log")) -> None:
    """The logs (bridge's and broker's) in directory, copied to destination for a person looking
    into a failure."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = Path(directory) / name
        if source.exists():
            shutil.copyfile(source, destination / name)


# ---- mosquitto ---------------------------------------------------------------------------------

class Broker:
    """A private mosquitto on a free loopback port: anonymous clients, no persistence; its config
    and log (mosquitto.conf, mosquitto.log) in its own folder. `extra` is appended to the config."""

    def __init__(self, directory: str | Path, extra: str = "", log_types=("error", "warning"), attempts: int = 5):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = self.directory / "mosquitto.conf"
        self.log_path = self.directory / "mosquitto.log"
        last = None
        for _ in range(attempts):  # a port taken between free_port() and mosquitto's bind: another one
            self.port = free_port()
            self.config.write_text(f"listener {self.port} {HOST}\nallow_anonymous true\npersistence false\n"
                                   "log_dest stderr\n" + "".join(f"log_type {t}\n" for t in log_types) + extra)
            self.process = Process("mosquitto", [MOSQUITTO, "-c", self.config], self.log_path, cwd=self.directory)
            try:
                wait_for_port(self.port, 10, self.process.popen, "mosquitto", self.log_path)
                return
            except RuntimeError as error:
                self.process.stop()
                last = error
        raise RuntimeError(f"mosquitto did not start: {last}")

    @property
    def url(self) -> str:
        return f"mqtt://{HOST}:{self.port}"

    def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        """One message at QoS 1 through mosquitto_pub."""
        args = [MOSQUITTO_PUB, "-h", HOST, "-p", str(self.port), "-q", "1", "-t", topic, "-m", payload]
        subprocess.run(args + (["-r"] if retain else []), check=True, timeout=10)

    def stop(self) -> None:
        self.process.stop()


# ---- the bridge --------------------------------------------------------------------------------

def bridge_environment(broker: Broker, http_port: int, storage: str | Path, extra: dict | None = None) -> dict:
    """This process's environment without any SMARTHOME_ variable, then the broker, the HTTP port
    and the SQLite file (README, Configuration), then extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SMARTHOME_")}
    env.update({
        "SMARTHOME_MQTT_URL": broker.url,
        "SMARTHOME_HTTP_PORT": str(http_port),
        "SMARTHOME_STORAGE_PATH": str(storage),
    })
    env.update(extra or {})
    return env


class Bridge:
    """The bridge binary on `config`, connected to `broker`, with its own folder (bridge.sqlite,
    bridge.log; its working directory), HTTP port and SMARTHOME_ variables (bridge_environment plus
    `env`). Not started until start(); it may be stopped and started again."""

    def __init__(self, directory: str | Path, broker: Broker, config: str | Path, env: dict | None = None,
                 binary: str | Path | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.broker = broker
        self.config = Path(config).absolute()  # absolute: the bridge runs in its own folder
        self.binary = Path(binary or BRIDGE).absolute()
        self.http_port = free_port()
        self.database = self.directory / "bridge.sqlite"
        self.log_path = self.directory / "bridge.log"
        self.env = bridge_environment(broker, self.http_port, self.database, env)
        self.process: Process | None = None
        self.ready_seconds: float | None = None
        self.exit_status: int | None = None

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.http_port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def healthz(self, timeout: float = 1) -> tuple[int, bytes] | None:
        """(status, body) of GET /healthz, or None while nothing answers."""
        try:
            status, _, body = http_get(f"{self.base}/healthz", timeout=timeout)
            return status, body
        except OSError:
            return None

    def healthy(self) -> bool:
        answer = self.healthz()
        return answer is not None and answer[0] == 200

    def start(self, config: str | Path | None = None, ready=None, timeout: float = 20, interval: float = 0.05,
              message: str = "the bridge's /healthz") -> float:
        """Starts it (on config, when given, instead of its own) and waits until ready() (by
        default: /healthz answers 200); returns the seconds that took. RuntimeError when the bridge
        or its broker exits first, AssertionError when it is not ready within timeout seconds."""
        assert os.access(self.binary, os.X_OK), f"{self.binary} missing: swift build first"
        started = time.monotonic()
        argv = [self.binary, "--config", Path(config or self.config).absolute()]
        self.process = Process(self.name, argv, self.log_path, env=self.env, cwd=self.directory, append=True)
        ready = ready or self.healthy

        def up():
            if not self.process.running():
                raise RuntimeError(f"the bridge exited with {self.process.popen.returncode} at start; "
                                   f"log:\n{tail(self.log_path, 40)}")
            if not self.broker.process.running():
                raise RuntimeError(f"mosquitto exited ({self.broker.process.popen.returncode}) while the bridge "
                                   f"was starting: {self.broker.process.tail()}")
            return ready()

        try:
            wait_until(up, timeout, interval, message)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - started
        return self.ready_seconds

    @property
    def name(self) -> str:
        return self.directory.name

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15, log=None) -> float:
        """Stops it (stop_process); returns the seconds that took."""
        if self.process is None:
            return 0.0
        start = time.monotonic()
        self.process.stop(timeout, sig, log)
        self.exit_status = self.process.popen.returncode
        self.process = None
        return time.monotonic() - start
