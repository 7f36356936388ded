# SmartHomeBridge: `make run` runs the bridge on the demo config with its embedded broker,
# `make test` runs every test. Both install what they need from Debian first.

export PATH := /opt/swift/usr/bin:$(PATH)
SWIFT ?= swift
# Build tools and the C libraries the package links, the broker the tests and the embedded
# default start, and the clients README's examples use.
APT_PACKAGES := make pkg-config libmosquitto-dev libmicrohttpd-dev libsqlite3-dev libsodium-dev libyaml-dev \
	mosquitto mosquitto-clients curl
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CONFIG ?= config/bridge.yaml

.PHONY: deps build release run run-rest test check-config clean

## deps: install the Debian packages that are missing (apt-get update only when needed)
deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

## run: the bridge on the demo config; no mqtt.url there, so it starts its own mosquitto
run: build
	.build/debug/smarthome-bridge --config $(CONFIG)

## run-rest: an upstream serving the seed routes on 8081 and a second bridge polling it on 8080
run-rest: build
	scripts/run-rest.sh

## test: unit tests and integration tests against real mosquitto brokers the tests start
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel

check-config: build
	.build/debug/smarthome-bridge check-config --config $(CONFIG)

clean:
	rm -rf .build
