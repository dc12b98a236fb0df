"""The log cleaner of a compacted topic (cleanup.policy=compact): Kafka's rules, off the loop.

One pass over one log, in three parts, like a follower's truncation (truncation.py):

- `FileLog.plan_cleaning(...)`, on the loop: the cleanable range (whole sealed segments, all of
  them below the high watermark, none newer than min.compaction.lag.ms)
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

__all__ = ["CleaningPlan", "CleaningSpec", "CleanerStats", "SegmentRef", "SWAP_NAME", "clean_segments", "finish_swaps",
           "swap_path"]

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


# A test-only planted bug (BugSwitches.cleaner_drops_latest_value): the map's comparison is off by
# one, so a key's latest record goes with the older ones. Never set in production; the
# simulation sets it for a run, in its own process (the server's pass runs in a worker process).
planted_drops_latest = False


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


@dataclass(frozen=True)
class SegmentRef:
    """A sealed segment as the pass reads it: by path, checked to be the same file (device and
    inode) the log held when the pass was planned; `size` bytes of it (sealed: they never change)."""
    base_offset: int
    path: str
    size: int
    dev: int
    ino: int


@dataclass
class CleaningSpec:
    """Everything a pass needs, picklable: it may run in a worker process (`clean_segments`)."""
    directory: str
    segments: list[SegmentRef]   # from the log's first segment to the end of the range
    first_dirty: int             # where the dirty part starts (the cleaner checkpoint)
    end_offset: int              # the range ends here (a segment boundary)
    segment_bytes: int
    index_interval_bytes: int
    now_ms: int                  # wall clock: delete horizons
    delete_retention_ms: int
    producer_batches: frozenset  # last offsets of the batches idempotent producers remember
    max_keys: int = 1_000_000    # the offset map's capacity (Kafka's dedupe buffer)
    io_bytes_per_second: float | None = None  # Kafka's log.cleaner.io.max.bytes.per.second


@dataclass(frozen=True)
class CleanedFile:
    base_offset: int  # the first segment of the group (the cleaned segment keeps its name)
    end_offset: int   # the base offset of the segment after the group
    path: str         # `<base>.log.cleaned`, written and fsynced


@dataclass
class CleaningResult:
    files: list[CleanedFile]
    end_offset: int  # where the pass ended (earlier than planned if the offset map filled)
    stats: CleanerStats


def clean_segments(spec: CleaningSpec) -> CleaningResult:
    """The pass itself, in any process or thread: reads the segments (never writes them) and
    writes one `.cleaned` file per group."""
    return _Pass(spec).run()


class _Pass:
    def __init__(self, spec: CleaningSpec) -> None:
        self.spec = spec
        self.refs = list(spec.segments)
        self.end_offset = spec.end_offset
        self.stats = CleanerStats()
        self._started = time.monotonic()
        self._throttled_bytes = 0
        self._views: list = [None] * len(self.refs)

    def run(self) -> CleaningResult:
        try:
            for i in range(len(self.refs)):
                self._views[i] = self._open(self.refs[i])
            offset_map = self._build_offset_map()
            self.stats.keys = len(offset_map)
            files = [self._clean_group(group, offset_map) for group in self._groups()]
        finally:
            self._views = []
            self.stats.seconds = time.monotonic() - self._started
        return CleaningResult(files, self.end_offset, self.stats)

    @staticmethod
    def _open(ref: SegmentRef):
        if ref.size == 0:
            return memoryview(b"")
        fd = os.open(ref.path, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (ref.dev, ref.ino) or st.st_size < ref.size:
                raise FileNotFoundError(f"{ref.path} is no longer the segment the pass was planned on")
            # (unmapped when the last view of it goes)
            return memoryview(mmap.mmap(fd, ref.size, prot=mmap.PROT_READ))
        finally:
            os.close(fd)

    def _next_base(self, i: int) -> int:
        return self.refs[i + 1].base_offset if i + 1 < len(self.refs) else self.end_offset

    def _build_offset_map(self) -> dict:
        """key -> its last offset in the dirty part. Stops at a segment boundary when the map
        is full (the pass then ends there: the rest stays dirty for the next one)."""
        offset_map: dict = {}
        first_dirty = self.spec.first_dirty
        mapped = False
        for i in range(len(self.refs)):
            if self._next_base(i) <= first_dirty:
                continue  # clean already
            if mapped and len(offset_map) >= self.spec.max_keys:
                self.end_offset = self.refs[i].base_offset
                del self.refs[i:], self._views[i:]
                break
            mapped = True
            for _, h, batch in self._batches(i):
                if h.is_control or h.last_offset < first_dirty:
                    continue
                for r in decode_records(batch, h):
                    if r.key is not None and r.offset >= first_dirty:
                        offset_map[r.key] = r.offset
        return offset_map

    def _groups(self):
        """Consecutive segments whose sizes add up to at most segment.bytes (and whose offsets
        fit the index's 32-bit deltas), one cleaned segment each: (first, past-the-last) indexes."""
        i, n = 0, len(self.refs)
        while i < n:
            j, total = i + 1, self.refs[i].size
            while (j < n and total + self.refs[j].size <= self.spec.segment_bytes
                   and self._next_base(j) - 1 - self.refs[i].base_offset <= 0xFFFFFFFF):
                total += self.refs[j].size
                j += 1
            yield i, j
            i = j

    def _clean_group(self, group: tuple[int, int], offset_map: dict) -> CleanedFile:
        first, last = group
        spec = self.spec
        base = self.refs[first].base_offset
        path = segment_path(spec.directory, base) + CLEANED_SUFFIX
        _unlink(path)
        out = LogSegment(spec.directory, base, create=True, index_interval_bytes=spec.index_interval_bytes,
                         use_mmap=False, path=path)
        try:
            pending, placed = bytearray(), []
            for i in range(first, last):
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
        finally:
            out.close()
        return CleanedFile(base, self._next_base(last - 1), path)

    def _kept(self, h, batch, offset_map: dict):
        """The batch as the pass writes it: itself, a rebuilt copy, or None (dropped)."""
        if h.is_control:
            return batch
        records = decode_records(batch, h)
        kept, tombstones = [], False
        now = self.spec.now_ms
        off_by_one = planted_drops_latest
        for r in records:
            if r.key is not None and (offset_map.get(r.key, -1) > r.offset
                                      or off_by_one and offset_map.get(r.key) == r.offset):
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
            horizon = h.base_timestamp if h.has_delete_horizon else now + self.spec.delete_retention_ms
        if len(kept) == len(records) and (horizon is None) == (not h.has_delete_horizon):
            return batch
        if not kept and h.last_offset not in self.spec.producer_batches:
            self.stats.batches_dropped += 1
            return None
        return rebuild_batch(h, kept, delete_horizon_ms=horizon)

    def _write(self, out: LogSegment, buf: bytearray, placed: list) -> None:
        out.append(buf, placed)
        self.stats.bytes_written += len(buf)
        self._throttle(len(buf))

    def _batches(self, i: int):
        """(position, header, bytes) of every batch of segment i."""
        view = self._views[i]
        for pos, h in iter_batch_headers(view):
            yield pos, h, view[pos:pos + h.size]
        self.stats.bytes_read += len(view)
        self._throttle(len(view))

    def _throttle(self, nbytes: int) -> None:
        rate = self.spec.io_bytes_per_second
        if not rate or rate == float("inf"):
            return
        self._throttled_bytes += nbytes
        ahead = self._throttled_bytes / rate - (time.monotonic() - self._started)
        if ahead > 0:
            time.sleep(ahead)


@dataclass
class CleanedGroup:
    sources: list          # the LogSegments it replaces, in offset order
    end_offset: int        # the base offset of the segment after the group
    segment: LogSegment    # the cleaned copy, `<base>.log.cleaned` until the commit


class CleaningPlan:
    """One pass over one log: FileLog.plan_cleaning makes it (loop), run() does it (a worker
    thread, the pass itself in `executor`'s process if given), FileLog.commit_cleaning swaps it
    in (loop)."""

    def __init__(self, spec: CleaningSpec, sources: list, *, use_mmap: bool, generation: int) -> None:
        self.spec = spec
        self.sources = sources  # the LogSegments of spec.segments
        self.use_mmap = use_mmap
        self.generation = generation
        self.end_offset = spec.end_offset
        self.groups: list[CleanedGroup] = []
        self.stats = CleanerStats()
        self.ready = False
        self.discarded = False

    @property
    def segments(self) -> list:
        """The log's segments the pass replaces (the commit checks the log still holds them)."""
        return [s for s in self.sources if s.base_offset < self.end_offset]

    def run(self, executor=None) -> None:
        """The pass (in `executor`, a process pool, if given: it is CPU-bound Python, which a
        thread would run under the event loop's GIL), then the cleaned segments opened and their
        indexes built here."""
        if self.discarded:
            return
        result = executor.submit(clean_segments, self.spec).result() if executor else clean_segments(self.spec)
        self.stats, self.end_offset = result.stats, result.end_offset
        for f in result.files:
            seg = LogSegment(self.spec.directory, f.base_offset, index_interval_bytes=self.spec.index_interval_bytes,
                             use_mmap=self.use_mmap, path=f.path)
            self.groups.append(CleanedGroup([s for s in self.sources if f.base_offset <= s.base_offset < f.end_offset],
                                            f.end_offset, seg))
            seg.recover(check_crc=False, gaps=True)
            seg._maybe_time_entry()
            seg.sealed = True
        self.ready = not self.discarded

    def discard(self) -> None:
        """Never committed (the log changed, or it failed): remove the cleaned copies. Only once
        run() returned (or if it never ran)."""
        self.discarded = True
        self.ready = False
        for group in self.groups:
            group.segment.close()
            _unlink(group.segment.path)
        self.groups = []
        directory = self.spec.directory
        for ref in self.spec.segments:  # (a pass that failed midway: whatever it wrote)
            _unlink(segment_path(directory, ref.base_offset) + CLEANED_SUFFIX)
