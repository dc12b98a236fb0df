"""The short, time-boxed pass of the coverage-guided fuzzers (issue 21, item 5) in every `make test`.

Each target in fuzz/ (atheris, libFuzzer underneath) runs as a subprocess for FUZZ_SECONDS from
its committed seed corpus, writing what it finds to a scratch directory: request decoding and
dispatch on an in-memory node (fuzz/requests.py) and the record-batch parsers and decompressors
(fuzz/record_batches.py). A finding (an unexpected exception, a broken invariant, an input over
the per-input timeout or the memory limit) makes libFuzzer exit non-zero and write a crash file;
the test then fails with the fuzzer's traceback and the replay command. The long runs (a million
inputs and more per target) are `make fuzz`; see bench/README.md, "Fuzzing".
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ_SECONDS = int(os.environ.get("KRAFTD_FUZZ_SECONDS", "10"))
TARGETS = ["requests", "record_batches"]


@pytest.mark.timeout(FUZZ_SECONDS + 120)
@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_short_pass(target, tmp_path):
    work = tmp_path / "corpus"
    work.mkdir()
    cmd = [sys.executable, "-m", f"fuzz.{target}", f"-max_total_time={FUZZ_SECONDS}", "-timeout=10",
           "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/", str(work),
           str(ROOT / "fuzz" / "corpus" / target)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=FUZZ_SECONDS + 100)
    out = proc.stderr + proc.stdout
    crashes = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    stats = dict(re.findall(r"^stat::(\w+):\s+(\d+)", out, re.M))
    cov = re.findall(r"cov: (\d+) ft: (\d+)", out)
    print(f"\nfuzz/{target}.py: {stats.get('number_of_executed_units')} inputs in {FUZZ_SECONDS} s "
          f"({stats.get('average_exec_per_sec')}/s), cov {cov[-1] if cov else '?'}, peak rss "
          f"{stats.get('peak_rss_mb')} MB")
    assert proc.returncode == 0 and not crashes, (
        f"fuzz/{target}.py found something (exit {proc.returncode}, {crashes}); replay with "
        f"`.venv/bin/python -m fuzz.{target} <crash file>`:\n" + _tail(out))
    # It really ran: the seeds loaded and inputs went through.
    assert "INITED" in out, _tail(out)
    assert int(stats.get("number_of_executed_units", 0)) >= 1000, _tail(out)


def test_seed_corpus_is_what_make_corpus_writes(tmp_path, monkeypatch):
    """fuzz/corpus is generated (fuzz/make_corpus.py); a schema or example change regenerates it.
    Request seeds must match byte for byte; record-batch seeds by name only, since compressed
    bytes depend on the zlib/cramjam build."""
    sys.path.insert(0, str(ROOT))
    try:
        from fuzz import make_corpus
    finally:
        sys.path.remove(str(ROOT))
    monkeypatch.setattr(make_corpus, "CORPUS", str(tmp_path))
    make_corpus.main()
    for target in TARGETS:
        exact = target == "requests"
        fresh = {p.name: p.read_bytes() if exact else b"" for p in (tmp_path / target).iterdir()}
        committed = {p.name: p.read_bytes() if exact else b"" for p in (ROOT / "fuzz" / "corpus" / target).iterdir()}
        assert fresh == committed, (
            f"fuzz/corpus/{target} is stale: run `.venv/bin/python -m fuzz.make_corpus` "
            f"(missing {sorted(fresh.keys() - committed.keys())[:5]}, extra {sorted(committed.keys() - fresh.keys())[:5]}, "
            f"changed {sorted(k for k in fresh.keys() & committed.keys() if fresh[k] != committed[k])[:5]})")


def _tail(out: str, lines: int = 60) -> str:
    return "\n".join(line for line in out.splitlines()[-lines:])
