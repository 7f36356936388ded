#!/usr/bin/env bash
# The docker-compose stack in real containers (README, "Run the stack in containers"; `make
# test-containers` runs this). Steps, each timed:
#
# 1. The engine: Docker when its daemon answers (`docker info`), else Podman, run as root with
#    runc, cgroupfs and explicit ulimits (CONTAINERS_CONF, written to a temporary folder).
# 2. The base images: BASE_IMAGES=local (the default) uses the images already in the engine's
#    store and makes the missing ones with base-images.sh from Debian's mirror and the host's
#    Swift toolchain, never contacting a container registry (with Podman, registries.conf blocks
#    docker.io for the whole run); BASE_IMAGES=pull pulls the official images instead.
# 3. The bridge image, `smarthome-bridge:local` as docker-compose.yml names it, from the
#    unchanged Dockerfile.
# 4. containers_test.py: the stack up with the compose tool (Docker: `docker compose` or
#    docker-compose; Podman: podman-compose, PODMAN_COMPOSE or .build/stack-tools/bin), on its
#    own project name and free loopback ports, checked, down and up again, down -v.
# 5. Cleanup, also on failure: the project's containers, volumes and networks, the bridge image and
#    its build's intermediate images. The base images stay cached (CLEAN_BASE_IMAGES=1 removes
#    the stand-ins too).
#
# Needs root (or a Docker daemon), python3 with PyYAML, mosquitto-clients, curl; for the stand-ins
# debootstrap and a Swift toolchain at SWIFT_TOOLCHAIN (default /opt/swift). `make test-containers`
# installs all of it on Debian 12. Ends with "N passed, N failed"; exits non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
started=$(date +%s)
stamp() { echo "# [$(( $(date +%s) - started )) s] $*"; }

work=$(mktemp -d /tmp/smarthome-containers.XXXXXX)
project=${PROJECT:-smarthome-containers-$$}
image=smarthome-bridge:local

# ---- 1. engine -------------------------------------------------------------------------------
if [ -z "${CONTAINER_ENGINE:-}" ]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        CONTAINER_ENGINE=docker
    else
        CONTAINER_ENGINE=podman
    fi
fi
case "$CONTAINER_ENGINE" in
docker)
    engine=(docker)
    if docker compose version >/dev/null 2>&1; then compose="docker compose"; else compose=docker-compose; fi
    build_options=()
    ;;
podman)
    command -v podman >/dev/null || { echo "podman is not installed (apt-get install podman)"; exit 1; }
    # Without systemd (and so without its cgroup manager) and with limits that cannot be raised
    # (the containers' default nofile of 1048576 is refused): runc, cgroupfs, the host's own limits.
    nofile=$(ulimit -Hn)
    nproc=$(ulimit -Hu)
    if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
    cat > "$work/containers.conf" <<EOF
[containers]
log_driver = "k8s-file"
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    export CONTAINERS_CONF=$work/containers.conf
    if [ "${BASE_IMAGES:-local}" != pull ]; then
        # No registry: short names resolve only to local images, docker.io is unreachable on purpose.
        printf 'unqualified-search-registries = []\n[[registry]]\nlocation = "docker.io"\nblocked = true\n' \
            > "$work/registries.conf"
        export CONTAINERS_REGISTRIES_CONF=$work/registries.conf
    fi
    engine=(podman)
    compose=${PODMAN_COMPOSE:-$root/.build/stack-tools/bin/podman-compose}
    [ -x "${compose%% *}" ] || command -v "${compose%% *}" >/dev/null ||
        { echo "podman-compose is missing: make test-deps (or PODMAN_COMPOSE=...)"; exit 1; }
    # Docker's image format keeps the HEALTHCHECK (the OCI format has none); no layer cache, so the
    # build leaves no intermediate images behind.
    build_options=(--format docker --layers=false --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
    ;;
*) echo "CONTAINER_ENGINE must be docker or podman"; exit 1 ;;
esac
stamp "engine: ${engine[*]} ($("${engine[@]}" --version)), compose: $compose, project $project"

cleanup() {
    status=$?
    set +e
    stamp "cleanup"
    # containers_test.py brings the project down itself; this is for an interrupted or failed run.
    ids=$("${engine[@]}" ps -aq --filter "label=com.docker.compose.project=$project")
    [ -n "$ids" ] && "${engine[@]}" rm -f -v $ids >/dev/null
    for volume in $("${engine[@]}" volume ls -q | grep "^${project}_"); do "${engine[@]}" volume rm -f "$volume" >/dev/null; done
    for network in $("${engine[@]}" network ls --format '{{.Name}}' | grep "^${project}_"); do "${engine[@]}" network rm -f "$network" >/dev/null; done
    "${engine[@]}" rmi -f "$image" >/dev/null 2>&1
    # Whatever else this run's build tagged with its label (an interrupted build's leftovers).
    ids=$("${engine[@]}" images -q --filter "label=org.smarthomebridge.test-build=$project" 2>/dev/null)
    [ -n "$ids" ] && "${engine[@]}" rmi -f $ids >/dev/null 2>&1
    if [ "${CLEAN_BASE_IMAGES:-}" = 1 ]; then
        for base in eclipse-mosquitto:2 swift:6.3-bookworm debian:bookworm-slim; do
            if [ -n "$("${engine[@]}" image inspect --format '{{index .Labels "org.smarthomebridge.stand-in"}}' "$base" 2>/dev/null)" ]; then
                "${engine[@]}" rmi -f "$base" >/dev/null
            fi
        done
    fi
    rm -rf "$work"
    stamp "done (exit $status)"
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- 2. base images --------------------------------------------------------------------------
if [ "${BASE_IMAGES:-local}" = pull ]; then
    for base in swift:6.3-bookworm debian:bookworm-slim eclipse-mosquitto:2; do "${engine[@]}" pull "docker.io/library/$base"; done
else
    stamp "base images: local stand-ins where missing (BASE_IMAGES=local; no registry is contacted)"
    Tests/containers/base-images.sh "${engine[*]}"
fi
stamp "base images ready"

# ---- 3. the bridge image ---------------------------------------------------------------------
stamp "building $image"
pull_never=--pull=never
[ "${BASE_IMAGES:-local}" = pull ] && pull_never=
"${engine[@]}" build $pull_never "${build_options[@]}" --label "org.smarthomebridge.test-build=$project" \
    -t "$image" . > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
stamp "built $image ($("${engine[@]}" image inspect --format '{{.Size}}' "$image") bytes)"

# ---- 4. the stack ----------------------------------------------------------------------------
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export ENGINE="${engine[*]}" COMPOSE="$compose" PROJECT="$project"
export STACK_ADDRESS=127.0.0.1 STACK_MQTT_PORT=$(free_port) STACK_HTTP_PORT=$(free_port) STACK_UPSTREAM_PORT=$(free_port)
# Only the compose file's own defaults: nothing of the caller's SMARTHOME_* settings.
unset $(env | sed -n 's/^\(SMARTHOME_[A-Z_]*\)=.*/\1/p')
PYTHON=${PYTHON:-$( [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3 )}
stamp "checks"
"$PYTHON" Tests/containers/containers_test.py
