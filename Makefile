# ledgerlens: `make demo` audits a local sandbox cluster end to end; `make test` runs every test.
# Both set up everything they need first (Python venv from PyPI, Java/Maven from Debian if absent,
# ZooKeeper jars from Maven Central, fetched on first use into ~/.cache/ledgerlens).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LL := $(VENV)/bin/ledgerlens
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml setup.py lib/ledgerlens/formats/_ledgerwire.c proto/*.proto proto/generate.py | cksum | cut -d' ' -f1)
DEMO_DIR ?= demo-out
PYTEST_ARGS ?=

.PHONY: setup system-deps demo demo-local lab test test-all lint typecheck proto bench bench-extra clean sandbox-down

setup: system-deps $(STAMP)

system-deps:
	@# a C compiler builds the compiled ledger metadata decoder (lib/ledgerlens/formats/_ledgerwire.c)
	@command -v cc >/dev/null 2>&1 || { \
	  echo "installing a C compiler from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc >/dev/null; }
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
	  echo "installing Java 17 and Maven from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null; }
	@# systemd-analyze verifies the systemd unit and timer of docs/scheduling/ (no service is started)
	@command -v systemd-analyze >/dev/null 2>&1 || { \
	  echo "installing systemd from Debian (systemd-analyze: the scheduling examples' tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null; }
	@# Debian's chromium drives the browser tests (Playwright's Python package, never 'playwright install')
	@test -x /usr/bin/chromium || { \
	  echo "installing chromium from Debian (browser tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

$(STAMP): pyproject.toml setup.py lib/ledgerlens/formats/_ledgerwire.c $(wildcard proto/*.proto) proto/generate.py
	@echo "setting up $(VENV) (Python packages from PyPI, a few minutes the first time)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip==26.3
	@# the SPDX license string keeps setuptools quiet; its editable-install notice is noise too
	@PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install -q -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

# A real Pulsar 4.0.8 standalone (ZooKeeper metadata, offload to a local S3 server), seeded with
# real traffic and real failure paths, audited by the runbook headless; the report is the product.
# Quiet: progress while it works, then the report's path and one summary line (LEDGERLENS_VERBOSE=1:
# everything the libraries say).
demo: setup
	@rm -rf $(DEMO_DIR)/audit
	@mkdir -p $(DEMO_DIR)  # a fresh clone has none: the sandbox's answers are written into it
	@echo "starting a Pulsar sandbox in $(DEMO_DIR)/sandbox (about a minute), seeding and planting failures"
	@$(LL) sandbox up --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox-up.json
	@$(LL) sandbox seed --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox-seed.json \
	  && $(LL) sandbox plant --workdir $(DEMO_DIR)/sandbox > $(DEMO_DIR)/sandbox-plant.json \
	  && $(LL) report --sandbox $(DEMO_DIR)/sandbox --out $(DEMO_DIR)/audit > $(DEMO_DIR)/audit.log \
	  || { cat $(DEMO_DIR)/audit.log 2>/dev/null; $(LL) sandbox down --workdir $(DEMO_DIR)/sandbox > /dev/null; exit 1; }
	@$(LL) sandbox down --workdir $(DEMO_DIR)/sandbox > /dev/null
	@echo "Notebook:     $(DEMO_DIR)/audit/audit_ledgers.ipynb; findings: $(DEMO_DIR)/audit/findings.parquet"
	@echo "Ground truth: $(DEMO_DIR)/sandbox/ground_truth.json (what the sandbox planted)"
	@echo "Interactive:  $(LL) sandbox up --workdir $(DEMO_DIR)/sandbox && make lab SANDBOX=$(DEMO_DIR)/sandbox"
	@tail -n 1 $(DEMO_DIR)/audit.log

# The same runbook against a generated cluster (real wire formats) on a local ZooKeeper and S3 server;
# the sandbox fills the audit's inputs, its clock included (ledgerlens report --sandbox).
demo-local: setup
	@rm -rf $(DEMO_DIR)/audit-local
	@$(LL) sandbox-local up --workdir $(DEMO_DIR)/local > /dev/null
	@$(LL) sandbox-local seed --workdir $(DEMO_DIR)/local > /dev/null \
	  && $(LL) report --sandbox $(DEMO_DIR)/local --out $(DEMO_DIR)/audit-local \
	  || { $(LL) sandbox-local down --workdir $(DEMO_DIR)/local > /dev/null; exit 1; }
	@$(LL) sandbox-local down --workdir $(DEMO_DIR)/local > /dev/null

# JupyterLab on scratch copies of the runbooks ($(DEMO_DIR)/lab); SANDBOX=DIR fills their sandbox parameter.
lab: setup
	$(LL) lab --workdir $(DEMO_DIR)/lab $(if $(SANDBOX),--sandbox $(SANDBOX))

lint: setup
	$(VENV)/bin/ruff check lib widgets tests bench proto
	$(VENV)/bin/ruff format --check lib widgets tests bench proto
	@# the layers of the data flow and pure decoders (pyproject.toml, [tool.importlinter])
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(VENV)/bin/mypy

test: setup lint typecheck
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Every test, the ones marked slow too.
test-all: setup lint typecheck
	$(VENV)/bin/pytest -m '' $(PYTEST_ARGS)

proto: setup
	$(PY) proto/generate.py

# Every ratio of issue 13 against its target in one table (one run; logs in bench-logs/).
# BENCH_ARGS e.g. --audit-sizes 1000000:100000,10000000:1000000 --reuse
BENCH_ARGS ?=
bench: setup
	$(PY) bench/run_all.py $(BENCH_ARGS)

# The other benchmarks (Kafka, deletion on a real Pulsar).
bench-extra: setup
	$(PY) bench/bench_kafka.py
	flock /tmp/ll-pulsar.lock $(PY) bench/bench_deletion.py

clean:
	rm -rf $(DEMO_DIR) bench-logs .pytest_cache .mypy_cache .ruff_cache spark-warehouse
