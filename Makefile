# kraftd — the two set-up commands: `make serve` and `make test` (both create .venv and install).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install install-dev serve test soak sim bench tools clean

$(VENV)/.venv-created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

# Runtime only (what `make serve` needs).
$(VENV)/.installed: $(VENV)/.venv-created pyproject.toml
	$(PY) -m pip install -q -e .
	touch $@

# Plus the test/bench tools: pytest, hypothesis, kio, the real Kafka clients, Tansu, and the
# Spark pipeline's extra (pyspark; its tests need Java 17 and skip, saying so, without it).
$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[dev,bench,spark]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# kcat (librdkafka 2.0) is one of the real clients the suite drives; it comes from Debian.
tools:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null; \
	  else echo "kcat is missing: sudo apt-get install kcat" >&2; exit 1; fi; }

serve: install
	$(VENV)/bin/kraftd serve $(ARGS)

# pytest exits 5 when it collects nothing; make treats that as a failure, which is what we want.
test: install-dev tools
	$(PY) -m pytest $(PYTEST_ARGS)

soak: install-dev tools
	$(PY) -m pytest -m soak $(PYTEST_ARGS)

# The deterministic Raft simulation over many seeds (make test runs 500 of them).
SEEDS ?= 10000
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
sim: install-dev
	$(PY) -m tests.sim.run --seeds $(SEEDS) --jobs $(JOBS)

bench: install-dev tools
	$(PY) -m bench.run $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
