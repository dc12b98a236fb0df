# kraftd — the two set-up commands: `make serve` and `make test` (both create .venv and install).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install serve test soak bench tools clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bench]'
	touch $@

install: $(VENV)/.installed

# kcat (librdkafka 2.0) is one of the real clients the suite drives; it comes from Debian.
tools:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null; \
	  else echo "kcat is missing: sudo apt-get install kcat" >&2; exit 1; fi; }

serve: install
	$(VENV)/bin/kraftd serve $(ARGS)

# pytest exits 5 when it collects nothing; make treats that as a failure, which is what we want.
test: install tools
	$(PY) -m pytest $(PYTEST_ARGS)

soak: install tools
	$(PY) -m pytest -m soak $(PYTEST_ARGS)

bench: install tools
	$(PY) -m bench.run $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
