"""MemoryLog: the PartitionLog contract in memory, for deterministic simulation tests.

Deliberately simple (lists and linear scans) so that it also serves as a reference model for
FileLog in the shared contract tests. Segments exist only so retention behaves like FileLog's.
`crash()` (alias `reopen()`) keeps only what `flush()` made durable, like Kafka's MockLog;
log-start changes and the epoch cache are durable immediately, as in FileLog.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..protocol.records import decode_records

from .errors import OffsetOutOfRangeError
from .leader_epoch_cache import LeaderEpochCache
from .voter_set_cache import VoterSetCache
from .log_base import PartitionLog, ReadResult
from .producer_state import ProducerStateTable

__all__ = ["MemoryLog", "MemoryRegion"]


class MemoryRegion:
    """Immutable bytes of whole batches (copied when the read is made)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def view(self) -> memoryview:
        return memoryview(self.data)


@dataclass(slots=True)
class _Segment:
    base_offset: int
    headers: list = field(default_factory=list)  # BatchHeader
    data: list = field(default_factory=list)  # bytes per batch
    size: int = 0
    created_ms: int = 0

    @property
    def max_timestamp(self) -> int:
        return max((h.max_timestamp for h in self.headers), default=-1)


class MemoryLog(PartitionLog):
    def __init__(self, *, segment_bytes: int = 1 << 20, log_start_offset: int = 0):
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._segments = [_Segment(log_start_offset)]
        self._log_start = log_start_offset
        self._leo = log_start_offset
        self._flushed = log_start_offset
        self.epoch_cache = LeaderEpochCache(None)
        self.voter_sets = VoterSetCache(None)
        self.producer_state = ProducerStateTable()
        self._retained = ProducerStateTable()  # below the log start (see PartitionLog)
        self._retained_offset = log_start_offset

    # -- append -----------------------------------------------------------------------------
    def _store(self, buf, placed, *, replicated: bool = False) -> None:
        items = [(h, bytes(buf[pos:pos + h.size])) for pos, h in placed]
        total = sum(h.size for h, _ in items)
        seg = self._segments[-1]
        last = items[-1][0].last_offset
        if seg.size and (seg.size + total > self.segment_bytes or last - seg.base_offset > 0xFFFFFFFF):
            seg = _Segment(self._leo)
            self._segments.append(seg)
        for h, data in items:
            seg.headers.append(h)
            seg.data.append(data)
            seg.size += h.size
        with self._lock:
            self._leo = last + 1

    # -- read -------------------------------------------------------------------------------
    def _batches(self):
        for seg in self._segments:
            for h, data in zip(seg.headers, seg.data):
                yield seg, h, data

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRangeError(f"offset {offset} outside [{self._log_start}, {self._leo}]")
        limit = self._leo if max_offset is None else min(max_offset, self._leo)
        if offset >= limit or (max_bytes <= 0 and not min_one_batch):
            return ReadResult([], 0, -1, offset)
        regions, chunk, chunk_seg = [], [], None
        total, first, next_off = 0, -1, offset
        for seg, h, data in self._batches():
            if h.last_offset < offset:
                continue
            if h.last_offset >= limit:
                break
            if total + h.size > max_bytes and not (total == 0 and min_one_batch):
                break
            if chunk and seg is not chunk_seg:
                regions.append(MemoryRegion(b"".join(chunk)))
                chunk = []
            chunk_seg = seg
            chunk.append(data)
            if first < 0:
                first = h.base_offset
            total += h.size
            next_off = h.next_offset
            if total >= max_bytes:
                break
        if chunk:
            regions.append(MemoryRegion(b"".join(chunk)))
        if not regions:
            return ReadResult([], 0, -1, offset)
        return ReadResult(regions, total, first, next_off)

    # -- durability --------------------------------------------------------------------------
    def flush(self) -> int:
        with self._lock:
            self._flushed = max(self._flushed, self._leo)
            return self._flushed

    def crash(self) -> None:
        """Lose everything at or above flushed_offset, as a power failure would."""
        self._truncate(self._flushed)

    reopen = crash

    def close(self) -> None:
        pass

    # -- truncation / log start / retention ------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        if offset >= self._leo:
            return
        if offset <= self._log_start:
            self.truncate_fully_and_start_at(offset)
            return
        self._truncate(offset)
        if self._leo <= self._log_start:  # the batch holding `offset` started below log start
            self.truncate_fully_and_start_at(self._log_start)

    def _truncate(self, offset: int) -> None:
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop()
        seg = self._segments[-1]
        keep = 0
        while keep < len(seg.headers) and seg.headers[keep].last_offset < offset:
            keep += 1
        del seg.headers[keep:], seg.data[keep:]
        seg.size = sum(h.size for h in seg.headers)
        new_leo = seg.headers[-1].next_offset if seg.headers else seg.base_offset
        with self._lock:
            self._leo = new_leo
            self._flushed = min(self._flushed, new_leo)
        self.epoch_cache.truncate_from_end(new_leo)
        self.voter_sets.truncate_from_end(new_leo)
        self.producer_state = self._producers_rebuilt(h for _, h, _ in self._batches()
                                                      if h.last_offset >= self._log_start)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._segments = [_Segment(offset)]
        with self._lock:
            self._log_start = self._leo = self._flushed = offset
        self.epoch_cache.clear()
        self.voter_sets.clear()
        self._producers_restarted_at(offset)

    def advance_log_start(self, offset: int) -> None:
        if offset <= self._log_start:
            return
        if offset > self._leo:
            raise OffsetOutOfRangeError(f"log start {offset} beyond log end {self._leo}")
        self._retain_producers(offset)
        self._log_start = offset
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._segments.pop(0)
        self.epoch_cache.truncate_from_start(offset)
        self.voter_sets.truncate_from_start(offset)

    def apply_retention(self, now_ms: int, retention_ms: int, retention_bytes: int, *,
                        max_offset: int | None = None) -> int:
        segs = self._segments
        upper = self._leo if max_offset is None else min(max_offset, self._leo)

        def end(i):
            return segs[i + 1].base_offset if i + 1 < len(segs) else self._leo

        n_time = 0
        if retention_ms >= 0:
            while (n_time < len(segs) and segs[n_time].size and end(n_time) <= upper
                   and now_ms - segs[n_time].max_timestamp > retention_ms):
                n_time += 1
        n_bytes = 0
        if retention_bytes >= 0:
            excess = sum(s.size for s in segs) - retention_bytes
            while (n_bytes < len(segs) and segs[n_bytes].size and end(n_bytes) <= upper
                   and excess - segs[n_bytes].size >= 0):
                excess -= segs[n_bytes].size
                n_bytes += 1
        n = max(n_time, n_bytes)
        if n == 0:
            return 0
        if n == len(segs):
            segs.append(_Segment(self._leo))
        new_start = max(self._log_start, segs[n].base_offset)
        self._retain_producers(new_start)
        del segs[:n]
        self._log_start = new_start
        self.epoch_cache.truncate_from_start(self._log_start)
        self.voter_sets.truncate_from_start(self._log_start)
        return n

    # -- timestamps -----------------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        for _, h, data in self._batches():
            if h.last_offset >= self._log_start and h.max_timestamp >= timestamp:
                return self._record_at(h, data, lambda ts: ts >= timestamp)
        return None

    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        best = None
        for _, h, data in self._batches():
            if h.max_timestamp >= 0 and (best is None or h.max_timestamp > best[0].max_timestamp):
                best = (h, data)
        if best is None:
            return None
        h, data = best
        return self._record_at(h, data, lambda ts: ts == h.max_timestamp)

    def _record_at(self, h, data, match) -> tuple[int, int, int]:
        if h.timestamp_type == 0:
            for r in decode_records(data, h):
                if r.offset >= self._log_start and match(r.timestamp):
                    return r.offset, r.timestamp, h.partition_leader_epoch
        return max(h.base_offset, self._log_start), h.max_timestamp, h.partition_leader_epoch
