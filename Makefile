# ledgerlens: `make demo` audits a local sandbox cluster end to end; `make test` runs every test.
# Both set up everything they need first (Python venv from PyPI, Java/Maven from Debian if absent,
# ZooKeeper jars from Maven Central, fetched on first use into ~/.cache/ledgerlens).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LL := $(VENV)/bin/ledgerlens
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_DIR ?= demo-out
PYTEST_ARGS ?=

.PHONY: setup system-deps demo demo-local test test-all lint typecheck proto bench clean sandbox-down

setup: system-deps $(STAMP)

system-deps:
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
	  echo "installing Java 17 and Maven from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null; }

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==26.3
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# A real Pulsar 4.0.8 standalone (ZooKeeper metadata, offload to a local S3 server), seeded with
# real traffic and real failure paths, audited by the runbook headless; the report is the product.
demo: setup
	@rm -rf $(DEMO_DIR)/audit
	$(LL) sandbox up --workdir $(DEMO_DIR)/sandbox
	$(LL) sandbox seed --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox-seed.json \
	  && $(LL) sandbox plant --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox-plant.json \
	  && $(LL) report --sandbox $(DEMO_DIR)/sandbox --out $(DEMO_DIR)/audit \
	       --min-orphan-age 30s --retention-grace 30s \
	  || { $(LL) sandbox down --workdir $(DEMO_DIR)/sandbox; exit 1; }
	$(LL) sandbox down --workdir $(DEMO_DIR)/sandbox > /dev/null
	@echo
	@echo "Report:       $(DEMO_DIR)/audit/report.html   (self-contained; open it in a browser, offline)"
	@echo "Notebook:     $(DEMO_DIR)/audit/audit_ledgers.ipynb"
	@echo "Findings:     $(DEMO_DIR)/audit/findings.parquet, summary: $(DEMO_DIR)/audit/summary.json"
	@echo "Ground truth: $(DEMO_DIR)/sandbox/ground_truth.json (what the sandbox planted)"
	@echo "Interactive:  $(LL) sandbox up --workdir $(DEMO_DIR)/sandbox && $(VENV)/bin/jupyter lab notebooks/audit_ledgers.ipynb"

# The same runbook against a generated cluster (real wire formats) on a local ZooKeeper and S3 server.
demo-local: setup
	@rm -rf $(DEMO_DIR)/audit-local
	$(LL) sandbox-local up --workdir $(DEMO_DIR)/local
	$(LL) sandbox-local seed --workdir $(DEMO_DIR)/local > /dev/null \
	  && $(LL) report --sandbox $(DEMO_DIR)/local --out $(DEMO_DIR)/audit-local \
	       --as-of "$$($(PY) -c 'import json,sys; print(json.load(open(sys.argv[1]))["now_ms"])' $(DEMO_DIR)/local/ground_truth.json)" \
	  || { $(LL) sandbox-local down --workdir $(DEMO_DIR)/local; exit 1; }
	$(LL) sandbox-local down --workdir $(DEMO_DIR)/local > /dev/null
	@echo "Report: $(DEMO_DIR)/audit-local/report.html"

lint: setup
	$(VENV)/bin/ruff check lib widgets tests bench proto
	$(VENV)/bin/ruff format --check lib widgets tests bench proto

typecheck: setup
	$(VENV)/bin/mypy

test: setup lint typecheck
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Every test, the ones marked slow too.
test-all: setup lint typecheck
	$(VENV)/bin/pytest -m '' $(PYTEST_ARGS)

proto: setup
	$(PY) proto/generate.py

bench: setup
	$(PY) bench/bench_zk_collect.py
	$(PY) bench/bench_audit.py
	$(PY) bench/bench_kafka.py
	flock /tmp/ll-pulsar.lock $(PY) bench/bench_deletion.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .mypy_cache .ruff_cache spark-warehouse
