# The commands a person and CI run.  `make demo` and `make test` each do all
# the set-up they need (virtualenv, install, broker) and are safe to repeat.
#
# One setting points everything at the broker: XWAIT_BOOTSTRAP (default
# 127.0.0.1:9092).  scripts/kafka starts its broker on that address's port,
# and every xwait command below connects to it, e.g.
#   XWAIT_BOOTSTRAP=127.0.0.1:9192 make topics worker

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian's chromium, which the console's browser tests drive (tests/console/test_browser.py).
CHROMIUM ?= /usr/bin/chromium

.PHONY: demo test lint docs docs-serve reference dist venv bytecode lock kafka kafka-stop cluster cluster-stop registry registry-stop registry-app topics worker bench compare scale flood clean browser browser-check

# The virtualenv holds exactly the versions of requirements-dev.lock (hashes
# checked), then xwait itself from the checkout.  uv installs them (its version
# from the same lock, through pip): in parallel, and from its cache in seconds
# (pip took 40 s in every fresh clone, about two minutes on a cold cache; uv
# 14 s cold, 9 s warm).  `make lock` writes the lock files again from
# pyproject.toml (after a change of dependencies).
#
# xwait itself is installed by maturin (the build backend, from the lock): it
# builds the native record path (native/, Rust through PyO3: streams/core/native.py)
# into streams/_native*.so, in release mode, and again whenever native/ changes
# (cargo's build folder is native/target, so a rebuild takes seconds).
NATIVE_SOURCES := native/Cargo.toml native/Cargo.lock $(wildcard native/src/*.rs native/src/*/*.rs)

