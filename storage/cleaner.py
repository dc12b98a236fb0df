"""The log cleaner of a compacted topic (cleanup.policy=compact): Kafka's rules, off the loop.

One pass over one log, in three parts, like a follower's truncation (truncation.py):

- `FileLog.plan_cleaning(...)`, on the loop: the cleanable range (whole sealed segments, all of
  them below the high watermark and the flushed offset, none newer than min.compaction.lag.ms)
  and the state the pass needs (the last batches of every idempotent producer, the time).
- `CleaningPlan.run()`, on a worker thread, touching nothing the log uses: map every key of the
  dirty part (from the cleaner checkpoint to the end of the range) to its last offset, then
  copy each group of segments (consecutive, together at most segment.bytes) into one new file,
  `<base>.log.cleaned`, keeping a record only if no later record of its key is in the map, and
  a tombstone only until its delete horizon. The new file is fsynced.
- `FileLog.commit_cleaning(plan)`, on the loop, if the log still holds those segments: each
  `.cleaned` is renamed to `<base>.log.<end>.swap` (the directory fsynced: from here a crash
  finishes the swap), the old segments of its group are removed and the swap file renamed to
  `<base>.log`. On open, a `.cleaned` file is deleted and a `.swap` file finishes its swap.

What a pass keeps: offsets (a batch keeps its base offset and offset range, removed records
leave gaps; a batch with nothing left goes, except the remembered batches of idempotent
producers, kept as empty headers so that retries are still deduplicated after a restart),
leader epochs, timestamps, codecs. A tombstone (null value) stays until delete.retention.ms
after the pass that first found it left it as its key's latest (KIP-534's delete horizon, kept
in the batch). Records without a key are kept (a compacted topic refuses them at produce).
"""
from __future__ import annotations

import mmap
import os
import re
import time
from dataclasses import dataclass, field

from ..protocol.batch_rebuild import rebuild_batch
from ..protocol.records import iter_batch_headers, decode_records

from .segment import LogSegment, segment_path

__all__ = ["CleaningPlan", "CleanerStats", "SWAP_NAME", "finish_swaps", "swap_path"]

CLEANED_SUFFIX = ".cleaned"
SWAP_NAME = re.compile(r"^(\d{20})\.log\.(\d{20})\.swap$")
_WRITE_CHUNK = 1 << 20


def swap_path(directory: str, base_offset: int, end_offset: int) -> str:
    """The swap file of a cleaned group: it replaces the segments based in [base, end)."""
    return os.path.join(directory, f"{base_offset:020d}.log.{end_offset:020d}.swap")


def finish_swaps(directory: str) -> list[int]:
    """On open: delete `.cleaned` files (a pass that never committed) and finish every swap a
    commit began. Returns the base offsets of the swapped-in segments."""
    done = []
    names = os.listdir(directory)
    for name in names:
        if name.endswith(".log" + CLEANED_SUFFIX):
            os.unlink(os.path.join(directory, name))
    for name in sorted(names):
        match = SWAP_NAME.match(name)
        if not match:
            continue
        base, end = int(match.group(1)), int(match.group(2))
        for other in names:
            if other[:20].isdigit() and other.endswith((".log", ".index", ".timeindex")):
                other_base = int(other[:20])
                if base <= other_base < end and not (other_base == base and other.endswith(".log")):
                    _unlink(os.path.join(directory, other))
        os.replace(os.path.join(directory, name), segment_path(directory, base))
        done.append(base)
    return done


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@dataclass
class CleanerStats:
    """What one pass did (the cleaner's metrics and log line)."""
    bytes_read: int = 0
    bytes_written: int = 0
    batches_dropped: int = 0
    records_dropped: int = 0
    tombstones_dropped: int = 0
    keys: int = 0
    seconds: float = 0.0


@dataclass
class CleanedGroup:
    sources: list          # the LogSegments it replaces, in offset order
    end_offset: int        # the base offset of the segment after the group
    segment: LogSegment | None = None  # the cleaned copy, `<base>.log.cleaned` until the commit


