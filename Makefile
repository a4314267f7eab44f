# ledgerlens: `make demo` audits a local sandbox cluster end to end; `make test` runs every test.
# Both set up everything they need first (Python venv from PyPI, Java/Maven from Debian if absent,
# ZooKeeper jars from Maven Central, fetched on first use into ~/.cache/ledgerlens).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_DIR ?= demo-out
PYTEST_ARGS ?=

.PHONY: setup system-deps demo test lint typecheck proto bench clean sandbox-down

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

demo: setup
	@rm -rf $(DEMO_DIR)/audit
	$(PY) -m ledgerlens.sandbox.local up --workdir $(DEMO_DIR)/sandbox
	$(PY) -m ledgerlens.sandbox.local seed --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox/seed.json
	$(VENV)/bin/ledgerlens report --sandbox $(DEMO_DIR)/sandbox --out $(DEMO_DIR)/audit \
	  || { $(PY) -m ledgerlens.sandbox.local down --workdir $(DEMO_DIR)/sandbox; exit 1; }
	$(PY) -m ledgerlens.sandbox.local down --workdir $(DEMO_DIR)/sandbox
	@echo
	@echo "Report:   $(DEMO_DIR)/audit/report.html   (open it in a browser; it works offline)"
	@echo "Notebook: $(DEMO_DIR)/audit/audit_ledgers.ipynb   (interactive: $(VENV)/bin/jupyter lab notebooks/audit_ledgers.ipynb)"
	@echo "Findings: $(DEMO_DIR)/audit/findings.parquet, summary: $(DEMO_DIR)/audit/summary.json"

lint: setup
	$(VENV)/bin/ruff check lib widgets tests bench proto
	$(VENV)/bin/ruff format --check lib widgets tests bench proto

typecheck: setup
	$(VENV)/bin/mypy

test: setup lint typecheck
	$(VENV)/bin/pytest $(PYTEST_ARGS)

proto: setup
	$(PY) proto/generate.py

bench: setup
	$(PY) bench/bench_zk_collect.py
	$(PY) bench/bench_audit.py

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .mypy_cache .ruff_cache spark-warehouse