$(STAMP): pyproject.toml requirements-dev.lock $(NATIVE_SOURCES)
	@command -v cargo >/dev/null || { echo "cargo not found: the native record path (native/) needs" \
		"a Rust toolchain (https://rustup.rs)"; exit 1; }
	@test -x $(BIN)/python || { echo "creating the virtualenv $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing xwait's locked dependencies into $(VENV) with uv"
	@awk '/^uv==/ {p = 1; print; next} p && /^ / {print; next} {p = 0}' requirements-dev.lock \
		> $(VENV)/uv-requirement.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r $(VENV)/uv-requirement.txt
	$(BIN)/uv pip install --python $(BIN)/python --require-hashes --compile-bytecode \
		-r requirements-dev.lock
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation \
		--reinstall-package xwait -e .
	@$(MAKE) --no-print-directory bytecode
	@touch $(STAMP)

# Bytecode for every module a process imports, made once: uv installs without it, and
# a Python told PYTHONDONTWRITEBYTECODE (CI machines, many images) never writes it, so
# every process compiled faust, aiohttp and the rest again: a worker's imports took 1.85 s
# of CPU instead of 0.93, in each of the suite's hundreds of processes and at every start.
# streams/ is compiled again before the tests (only what changed since).
bytecode:
	@$(BIN)/python -m compileall -q -j 0 streams

venv: $(STAMP)

lock: $(STAMP)
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 --generate-hashes \
		--quiet -o requirements.lock
	$(BIN)/uv pip compile pyproject.toml --extra dev -c requirements.lock \
		--python-version 3.11 --generate-hashes --quiet -o requirements-dev.lock

kafka: $(STAMP)
	scripts/kafka start

kafka-stop:
	scripts/kafka stop

# Three KRaft nodes on 127.0.0.1:29092-29094 (README "A three-node cluster").
cluster: $(STAMP)
	scripts/kafka start --nodes 3

cluster-stop:
	scripts/kafka stop --nodes 3

# A local Schema Registry (Apicurio, Confluent API); see README "A Schema Registry".
registry:
	scripts/registry start

registry-stop:
	scripts/registry stop

# The registry's once-per-user part (scripts/registry prepare): assembled from Maven
# Central into ~/.cache/xwait/registry-app (4-6 minutes on a cold Maven cache, its
# progress printed) and its classes recorded; one line when both are there.  `make test`
# runs it before the suite: the registry tests' fixture starts it and builds nothing.
registry-app:
	@scripts/registry prepare

topics: kafka
	$(BIN)/xwait topics create

# The main job: broker, topics, a worker, and a scripted scenario.
demo: topics
	$(BIN)/python scripts/demo.py

# mypy's cache lives in the user's cache, shared by every clone: it checks each module's
# hash, so a fresh clone reuses what another checked (17 s cold -> 1.5 s).
MYPY_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/xwait/mypy

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy --cache-dir $(MYPY_CACHE)

# The documentation site (mkdocs.yml): --strict fails on a broken link, a missing
# page or a page left out of the nav.  The theme's notice about its successor is
# silenced; nothing is fetched at build time.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(STAMP)
	$(MKDOCS) build --strict

docs-serve: $(STAMP)
	$(MKDOCS) serve --strict

# The reference pages (docs/reference/) are written from the code: the settings
# class, the CLI's parser, the schemas, the reason enums, the web routes and the
# metrics registries.  tests/test_reference.py fails while a checked-in page
# differs from what this writes.
reference: $(STAMP)
	$(BIN)/python scripts/reference.py

# What users install (RELEASING.md): the sdist and the wheel in dist/, built by
# PyPA's build in an isolated environment (uv installs maturin there; the wheel
# carries the native record path, built for this platform).  The
# wheel is then installed into a fresh virtualenv with the locked dependencies
# (requirements.lock) and run from outside the checkout: `xwait --version` must
# say this version, its native record path must load, and `xwait definitions`
# must list the shipped examples.  The
# image is built where a Docker engine answers.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
SMOKE := .xwait/dist-check
dist: $(STAMP)
	rm -rf dist build $(SMOKE)
	$(BIN)/python -m build --installer uv --outdir dist .
	$(BIN)/uv venv --quiet --python $(PYTHON) $(SMOKE)/venv
	$(BIN)/uv pip install --quiet --python $(SMOKE)/venv/bin/python --require-hashes \
		-r requirements.lock
	$(BIN)/uv pip install --quiet --python $(SMOKE)/venv/bin/python --no-deps \
		dist/xwait-$(VERSION)-*.whl
	cd $(SMOKE) && test "$$(venv/bin/xwait --version)" = "xwait $(VERSION)"
	cd $(SMOKE) && venv/bin/python -c "import streams._native"
	cd $(SMOKE) && XWAIT_CONSOLE_URL=http://127.0.0.1:9 venv/bin/xwait definitions \
		| grep -q '^expense-approval '
	@echo "dist: $$(ls dist | tr '\n' ' ')- the wheel installs and runs (xwait $(VERSION))"
	@if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then \
		docker build -t xwait:$(VERSION) .; \
	else echo "dist: no Docker engine answers here: the image xwait:$(VERSION) is not built"; fi

# The console's browser test drives Debian's chromium through Playwright; no
# browser is ever downloaded by Playwright itself (no `playwright install`).
# `make browser` installs it (as root, or through sudo).
browser:
	@test -x $(CHROMIUM) || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		echo "installing Debian's chromium (apt-get) for the console's browser tests"; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Before the suite: a missing chromium is installed only by root in a session
# without a terminal (CI, a container's build); anywhere else `make test` says
# what to install and the browser tests are skipped, each with that line.
browser-check:
	@if test -x $(CHROMIUM); then :; \
	elif [ "$$(id -u)" = 0 ] && ! [ -t 0 ]; then $(MAKE) --no-print-directory browser; \
	else echo "chromium is not installed: the console's browser tests will be skipped" \
		"(install it with \`make browser\` or \`sudo apt-get install chromium\`)"; fi

# Everything CI runs: lint, types, the documentation site, and the whole suite against a real broker
# (tests start one through scripts/kafka when none answers), on TEST_PROCS
# processes: each test module stays on one, the slowest start first
# (tests/conftest.py).  Most of a test's time is waiting for workers, brokers
# and timers; how long the suite takes, quiet and busy: docs/speed.md ("The tools").
TEST_PROCS ?= 5
test: lint docs browser-check registry-app bytecode
	$(BIN)/pytest -n $(TEST_PROCS)

worker: topics
	$(BIN)/xwait worker

# Every bench is a script run with the virtualenv's Python, from any folder:
# $(BIN)/python bench/<name>.py [options] (bench/README.md, "How the benches are built").
bench: topics
	$(BIN)/python bench/park_bench.py

# xwait beside the raw pipe and the bench kit's peers, on one broker (bench/README.md).
# The full run takes about an hour; a quick look:
#   make compare COMPARE_ARGS="--waits 2000 --seconds 30 --rate 200"
compare: kafka
	$(BIN)/python bench/compare.py $(COMPARE_ARGS)

# Issue 10's scale bench: figures against the number of parked waits
# (bench/README.md).  The default stops at 100k (about 10 minutes); the
# issue's run:
#   make scale SCALE_ARGS="--checkpoints 10000,100000,1000000,10000000 --publish docs/scale.png"
SCALE_ARGS ?= --checkpoints 10000,100000
scale: kafka
	$(BIN)/python bench/scale_bench.py $(SCALE_ARGS)

# The hostile-record flood of the open issue (bench/README.md): 5,000 parked
# waits, then 100,000 hostile records with valid replies among them; a few
# minutes.  A quick look:
#   make flood FLOOD_ARGS="--waits 500 --hostile 5000"
flood: kafka
	$(BIN)/python bench/flood_bench.py $(FLOOD_ARGS)

clean:
	-scripts/kafka stop
	-scripts/registry stop
	rm -rf .xwait $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
