# SmartHomeBridge image: built with the official Swift image on Debian 12 (bookworm), run on
# debian:bookworm-slim with only the libraries the binary links. docker-compose.yml builds it as
# smarthome-bridge:local; on its own:
#
#   docker build -t smarthome-bridge .
#   docker run --rm -p 127.0.0.1:8080:8080 -e SMARTHOME_MQTT_URL=mqtt://broker:1883 smarthome-bridge
#
# The bridge runs as the unprivileged user "bridge" (uid and gid 10001), listens on 0.0.0.0:8080 inside
# the container, reads /config/bridge.yaml and keeps its SQLite database in /data (both volumes).

ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- build -------------------------------------------------------------------------------------
FROM ${SWIFT_IMAGE} AS build

# The -dev packages of the C libraries the package links through pkg-config, and libcurl's,
# which the static Foundation (FoundationNetworking, used by REST mode) links against. Versions
# are not pinned (DL3008): bookworm's security updates should come with every build.
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        pkg-config libmosquitto-dev libmicrohttpd-dev libsqlite3-dev libsodium-dev libyaml-dev libpq-dev \
        libssl-dev libcurl4-openssl-dev \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /build
COPY Package.swift ./
# Only the test targets' Swift files (.dockerignore): SwiftPM wants their folders to exist.
COPY Tests ./Tests
COPY Sources ./Sources

# --static-swift-stdlib links the Swift runtime and Foundation into the binary, so the runtime
# image needs no Swift toolchain libraries, only Debian's C libraries (see the runtime stage).
RUN swift build -c release --static-swift-stdlib --product smarthome-bridge \
    && install -D -m 0755 "$(swift build -c release --static-swift-stdlib --show-bin-path)/smarthome-bridge" \
        /out/smarthome-bridge \
    && /out/smarthome-bridge --version

# ---- runtime -----------------------------------------------------------------------------------
FROM ${RUNTIME_IMAGE}

# What the binary links (readelf -d: libmosquitto, libmicrohttpd, libsqlite3, libsodium, libyaml, libpq,
# libcrypto from libssl3, libcurl; libc, libm, libstdc++ and libgcc_s come with the base image),
# CA certificates for mqtts:// and https:// upstreams, curl for the HEALTHCHECK, and tzdata for
# scheduler.timezone.
# hadolint ignore=DL3008
RUN export DEBIAN_FRONTEND=noninteractive \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
        libmosquitto1 libmicrohttpd12 libsqlite3-0 libsodium23 libyaml-0-2 libpq5 \
        libcurl4 libssl3 ca-certificates curl tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 bridge \
    && useradd --system --uid 10001 --gid bridge --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin bridge \
    && mkdir -p /config /data \
    && chown bridge:bridge /data && chmod 0700 /data

COPY --from=build /out/smarthome-bridge /usr/local/bin/smarthome-bridge
# The dashboard (http.web_root) and the demo config as a default; the compose stack mounts the
# repository's config/ over /config.
COPY web /app/web
COPY config/bridge.yaml /config/bridge.yaml

# Every setting can still be overridden with SMARTHOME_* variables (docker-compose.yml does).
ENV SMARTHOME_CONFIG=/config/bridge.yaml \
    SMARTHOME_HTTP_BIND=0.0.0.0 \
    SMARTHOME_HTTP_PORT=8080 \
    SMARTHOME_HTTP_WEB_ROOT=/app/web \
    SMARTHOME_STORAGE_PATH=/data/bridge.sqlite

WORKDIR /app
USER 10001:10001
EXPOSE 8080
VOLUME ["/config", "/data"]

# 200 while the bridge is connected to its broker, 503 while it is not.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null http://127.0.0.1:${SMARTHOME_HTTP_PORT}/healthz || exit 1"]

ENTRYPOINT ["smarthome-bridge"]
CMD ["run"]