@dataclass
class CleaningPlan:
    """One pass: FileLog.plan_cleaning makes it, run() does it, FileLog.commit_cleaning swaps it in."""
    directory: str
    segments: list             # LogSegments from the log's first to the end of the range
    sizes: list[int]           # their sizes when planned (sealed: they do not grow)
    first_dirty: int           # where the dirty part starts (the cleaner checkpoint)
    end_offset: int            # the range ends here (a segment boundary)
    segment_bytes: int
    index_interval_bytes: int
    use_mmap: bool
    now_ms: int                # wall clock: delete horizons
    delete_retention_ms: int
    producer_batches: frozenset  # last offsets of the batches idempotent producers remember
    generation: int
    max_keys: int = 1_000_000  # the offset map's capacity (Kafka's dedupe buffer)
    io_bytes_per_second: float | None = None  # Kafka's log.cleaner.io.max.bytes.per.second
    groups: list[CleanedGroup] = field(default_factory=list)
    stats: CleanerStats = field(default_factory=CleanerStats)
    ready: bool = False
    discarded: bool = False

    def __post_init__(self) -> None:
        # The thread reads through its own descriptors: the log may close a segment's (a
        # deletion) while the pass runs.
        self._fds = [os.dup(seg.fd) for seg in self.segments]
        self._started = 0.0
        self._throttled_bytes = 0

    # -- the worker thread's part ---------------------------------------------------------------
    def run(self) -> None:
        if self.discarded:
            return
        self._started = time.monotonic()
        try:
            offset_map = self._build_offset_map()
            self.stats.keys = len(offset_map)
            for group in self._groups():
                if self.discarded:
                    return
                self.groups.append(group)
                group.segment = self._clean_group(group, offset_map)
            self.ready = not self.discarded
        finally:
            self._close_fds()
            self.stats.seconds = time.monotonic() - self._started

    def _build_offset_map(self) -> dict:
        """key -> its last offset in the dirty part. Stops at a segment boundary when the map
        is full (the pass then ends there: the rest stays dirty for the next one)."""
        offset_map: dict = {}
        mapped = False
        for i, seg in enumerate(self.segments):
            if self._next_base(i) <= self.first_dirty:
                continue  # clean already
            if mapped and len(offset_map) >= self.max_keys:
                self._end_at(i)
                break
            mapped = True
            for _, h, batch in self._batches(i):
                if h.is_control or h.last_offset < self.first_dirty:
                    continue
                for r in decode_records(batch, h):
                    if r.key is not None and r.offset >= self.first_dirty:
                        offset_map[r.key] = r.offset
        return offset_map

    def _end_at(self, i: int) -> None:
        self.end_offset = self.segments[i].base_offset
        del self.segments[i:], self.sizes[i:]
        for fd in self._fds[i:]:
            os.close(fd)
        del self._fds[i:]

    def _next_base(self, i: int) -> int:
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self.end_offset

    def _groups(self):
        """Consecutive segments whose sizes add up to at most segment.bytes (and whose offsets
        fit the index's 32-bit deltas), one cleaned segment each."""
        i, n = 0, len(self.segments)
        while i < n:
            j, total = i + 1, self.sizes[i]
            while (j < n and total + self.sizes[j] <= self.segment_bytes
                   and self._next_base(j) - 1 - self.segments[i].base_offset <= 0xFFFFFFFF):
                total += self.sizes[j]
                j += 1
            yield CleanedGroup(self.segments[i:j], self._next_base(j - 1))
            i = j

    def _clean_group(self, group: CleanedGroup, offset_map: dict) -> LogSegment:
        base = group.sources[0].base_offset
        path = segment_path(self.directory, base) + CLEANED_SUFFIX
        _unlink(path)
        out = LogSegment(self.directory, base, create=True, index_interval_bytes=self.index_interval_bytes,
                         use_mmap=self.use_mmap, path=path)
        pending, placed = bytearray(), []
        for seg in group.sources:
            if self.discarded:  # (the server is stopping: commit_cleaning drops the copies)
                break
            i = self.segments.index(seg)
            for _, h, batch in self._batches(i):
                kept = self._kept(h, batch, offset_map)
                if kept is None:
                    continue
                for pos, header in iter_batch_headers(kept):
                    placed.append((len(pending) + pos, header))
                pending += kept
                if len(pending) >= _WRITE_CHUNK:
                    self._write(out, pending, placed)
                    pending, placed = bytearray(), []
        if pending:
            self._write(out, pending, placed)
        out.fsync()
        out._maybe_time_entry()
        out.sealed = True
        return out

    def _kept(self, h, batch, offset_map: dict):
        """The batch as the pass writes it: itself, a rebuilt copy, or None (dropped)."""
        if h.is_control:
            return batch
        records = decode_records(batch, h)
        kept, tombstones = [], False
        now = self.now_ms
        for r in records:
            if r.key is not None and offset_map.get(r.key, -1) > r.offset:
                continue  # a later record of its key is in the dirty part
            if r.value is None and r.key is not None:
                if h.has_delete_horizon and now >= h.base_timestamp:
                    self.stats.tombstones_dropped += 1
                    continue
                tombstones = True
            kept.append(r)
        self.stats.records_dropped += len(records) - len(kept)
        horizon = None
        if tombstones:
            horizon = h.base_timestamp if h.has_delete_horizon else now + self.delete_retention_ms
        if len(kept) == len(records) and (horizon is None) == (not h.has_delete_horizon):
            return batch
        if not kept and h.last_offset not in self.producer_batches:
            self.stats.batches_dropped += 1
            return None
        return rebuild_batch(h, kept, delete_horizon_ms=horizon)

    def _write(self, out: LogSegment, buf: bytearray, placed: list) -> None:
        out.append(buf, placed)
        out.next_offset = placed[-1][1].next_offset
        self.stats.bytes_written += len(buf)
        self._throttle(len(buf))

    def _batches(self, i: int):
        """(position, header, bytes) of every batch of segment i, read through the plan's fd."""
        size = self.sizes[i]
        if size == 0:
            return
        # (Unmapped when the last view of it goes: a slice may still be held by the caller.)
        view = memoryview(mmap.mmap(self._fds[i], size, prot=mmap.PROT_READ))
        for pos, h in iter_batch_headers(view):
            yield pos, h, view[pos:pos + h.size]
        self.stats.bytes_read += size
        self._throttle(size)

    def _throttle(self, nbytes: int) -> None:
        rate = self.io_bytes_per_second
        if not rate:
            return
        self._throttled_bytes += nbytes
        ahead = self._throttled_bytes / rate - (time.monotonic() - self._started)
        if ahead > 0:
            time.sleep(ahead)

    # -- either thread -------------------------------------------------------------------------
    def discard(self) -> None:
        """Never committed (the log changed, or it failed): remove the cleaned copies. Only once
        run() returned (or if it never ran)."""
        self.discarded = True
        self.ready = False
        self._close_fds()
        for group in self.groups:
            if group.segment is not None:
                group.segment.close()
                _unlink(group.segment.path)
                group.segment = None

    def _close_fds(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
