#!/usr/bin/env bash
# Stand-ins for the stack's three base images, made locally when no container registry is used
# (README, "Run the stack in containers"): Debian 12 from Debian's own mirror with debootstrap,
# the Swift toolchain copied from the host. Each is tagged with the name the Dockerfile or
# docker-compose.yml uses, so the unchanged files build and run on them:
#
#   debian:bookworm-slim   debootstrap --variant=minbase bookworm, imported
#   swift:6.3-bookworm     that + the packages the official Swift image installs + /opt/swift
#   eclipse-mosquitto:2    that + Debian's mosquitto, in the official image's layout
#                          (/mosquitto/{config,data,log}, user mosquitto, mosquitto -c ... as CMD)
#
# An image already present is kept (REBUILD_BASE_IMAGES=1 makes all three again). Usage:
#   base-images.sh ENGINE     ENGINE: docker or podman (with its global options, one word each)
# Environment: DEBIAN_MIRROR (default: the Debian archive URI apt uses here), DEBIAN_SECURITY_MIRROR
# (default: the same host's debian-security), SWIFT_TOOLCHAIN (default /opt/swift; a folder with usr/bin/swift). Needs debootstrap and root.
set -euo pipefail
read -r -a engine <<< "${1:?usage: base-images.sh ENGINE}"
toolchain=${SWIFT_TOOLCHAIN:-/opt/swift}
label=org.smarthomebridge.stand-in

have() { "${engine[@]}" image inspect "$1" >/dev/null 2>&1; }
log() { echo "# base-images: $*" >&2; }

mirror() {
    if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
    # The mirror apt uses (deb822 "URIs:" or one-line "deb URI suite"), for the suite bookworm.
    local uri
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ { print $2 } /^deb / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' |
        grep -v -e security -e '-updates' | grep -m1 '/debian/\?$' || true)
    echo "${uri:-http://deb.debian.org/debian}"
}

# $1: the tag; the rest: a shell script run as root in a container of debian:bookworm-slim,
# whose file system is then committed as the image (with $commit_changes).
from_debian() {
    local tag=$1 script=$2 name
    shift 2
    name=smarthome-stand-in-$$-${RANDOM}
    "${engine[@]}" rm -f "$name" >/dev/null 2>&1 || true
    "${engine[@]}" run --name "$name" "$@" debian:bookworm-slim /bin/sh -euc "$script"
    "${engine[@]}" commit "${commit_changes[@]}" "$name" "$tag" >/dev/null
    "${engine[@]}" rm -f "$name" >/dev/null
}

if [ "${REBUILD_BASE_IMAGES:-}" = 1 ]; then
    for image in eclipse-mosquitto:2 swift:6.3-bookworm debian:bookworm-slim; do
        "${engine[@]}" rmi -f "$image" >/dev/null 2>&1 || true
    done
fi

if ! have debian:bookworm-slim; then
    url=$(mirror)
    log "debian:bookworm-slim from debootstrap --variant=minbase bookworm $url"
    root=$(mktemp -d /var/tmp/smarthome-debootstrap.XXXXXX)
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase bookworm "$root" "$url" > "$root.log" 2>&1 ||
        { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
    rm -f "$root.log"
    # As in the official slim image: bookworm, its updates and security suites (so the Dockerfile's
    # apt-get gets today's fixes), no package lists or downloaded packages left behind.
    security=${DEBIAN_SECURITY_MIRROR:-${url%/debian*}/debian-security}
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s bookworm-security main\n' \
        "$url" "$url" "$security" > "$root/etc/apt/sources.list"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$root" -c . |
        "${engine[@]}" import --change 'CMD ["bash"]' --change "LABEL $label=debootstrap" - debian:bookworm-slim >/dev/null
    rm -rf "$root"
    trap - EXIT
fi

if ! have swift:6.3-bookworm; then
    [ -x "$toolchain/usr/bin/swift" ] || { log "no Swift toolchain at $toolchain"; exit 1; }
    log "swift:6.3-bookworm from debian:bookworm-slim + $toolchain"
    commit_changes=(--change "ENV PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                    --change "LABEL $label=swift" --change 'CMD ["bash"]')
    # The packages the official swift:*-bookworm image installs.
    from_debian swift:6.3-bookworm '
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends binutils libc6-dev libcurl4-openssl-dev libedit2 \
            libgcc-12-dev libncurses6 libpython3-dev libsqlite3-0 libstdc++-12-dev libxml2-dev libz3-dev \
            pkg-config tzdata zlib1g-dev git ca-certificates >/dev/null
        rm -rf /var/lib/apt/lists/*
        cp -a /toolchain /opt/swift
        /opt/swift/usr/bin/swift --version' -v "$toolchain:/toolchain:ro"
fi

if ! have eclipse-mosquitto:2; then
    log "eclipse-mosquitto:2 from debian:bookworm-slim + Debian's mosquitto"
    commit_changes=(--change 'ENTRYPOINT []' --change 'CMD ["/usr/sbin/mosquitto", "-c", "/mosquitto/config/mosquitto.conf"]'
                    --change 'EXPOSE 1883' --change 'VOLUME ["/mosquitto/data", "/mosquitto/log"]'
                    --change "LABEL $label=mosquitto")
    from_debian eclipse-mosquitto:2 '
        export DEBIAN_FRONTEND=noninteractive
        printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        apt-get update -q
        apt-get install -y -q --no-install-recommends mosquitto mosquitto-clients >/dev/null
        rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d
        mkdir -p /mosquitto/config /mosquitto/data /mosquitto/log
        printf "listener 1883\nallow_anonymous false\n" > /mosquitto/config/mosquitto.conf
        chown -R mosquitto:mosquitto /mosquitto
        id mosquitto'
fi

for image in debian:bookworm-slim swift:6.3-bookworm eclipse-mosquitto:2; do
    log "$image: $("${engine[@]}" image inspect --format '{{.Id}}' "$image" | cut -c1-19)"
done
