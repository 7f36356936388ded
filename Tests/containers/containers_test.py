#!/usr/bin/env python3
"""The docker-compose stack in real containers (README, "Run the stack in containers").

Tests/containers/run.sh makes the base images, builds the bridge image and then runs this file,
which drives the unchanged docker-compose.yml with a compose tool on its own project name:

1. default profile: both services pass their own healthcheck (run here: Podman without systemd
   does not schedule healthchecks); every published port is bound to 127.0.0.1; /healthz and the
   seed routes answer on the published HTTP port; through the published broker port each MQTT
   account sees and may publish only what its ACL gives it; the bridge runs as uid 10001 with its
   database in the bridge-data volume.
2. `down` then `up`: a token issued before still works (the session key is in the database) and a
   retained message is still on the broker (mosquitto-data); `down -v` removes the volumes, and
   after `up` the token is refused and the message is gone.
3. profile rest (SMARTHOME_SOURCE_KIND=rest): the bridge polls the upstream container and shows
   its readings; every room is online.
4. `down -v`: no container, volume or network of the project is left.

Environment (run.sh sets it): ENGINE (docker or podman), COMPOSE (the compose command, shell
words), PROJECT (the compose project name), STACK_MQTT_PORT, STACK_HTTP_PORT, STACK_UPSTREAM_PORT.
Prints one line per check and ends with "N passed, N failed"; exits 1 if any failed.
"""

import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "stack"))
import stack_test as st  # noqa: E402  (the stack test's checks, run here against the containers)
from stack_test import CheckFailed, check, ensure, http_get, mosquitto_sub, read_accounts  # noqa: E402

ROOT = st.ROOT
ENGINE = shlex.split(os.environ.get("ENGINE", "podman"))
COMPOSE = shlex.split(os.environ.get("COMPOSE", "podman-compose"))
PROJECT = os.environ.get("PROJECT", f"smarthome-containers-{os.getpid()}")
PORTS = {"mqtt": int(os.environ.get("STACK_MQTT_PORT", "1883")),
         "bridge": int(os.environ.get("STACK_HTTP_PORT", "8080")),
         "upstream": int(os.environ.get("STACK_UPSTREAM_PORT", "8081"))}
# How long a service may take to pass its healthcheck after `up` (the bridge's start_period is 20 s).
HEALTHY_WITHIN = 120


def run(argv, env=None, timeout=300, check_status=True):
    return st.run(argv, env=env, timeout=timeout, check_status=check_status)


def compose(*args, profiles=(), variables=None, timeout=600):
    env = dict(os.environ)
    env.update(variables or {})
    argv = COMPOSE + ["-p", PROJECT, "-f", os.path.join(ROOT, "docker-compose.yml")]
    for profile in profiles:
        argv += ["--profile", profile]
    return run(argv + list(args), env=env, timeout=timeout)


def engine(*args, check_status=True, timeout=120):
    return run(ENGINE + list(args), timeout=timeout, check_status=check_status)


