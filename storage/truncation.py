"""A follower's truncation into the middle of a segment, in two parts, so that the event loop
never copies, fsyncs or scans a segment for it.

`TruncationPlan.run()` runs on any thread and touches nothing the log uses: it copies the kept
prefix of the segment (bytes that never change) into `<segment>.log.trunc`, fsyncs it, scans
its batch headers (the segment's indexes), and rebuilds the idempotent producers' state from the
log start up to the truncation point (sealed segments and the copy: nothing another thread
writes). `FileLog.commit_truncation(plan)`, on the loop, then renames the copy over the segment
and updates the log in the order `truncate_to` does (the rename and the directory made durable,
the recovery point, the leader-epoch checkpoint), but only if the log did not change since the
plan was made; otherwise the copy is discarded and a later fetch finds the divergence again.
A crash before the commit leaves a `.trunc` file, which the next open removes."""
from __future__ import annotations

import bisect
import os

from .producer_state import ProducerStateTable, producers_rebuilt


def headers_between(segments, start: int, end: int | None = None):
    """Headers of the batches of `segments` (in offset order) whose last offset is in
    [start, end) (end None: to the last)."""
    i = max(0, bisect.bisect_right([s.base_offset for s in segments], start) - 1)
    for seg in segments[i:]:
        if end is not None and seg.base_offset >= end:
            return
        pos = seg.lookup(start)[0] if seg.base_offset < start else 0
        for _, h in seg.iter_headers(pos):
            if end is not None and h.last_offset >= end:
                return
            if h.last_offset >= start:
                yield h


class TruncationPlan:
    """FileLog.truncate_to(offset) cutting segment `index` at byte `position`."""

    def __init__(self, log, index: int, offset: int, position: int) -> None:
        self.offset = offset
        self.index = index
        self.position = position
        self.source = log._segments[index]
        self._tmp_path = self.source.path + ".trunc"
        self._earlier = list(log._segments[:index])
        self._use_mmap = log.use_mmap
        self._retained, self._retained_offset = log._retained.copy(), log._retained_offset
        # What the log must still be at the commit.
        self.generation = log._generation
        self.log_end = log._leo
        self.log_start = log._log_start
        self.segment = None            # the copy, made by run()
        self.producer_state: ProducerStateTable | None = None
        self.ready = False
        self._discarded = False

    def run(self) -> None:
        """The slow part (any thread): copy, fsync, scan, rebuild the producers' state."""
        if self._discarded:
            return
        seg = self.source.copy_prefix_aside(self.position, use_mmap=self._use_mmap)
        self.segment = seg
        self.producer_state = producers_rebuilt(self._retained, self._retained_offset,
                                                headers_between(self._earlier + [seg], self.log_start))
        self.ready = True

    def discard(self) -> None:
        """Never committed: remove the copy (the log is as it was). Only once run() returned."""
        self._discarded = True
        self.ready = False
        if self.segment is not None:
            self.segment.close()
            self.segment = None
        try:
            os.unlink(self._tmp_path)
        except FileNotFoundError:
            pass
