# openmsmq — every target creates .venv and installs what it needs by itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ROUNDS ?= 30
CHAOS_SECONDS ?= 300
SEEDS  ?= 1000
export PYTHONHASHSEED := 0

.PHONY: all demo test lint typecheck unit browser deploy-tools postgresql dist bench-cli docs-cli crash chaos chaos-ha demo-ha sim fuzz bench bench-transfer bench-spark bench-pipeline wheel spark-cluster proto clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[dev,spark,postgresql]'
	touch $(STAMP)

## make demo: run the main job on the embedded default (SQLite store, local Spark)
demo: $(STAMP)
	$(BIN)/python examples/pipeline.py

## make demo-ha: a failover: QM B as two serve processes on one PostgreSQL, its active killed while A sends
demo-ha: $(STAMP) postgresql
	$(BIN)/python examples/failover.py

## make test: lint, type checks, then the whole test suite (what CI runs)
test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples fuzz
	$(BIN)/ruff format --check src tests bench examples fuzz

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) browser deploy-tools postgresql
	$(BIN)/pytest -q

## make deploy-tools: Debian's systemd (systemd-analyze checks deploy/openmsmq.service), as root when missing;
## hadolint (deploy/Dockerfile) comes with the dev extra
deploy-tools:
	@if ! command -v systemd-analyze >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd; \
		else echo "systemd-analyze is missing: install Debian's systemd (tests/deploy needs it)"; fi; \
	fi

## make docs-cli: regenerate the command reference of docs/cli.md from the commands' --help
## (tests/cli/test_reference.py fails while it is stale)
docs-cli: $(STAMP)
	$(BIN)/python -m openmsmq.cli.reference --write docs/cli.md

## make dist: the wheel dist/openmsmq-<version>-py3-none-any.whl (pip install it; tests/packaging installs it
## into a fresh virtualenv)
dist: wheel

## make postgresql: Debian's PostgreSQL server binaries for the tests (as root, when missing); the tests run
## their own server from them (tests/pgserver.py), never the system's cluster
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && [ -z "$$OPENMSMQ_PG_BIN" ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; \
		else echo "PostgreSQL is missing: install Debian's postgresql (the tests start their own server)"; exit 1; fi; \
	fi

## make browser: Debian's chromium and chromium-driver for the console's browser tests (as root, when missing)
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	fi

## make crash ROUNDS=N: the SIGKILL crash tests (store; removals and their acknowledgments) with N rounds
crash: $(STAMP)
	OPENMSMQ_CRASH_ROUNDS=$(ROUNDS) $(BIN)/pytest -q tests/store/test_crash.py tests/acks/test_removal_crash.py

## make fuzz [FUZZ_SECONDS=S RUNS=N]: mutated MS-MQQB streams through a real listener (S s), then
## coverage-guided fuzzing of the wire decoder with atheris (N runs)
fuzz: $(STAMP)
	$(BIN)/python fuzz/listener_fuzz.py --seconds $${FUZZ_SECONDS:-120}
	$(BIN)/pip install --quiet -e '.[fuzz]'
	$(BIN)/python fuzz/wire_fuzz.py -atheris_runs=$${RUNS:-200000}

## make bench: the codec, store and remote-read benchmarks (each prints its own command)
bench: $(STAMP)
	$(BIN)/python bench/wire.py
	$(BIN)/python bench/store.py
	$(BIN)/python bench/remote.py

## make bench-transfer: QM A -> QM B over MS-MQQB beside RabbitMQ and Redis (installs them if missing)
bench-transfer: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/transfer.py

## make bench-spark: the openmsmq source into Parquet beside Spark's rate source
bench-spark: $(STAMP)
	$(BIN)/python bench/spark.py

## make bench-pipeline: QM A -> MS-MQQB -> QM B -> Structured Streaming -> Parquet under sustained load
bench-pipeline: $(STAMP)
	$(BIN)/python bench/pipeline.py

## make wheel: dist/openmsmq-<version>-py3-none-any.whl (what a Spark job ships to executors, docs/spark.md)
wheel: $(STAMP)
	rm -rf build
	$(BIN)/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .

## make spark-cluster: the long standalone-cluster test (executors and drivers SIGKILLed while messages arrive)
spark-cluster: $(STAMP)
	OPENMSMQ_SPARK_CLUSTER_LONG=1 $(BIN)/pytest -q -s -m spark tests/spark/test_cluster_chaos.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist src/*.egg-info

## make chaos ROUNDS=N CHAOS_SECONDS=S: two real QMs SIGKILLed N times during a 10,000-message transfer, then S seconds through the fault proxy
chaos: $(STAMP)
	OPENMSMQ_CHAOS_ROUNDS=$(ROUNDS) $(BIN)/pytest -q tests/integration/test_transfer_chaos.py
	OPENMSMQ_PROXY_CHAOS_SECONDS=$(CHAOS_SECONDS) $(BIN)/pytest -q -s tests/chaos/test_proxy_chaos.py

## make chaos-ha ROUNDS=N: QM A sends 50,000 transactional messages to QM B, whose two serve processes share one
## PostgreSQL; B's active is SIGKILLed N times; prints each takeover's time (5 rounds of 2,000 run in make test)
chaos-ha: $(STAMP) postgresql
	OPENMSMQ_CHAOS_HA_ROUNDS=$(ROUNDS) OPENMSMQ_CHAOS_HA_MESSAGES=$${MESSAGES:-50000} \
		$(BIN)/pytest -q -s tests/integration/test_ha_failover.py -k chaos

## make proto: regenerate the gRPC modules of the remote-read service from its .proto
proto: $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I src --python_out=src --pyi_out=src --grpc_python_out=src \
		src/openmsmq/remote/openmsmq_remote.proto

## make sim SEEDS=N: the deterministic simulator over seeds 0..N-1, with a summary
sim: $(STAMP)
	$(BIN)/python -m tests.sim --seeds $(SEEDS)