def container(service):
    """The name of the project's container of a service (compose labels, as both tools set them)."""
    result = engine("ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                    "--filter", f"label=com.docker.compose.service={service}", "--format", "{{.Names}}")
    names = result.stdout.split()
    ensure(len(names) == 1, f"containers of service {service}: {names}")
    return names[0]


def project_objects():
    """Containers, volumes and networks of the project."""
    containers = engine("ps", "-a", "--filter", f"label=com.docker.compose.project={PROJECT}",
                        "--format", "{{.Names}}").stdout.split()
    volumes = [v for v in engine("volume", "ls", "--format", "{{.Name}}").stdout.split()
               if v.startswith(PROJECT + "_")]
    networks = [n for n in engine("network", "ls", "--format", "{{.Name}}").stdout.split()
                if n.startswith(PROJECT + "_")]
    return containers, volumes, networks


# Every volume a container of the project had mounted, named or anonymous (an image's VOLUME
# without a mount over it gets an anonymous one): `down -v` must remove them all.
SEEN_VOLUMES = set()


def remember_volumes(services):
    for service in services:
        mounts = json.loads(engine("inspect", "--format", "{{json .Mounts}}", container(service)).stdout)
        SEEN_VOLUMES.update(m["Name"] for m in mounts if m.get("Type") == "volume")


def volumes_left():
    existing = set(engine("volume", "ls", "--format", "{{.Name}}").stdout.split())
    return sorted(SEEN_VOLUMES & existing)


def healthcheck(service):
    """Runs the service's healthcheck once: (passed, output)."""
    name = container(service)
    if os.path.basename(ENGINE[0]) == "podman":
        result = engine("healthcheck", "run", name, check_status=False, timeout=60)
        return result.returncode == 0, result.stdout.strip()
    status = engine("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
    return status == "healthy", status


def wait_healthy(services):
    deadline = time.monotonic() + HEALTHY_WITHIN
    pending = list(services)
    last = {}
    while pending:
        for service in list(pending):
            passed, last[service] = healthcheck(service)
            if passed:
                pending.remove(service)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(2)
    remember_volumes(services)
    if pending:
        logs = "\n".join(f"--- {s} (tail) ---\n{engine('logs', '--tail', '30', container(s), check_status=False).stdout}"
                         for s in pending)
        raise CheckFailed(f"not healthy within {HEALTHY_WITHIN} s: "
                          + ", ".join(f"{s} ({last.get(s)!r})" for s in pending) + "\n" + logs)
    return "healthy: " + ", ".join(services)


class ContainerStack:
    """What the stack test's checks ask of a stack, answered by the containers' published ports."""

    def __init__(self, services):
        self.http_ports = {s: PORTS[s] for s in services if s in ("bridge", "upstream")}
        compose_file = st.yaml.safe_load(open(os.path.join(ROOT, "docker-compose.yml"), encoding="utf-8"))
        self.environment = {name: service.get("environment", {}) for name, service in compose_file["services"].items()}

    def mqtt_port(self):
        return PORTS["mqtt"]

    def account(self, service):
        env = self.environment[service]
        return env["SMARTHOME_MQTT_USERNAME"], env["SMARTHOME_MQTT_PASSWORD"]


# ------------------------------------------------------------------------------------------------
# Checks

def check_published_on_loopback(services):
    """Every published port of the services is bound to 127.0.0.1 and is the one asked for."""
    seen = []
    for service in services:
        result = engine("port", container(service))
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        ensure(lines, f"{service} publishes no port")
        for line in lines:
            inside, _, outside = line.partition(" -> ")
            host, _, port = outside.rpartition(":")
            ensure(host == "127.0.0.1", f"{service}: {line} is not bound to 127.0.0.1 only")
            expected = PORTS["mqtt" if service == "mosquitto" else service]
            ensure(int(port) == expected, f"{service}: {line}, expected host port {expected}")
            seen.append(f"{service} {inside} -> {outside}")
    return ", ".join(seen)


def check_seed_routes():
    port = PORTS["bridge"]
    status, headers, body = http_get(port, "/login/Cemalettin/12345")
    ensure(status == 200 and headers.get("Content-Type", "").startswith("application/json"), f"/login: {status} {body}")
    login = json.loads(body)
    ensure(login.get("userID") == "1" and login.get("rooms", [])[:2] == ["livingroom", "bathroom"], f"/login: {body}")
    status, _, body = http_get(port, "/login/Cemalettin/wrong")
    ensure(status == 200 and json.loads(body) == {"userID": "0"}, f"/login with a wrong password: {status} {body}")
    status, _, body = http_get(port, "/rooms/2")
    rooms = json.loads(body)
    ensure(status == 200 and rooms.get("rooms", [])[:1] == ["Garden"] and rooms.get("roomsicon", [])[:1] == ["garden"],
           f"/rooms/2: {status} {body}")
    status, _, body = http_get(port, "/rooms/9/Kitchen")
    ensure(status == 404 and json.loads(body) == {"error": {"message": "Not found"}}, f"/rooms/9/Kitchen: {status} {body}")
    return st.check_bridge_http(STACK, "bridge") + ", /login, /rooms/2, 404"


def bridge_subscriber(topics):
    """A mosquitto_sub of the bridge's account, returned once its subscription is acknowledged: the
    first topic must be smarthome/bridge/state, whose retained 'online' comes right after SUBACK."""
    user, password = STACK.account("bridge")
    argv = ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(PORTS["mqtt"]), "-u", user, "-P", password, "-v", "-W", "20"]
    for topic in topics:
        argv += ["-t", topic]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = process.stdout.readline().strip()
    if first != "smarthome/bridge/state online":
        process.kill()
        raise CheckFailed(f"the bridge's subscriber: {first!r}")
    return process


def publish(user, password, topic, message, retain=False):
    argv = ["mosquitto_pub", "-h", "127.0.0.1", "-p", str(PORTS["mqtt"]), "-u", user, "-P", password,
            "-q", "1", "-t", topic, "-m", message]
    return run(argv + (["-r"] if retain else []), check_status=False)


def check_acl_denies():
    """Publishes an account's ACL does not allow are dropped by the broker; the allowed publish sent
    after them arrives, so the subscriber was listening (QoS 1: each publish is acknowledged, hence
    handled, before the next one is sent)."""
    users = read_accounts(os.path.join(st.MOSQUITTO_DIR, "accounts.txt"))
    extra = read_accounts(os.path.join(st.MOSQUITTO_DIR, "stack-accounts.txt"))
    marker = secrets.token_hex(4)
    denied = [
        ("Cemalettin", users["Cemalettin"], "smarthome/2/kitchen/lights/set"),    # another user's lights
        ("Cemalettin", users["Cemalettin"], "smarthome/1/kitchen/temperature"),   # a reading
        ("Mehmet", users["Mehmet"], "smarthome/1/kitchen/lights/set"),
        ("homeassistant", extra["homeassistant"], "smarthome/1/kitchen/temperature"),
        ("smarthome-upstream", extra["smarthome-upstream"], "smarthome/1/kitchen/lights/set"),
    ]
    topics = ["smarthome/bridge/state"] + sorted({t for _, _, t in denied}) + ["homeassistant/containers-test"]
    subscriber = bridge_subscriber(topics)
    try:
        for user, password, topic in denied:
            result = publish(user, password, topic, f"denied-{marker}")
            ensure(result.returncode == 0, f"mosquitto_pub as {user}: {result.stdout}")
        publish("homeassistant", extra["homeassistant"], "homeassistant/containers-test", f"allowed-{marker}")
        received = []
        for line in subscriber.stdout:
            received.append(line.strip())
            if line.strip() == f"homeassistant/containers-test allowed-{marker}":
                break
    finally:
        subscriber.kill()
        subscriber.wait()
    ensure(f"homeassistant/containers-test allowed-{marker}" in received,
           f"the allowed publish never arrived: {received}")
    leaked = [line for line in received if f"denied-{marker}" in line]
    ensure(not leaked, f"the broker passed on publishes its ACL denies: {leaked}")
    return f"{len(denied)} denied publishes dropped, the allowed one delivered"


def check_non_root_and_volume():
    name = container("bridge")
    status = engine("exec", name, "cat", "/proc/1/status").stdout
    uids = next(line.split()[1:] for line in status.splitlines() if line.startswith("Uid:"))
    ensure(set(uids) == {"10001"}, f"the bridge's process runs with uids {uids}")
    listing = engine("exec", name, "stat", "-c", "%u:%g %a %n", "/data/bridge.sqlite").stdout.strip()
    ensure(listing.startswith("10001:10001 "), f"the database: {listing}")
    mounts = json.loads(engine("inspect", "--format", "{{json .Mounts}}", name).stdout)
    data = [m for m in mounts if m.get("Destination") == "/data"]
    ensure(data and data[0].get("Type") == "volume" and data[0].get("Name") == f"{PROJECT}_bridge-data",
           f"/data is not the bridge-data volume: {data}")
    config = [m for m in mounts if m.get("Destination") == "/config"]
    ensure(config and not config[0].get("RW", True), f"/config is not mounted read-only: {config}")
    return f"uid 10001, {listing}, /data = volume {data[0]['Name']}"


def login():
    request = urllib.request.Request(f"http://127.0.0.1:{PORTS['bridge']}/api/v1/login", method="POST",
                                     data=json.dumps({"username": "Mehmet", "password": "123456"}).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["token"]


def token_status(token):
    request = urllib.request.Request(f"http://127.0.0.1:{PORTS['bridge']}/api/v1/rooms",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


MARKER_TOPIC = "smarthome/containers-test/retained"


def retained_marker():
    """The retained value of MARKER_TOPIC, or None: subscribed before smarthome/bridge/state in one
    SUBSCRIBE, so a retained marker arrives before the bridge's retained state."""
    user, password = STACK.account("bridge")
    status, messages, output = mosquitto_sub(PORTS["mqtt"], user, password,
                                             [MARKER_TOPIC, "smarthome/bridge/state"], wait=10)
    topics = [t for t, _ in messages]
    ensure("smarthome/bridge/state" in topics, f"no smarthome/bridge/state: {output}")
    before = topics[:topics.index("smarthome/bridge/state")]
    return dict(messages).get(MARKER_TOPIC) if MARKER_TOPIC in before else None


def context_files(*args):
    result = run([sys.executable, os.path.join(HERE, "build_context.py")] + list(args), timeout=300)
    return result.stdout.split()


def check_build_context():
    """Docker's and Buildah's build contexts are the same files (.dockerignore), test targets included:
    Buildah as the engine has it, the docker CLI's (its own matcher, classic builder, against a
    stand-in API: no daemon is needed) and the stack test's matcher of Docker's rules."""
    listings = {"buildah": context_files("buildah", *ENGINE) if os.path.basename(ENGINE[0]) == "podman" else None,
                "docker-cli": context_files("docker") if shutil.which("docker") else None,
                "docker-rules": context_files("python")}
    present = {name: files for name, files in listings.items() if files is not None}
    reference = present["docker-rules"]
    ensure(any(f.startswith("Tests/IntegrationTests/") and f.endswith(".swift") for f in reference)
           and "Package.swift" in reference, f"the context lacks the package or its test targets: {reference[:10]}")
    for name, files in present.items():
        missing, extra = sorted(set(reference) - set(files)), sorted(set(files) - set(reference))
        ensure(not missing and not extra, f"{name} differs from Docker's rules: missing {missing[:5]}, extra {extra[:5]}")
    skipped = [name for name, files in listings.items() if files is None]
    return (f"{len(reference)} files, the same for " + ", ".join(present)
            + (f"; not run: {', '.join(skipped)} (not installed)" if skipped else ""))


def check_image():
    image = json.loads(engine("image", "inspect", "smarthome-bridge:local").stdout)[0]
    config = image["Config"]
    # Docker keeps it in Config, Podman's inspect beside it.
    health = (config.get("Healthcheck") or image.get("Healthcheck") or {}).get("Test") or []
    ensure(any("/healthz" in part for part in health), f"no HEALTHCHECK in the image: {health}")
    ensure(config.get("User") == "10001:10001", f"User {config.get('User')!r}")
    ensure(set(config.get("Volumes") or {}) == {"/config", "/data"}, f"Volumes {config.get('Volumes')}")
    ensure(config.get("Entrypoint") == ["smarthome-bridge"] and config.get("Cmd") == ["run"],
           f"Entrypoint {config.get('Entrypoint')} Cmd {config.get('Cmd')}")
    return f"HEALTHCHECK {health[-1][:60]}..., User 10001:10001, /config and /data"


def main():
    print(f"# {' '.join(ENGINE)}, {' '.join(COMPOSE)}, project {PROJECT}, ports {PORTS}", flush=True)
    check("build context: Buildah, the docker CLI and Docker's rules let in the same files", check_build_context)
    check("hadolint on the Dockerfile", st.check_hadolint)
    check("the bridge image keeps the Dockerfile's HEALTHCHECK, user, volumes and entry point", check_image)
    try:
        scenario()
    finally:
        def cleaned():
            compose("down", "-v", profiles=["rest"], variables={"SMARTHOME_SOURCE_KIND": "rest"})
            left = project_objects()
            ensure(not any(left), f"left behind: {left}")
            anonymous = volumes_left()
            ensure(not anonymous, f"volumes the containers had mounted are left: {anonymous}")
            return f"no container, volume or network of the project left ({len(SEEN_VOLUMES)} volumes seen, all gone)"

        check("cleanup: `down -v` with every profile used", cleaned)
    return finish()


def scenario():
    global STACK
    default = ["mosquitto", "bridge"]
    STACK = ContainerStack(default)
    state = {}
    if not check("default: compose up", lambda: compose("up", "-d").stdout.strip().splitlines()[-1]):
        return
    if not check("default: mosquitto and bridge pass their healthchecks", wait_healthy, default):
        return
    check("default: published ports are on 127.0.0.1 only", check_published_on_loopback, default)
    check("default: /healthz and the seed routes on the published HTTP port", check_seed_routes)
    check("default: anonymous MQTT clients are refused", st.check_anonymous_refused, STACK)
    check("default: retained topics reach the bridge's account", st.check_bridge_account_topics, STACK, "bridge")
    check("default: a demo user reads only his own topics", st.check_user_confined, STACK)
    check("default: the homeassistant account reads the rooms", st.check_homeassistant_account, STACK)
    check("default: a demo user's light command reaches the bridge", st.check_light_command, STACK, "bridge")
    check("default: every account's publishes outside its ACL are dropped", check_acl_denies)
    check("default: the bridge runs as uid 10001, its database in the bridge-data volume",
          check_non_root_and_volume)

    def before_down():
        state["token"] = login()
        ensure(token_status(state["token"]) == 200, "a fresh token is refused")
        state["marker"] = secrets.token_hex(8)
        user, password = STACK.account("bridge")
        result = publish(user, password, MARKER_TOPIC, state["marker"], retain=True)
        ensure(result.returncode == 0, result.stdout)
        ensure(retained_marker() == state["marker"], "the retained marker is not on the broker")
        return f"Mehmet's token accepted, {MARKER_TOPIC} = {state['marker']}"

    check("persistence: a token and a retained message before `down`", before_down)

    def down_up():
        compose("down")
        containers, volumes, _ = project_objects()
        ensure(not containers, f"containers left after down: {containers}")
        ensure(sorted(volumes) == [f"{PROJECT}_bridge-data", f"{PROJECT}_mosquitto-data"],
               f"volumes after down: {volumes}")
        compose("up", "-d")
        wait_healthy(default)
        return f"volumes kept: {', '.join(sorted(volumes))}"

    if check("persistence: `down` keeps the volumes, `up` is healthy again", down_up):
        check("persistence: the token still works after `down`/`up` (session key in the database)",
              lambda: ensure(token_status(state["token"]) == 200, "the token is refused") or "200")
        check("persistence: the retained message is still there (mosquitto-data)",
              lambda: ensure(retained_marker() == state["marker"], "the marker is gone") or state["marker"])

    def down_v_up():
        compose("down", "-v")
        containers, volumes, networks = project_objects()
        ensure(not containers and not volumes and not networks,
               f"left after down -v: {containers} {volumes} {networks}")
        compose("up", "-d")
        wait_healthy(default)
        return "no container, volume or network left in between"

    if check("persistence: `down -v` removes the volumes, `up` is healthy again", down_v_up):
        check("persistence: after `down -v` the old token is refused (new session key)",
              lambda: ensure(token_status(state["token"]) == 401, "the old token still works") or "401")
        check("persistence: after `down -v` the retained message is gone",
              lambda: ensure(retained_marker() is None, "the marker survived down -v") or "gone")
    check("default: `down -v`", lambda: compose("down", "-v") and "done")

    # The rest profile: the bridge polls the upstream container.
    rest = ["mosquitto", "upstream", "bridge"]
    STACK = ContainerStack(rest)
    variables = {"SMARTHOME_SOURCE_KIND": "rest"}
    if check("rest: compose --profile rest up",
             lambda: compose("up", "-d", profiles=["rest"], variables=variables).stdout.strip().splitlines()[-1]):
        if check("rest: mosquitto, upstream and bridge pass their healthchecks", wait_healthy, rest):
            check("rest: published ports are on 127.0.0.1 only", check_published_on_loopback, rest)
            check("rest: HTTP on the upstream", st.check_bridge_http, STACK, "upstream")
            check("rest: the upstream publishes on its own account", st.check_upstream_publishes, STACK)
            check("rest: the polling bridge publishes availability online for every room",
                  st.check_availability, STACK, "bridge")
            check("rest: the polling bridge serves the upstream's readings", st.check_polled_values, STACK)


def finish():
    print(f"{st.RESULTS['passed']} passed, {st.RESULTS['failed']} failed", flush=True)
    return 0 if st.RESULTS["failed"] == 0 else 1


STACK = None

if __name__ == "__main__":
    sys.exit(main())
