# kraftd — the two set-up commands: `make serve` and `make test` (both create .venv and install).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install install-dev serve test soak sim bench fuzz tools clean

$(VENV)/.venv-created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	touch $@

# Runtime only (what `make serve` needs). The install compiles protocol/_record_walk.pyx (the
# produce path's record walk in C), so a change to it reinstalls.
$(VENV)/.installed: $(VENV)/.venv-created pyproject.toml setup.py protocol/_record_walk.pyx
	$(PY) -m pip install -q -e .
	touch $@

# Plus the test/bench tools: pytest, hypothesis, kio, the real Kafka clients, Tansu, atheris (the
# fuzzers), and the Spark pipeline's extra (pyspark; its tests need Java 17 and skip, saying so,
# without it).
$(VENV)/.installed-dev: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[dev,bench,fuzz,spark]'
	touch $@

# The codecs' bytecode, compiled now rather than on a server's event loop at first use
# (protocol/code_cache.py reads it, protocol/build_code_cache.py writes it; a wheel's install
# builds its own). Entries are keyed by their source, so a stale cache only misses; this
# rebuilds it when a schema or the generator changes.
CODEC_SOURCES := $(wildcard schemas/*.json) $(wildcard protocol/codegen_*.py) protocol/generator.py \
  protocol/schema_model.py protocol/build_code_cache.py
protocol/_codecs.cache: $(VENV)/.installed $(CODEC_SOURCES)
	$(PY) -m kraftd.protocol.build_code_cache $@ >/dev/null

install: $(VENV)/.installed protocol/_codecs.cache
install-dev: $(VENV)/.installed-dev protocol/_codecs.cache

# kcat (librdkafka 2.0) is one of the real clients the suite drives; it comes from Debian.
tools:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq kcat) >/dev/null; \
	  else echo "kcat is missing: sudo apt-get install kcat" >&2; exit 1; fi; }

serve: install
	$(VENV)/bin/kraftd serve $(ARGS)

# pytest exits 5 when it collects nothing; make treats that as a failure, which is what we want.
# make test runs the suite in two parts, each on PARALLEL_WORKERS pytest-xdist workers. First the
# tests that start at most one server process (the sans-IO core, codecs, storage, in-process
# servers, the simulation's seeds, the robustness, snapshot, packaging and CLI tests); then the
# tests that start clusters, client libraries or Spark. In the second part the cluster tests
# (tests/cluster) form one xdist group, so one worker runs them one at a time while the other
# runs the client, group and Spark tests: on two cores, three servers per cluster test are
# CPU-bound, and two such tests at once starve their elections (tests/conftest.py).
# PYTEST_ARGS (e.g. one test file) or TEST_WORKERS=N (N workers for everything; tests sharing a
# module/session fixture stay on one worker, the `long` ones start first: tests/conftest.py)
# make it one pytest run instead.
PARALLEL_TESTS := tests/quorum tests/protocol tests/storage tests/schemas tests/config tests/server tests/sim \
  tests/robustness tests/snapshots $(wildcard tests/test_*.py)
PARALLEL_WORKERS ?= 2
TEST_WORKERS ?= 0
XDIST := $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
test: install-dev tools
ifeq ($(strip $(PYTEST_ARGS))$(filter-out 0,$(TEST_WORKERS)),)
	$(PY) -m pytest -n $(PARALLEL_WORKERS) --dist loadgroup $(PARALLEL_TESTS)
	$(PY) -m pytest -n $(PARALLEL_WORKERS) --dist loadgroup $(addprefix --ignore=,$(PARALLEL_TESTS))
else
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)
endif

soak: install-dev tools
	$(PY) -m pytest -m soak $(PYTEST_ARGS)

# The deterministic Raft simulation over many seeds (make test runs 300 of them).
SEEDS ?= 10000
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
sim: install-dev
	$(PY) -m tests.sim.run --seeds $(SEEDS) --jobs $(JOBS)

bench: install-dev tools
	$(PY) -m bench.run $(ARGS)

# Coverage-guided fuzzing with atheris (libFuzzer): fuzz/requests.py (request decoding and dispatch
# on an in-memory node) and fuzz/record_batches.py (the record-batch parsers and decompressors).
# Each target runs FUZZ_RUNS inputs (-1: no cap) or FUZZ_SECONDS seconds (0: no limit), whichever
# comes first, from the committed seeds in fuzz/corpus/<target> plus what earlier runs found
# (build/fuzz/<target>, where new inputs go). A finding stops the run: build/fuzz/crash-<sha1>,
# replayed by `$(PY) -m fuzz.<target> build/fuzz/crash-<sha1>`. See bench/README.md, "Fuzzing".
FUZZ_RUNS ?= 1000000
FUZZ_SECONDS ?= 0
FUZZ_TARGETS ?= requests record_batches
FUZZ_ARGS ?=
fuzz: install-dev
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/$$t || exit 1; \
	  echo "== fuzz/$$t.py: $(FUZZ_RUNS) runs, $(FUZZ_SECONDS) s"; \
	  $(PY) -m fuzz.$$t -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/ $(FUZZ_ARGS) build/fuzz/$$t fuzz/corpus/$$t || exit 1; \
	done

clean:
	rm -rf $(VENV) build *.egg-info
