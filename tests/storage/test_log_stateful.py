"""Hypothesis state machine: FileLog against a list-of-batches model (appends, reads,
truncations, log-start moves, flushes, clean reopen and crash-reopen)."""
import os
import shutil
import tempfile

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kraftd.protocol.records import iter_batch_headers
from kraftd.storage import FileLog
from kraftd.storage.background_writes import background_writes
from storage_helpers import batch


class FileLogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        # Durability is not under test here (the OS never crashes in this model) and fsync is
        # slow on CI disks: make it free so the machine explores more states.
        self._real_fsync, os.fsync = os.fsync, lambda fd: None
        self.dir = tempfile.mkdtemp(prefix="kraftd-stateful-")
        self.log = self._open()
        self.model: list[tuple[int, int, int]] = []  # (base, count, epoch)
        self.start = 0
        self.epoch = 1

    def _open(self):
        return FileLog(self.dir, segment_bytes=600, index_interval_bytes=150)

    @property
    def leo(self):
        return self.model[-1][0] + self.model[-1][1] if self.model else self.start

    def teardown(self):
        self.log.close()
        os.fsync = self._real_fsync
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(n=st.integers(1, 4), value_len=st.integers(0, 120), bump=st.booleans())
    def append(self, n, value_len, bump):
        if bump:
            self.epoch += 1
        r = self.log.append_as_leader(batch(n, value=b"v" * value_len), self.epoch, now_ms=0)
        assert r.first_offset == self.leo
        self.model.append((r.first_offset, n, self.epoch))

    @rule(data=st.data(), max_bytes=st.integers(0, 2000))
    def read(self, data, max_bytes):
        offset = data.draw(st.integers(self.start, self.leo))
        r = self.log.read(offset, max_bytes)
        got = [(h.base_offset, h.records_count, h.partition_leader_epoch)
               for _, h in iter_batch_headers(r.to_bytes())]
        want = [b for b in self.model if b[0] + b[1] > offset]
        assert got == want[:len(got)]
        assert r.size <= max_bytes or len(got) == 1
        if want and not got:
            assert False, "min_one_batch must return something"

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def truncate(self, data):
        offset = data.draw(st.integers(self.start + 1, self.leo))
        self.log.truncate_to(offset)
        self.model = [b for b in self.model if b[0] + b[1] <= offset]
        assert self.log.log_end_offset == self.leo

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def advance_start(self, data):
        self.start = max(self.start, data.draw(st.integers(self.start, self.leo)))
        self.log.advance_log_start(self.start)
        self.model = [b for b in self.model if b[0] + b[1] > self.start]

    @rule()
    def flush(self):
        assert self.log.flush() == self.leo

    @rule()
    def reopen_clean(self):
        self.log.close()
        self.log = self._open()

    @rule()
    def crash_and_reopen(self):
        # The OS survives: unflushed page-cache data is still there, so nothing is lost; the
        # background writes (a log start) ran before the crash (test_file_log.py has the crash
        # that comes first).
        background_writes().barrier()
        self.log = self._open()

    @invariant()
    def offsets_agree(self):
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.leo
        cache = self.log.epoch_cache
        for base, _, epoch in self.model:
            assert cache.epoch_for_offset(max(base, self.start)) == epoch


FileLogMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestFileLogStateful = FileLogMachine.TestCase


@pytest.mark.soak
def test_file_log_matches_the_model_long_run():
    """`make soak`: many more crash/reopen/truncate sequences than the default run."""
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(FileLogMachine, settings=settings(
        max_examples=1000, stateful_step_count=60, deadline=None))
