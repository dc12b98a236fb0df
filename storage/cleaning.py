"""A FileLog's side of the log cleaner (cleaner.py does the pass): what is cleanable and how
dirty it is, the plan of a pass, and its commit. Loop thread only.

The cleaner checkpoint (`cleaner-offset-checkpoint` in the partition's directory) is where the
dirty part starts: the end of the last committed pass. It is written in the background after a
commit; a crash before that only makes the next pass map again what this one mapped.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .atomic_file import atomic_write, fsync_dir
from .background_writes import background_writes
from .cleaner import CleaningPlan, CleaningSpec, SegmentRef, swap_path
from .segment import segment_path

__all__ = ["Cleanable", "cleanable", "plan_cleaning", "commit_cleaning", "read_cleaner_checkpoint",
           "truncate_cleaner_checkpoint", "CLEANER_CHECKPOINT_FILE"]

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A compacted log's cleanable range, [log start, end_offset), and its dirty part."""
    first_dirty: int
    end_offset: int
    clean_bytes: int
    dirty_bytes: int
    first_dirty_timestamp: int  # the first dirty segment's first batch's largest timestamp (-1: none)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def read_cleaner_checkpoint(directory: str) -> int:
    try:
        with open(os.path.join(directory, CLEANER_CHECKPOINT_FILE), encoding="ascii") as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return 0


def truncate_cleaner_checkpoint(log, offset: int) -> None:
    """The log was truncated to `offset`: what is appended from there on is dirty again (Kafka's
    LogCleanerManager.maybeTruncateCheckpoint). A crash before the write only makes the next
    pass take less as dirty than it could."""
    if log.cleaner_checkpoint > offset:
        log.cleaner_checkpoint = offset
        _write_checkpoint_later(log)


def cleanable(log, *, max_offset: int, now_ms: int, min_lag_ms: int) -> Cleanable | None:
    """The sealed segments below `max_offset` (the high watermark: never what a truncation may
    still cut), up to the first with a record newer than `min_lag_ms` (Kafka's
    min.compaction.lag.ms); None if none of them is dirty. (Not bounded by the flushed offset:
    a pass fsyncs what it writes, and under fsync_policy=never nothing is ever flushed.)"""
    segs, bases = log._segments, log._bases
    n = 0
    while (n + 1 < len(segs) and bases[n + 1] <= max_offset
           and (min_lag_ms <= 0 or segs[n].max_timestamp <= now_ms - min_lag_ms)):
        n += 1
    if n == 0:
        return None
    end = bases[n]
    first_dirty = min(max(log.cleaner_checkpoint, log.log_start_offset), end)
    if first_dirty >= end:
        return None
    clean = dirty = 0
    first_ts = -1
    for i in range(n):
        if bases[i + 1] <= first_dirty:
            clean += segs[i].size
        else:
            if first_ts < 0:  # (the first dirty segment with a timestamp)
                first_ts = segs[i].rolling_timestamp()
            dirty += segs[i].size
    return Cleanable(first_dirty, end, clean, dirty, first_ts)


def plan_cleaning(log, range_: Cleanable, *, now_ms: int, delete_retention_ms: int, max_keys: int,
                  io_bytes_per_second: float | None) -> CleaningPlan:
    """A pass over the log's segments below `range_.end_offset` (run() it off the loop)."""
    n = log._bases.index(range_.end_offset)
    segments = list(log._segments[:n])
    refs = []
    for seg in segments:
        st = os.fstat(seg.fd)
        refs.append(SegmentRef(seg.base_offset, seg.path, seg.size, st.st_dev, st.st_ino))
    producer_batches = log.producer_state.remembered_batch_offsets() | log._retained.remembered_batch_offsets()
    spec = CleaningSpec(
        directory=log.dir, segments=refs, first_dirty=range_.first_dirty, end_offset=range_.end_offset,
        segment_bytes=log.segment_bytes, index_interval_bytes=log.index_interval_bytes, now_ms=now_ms,
        delete_retention_ms=delete_retention_ms, producer_batches=producer_batches, max_keys=max_keys,
        io_bytes_per_second=io_bytes_per_second)
    return CleaningPlan(spec, segments, use_mmap=log.use_mmap, generation=log._generation)


def commit_cleaning(log, plan: CleaningPlan) -> bool:
    """Swap in what `plan.run()` wrote, if the log still holds every segment it cleaned (no
    truncation, no retention or deletion took one meanwhile); else discard it. True if swapped."""
    segs, replaced = log._segments, plan.segments
    first = next((i for i, s in enumerate(segs) if replaced and s is replaced[0]), None)
    n = len(replaced)
    if (not plan.ready or log.discarded or plan.generation != log._generation or first is None
            or len(segs) <= first + n or any(a is not b for a, b in zip(segs[first:first + n], replaced))
            or log._bases[first + n] != plan.end_offset):
        plan.discard()
        return False
    swaps = []
    for group in plan.groups:
        base = group.sources[0].base_offset
        swap = swap_path(log.dir, base, group.end_offset)
        os.rename(group.segment.path, swap)
        group.segment.path = swap
        swaps.append((group, swap))
    fsync_dir(log.dir)  # from here on, a crash finishes the swaps (cleaner.finish_swaps)
    for group, swap in swaps:
        base = group.sources[0].base_offset
        for old in group.sources:
            for suffix in (".index", ".timeindex") if old.base_offset == base else (".log", ".index", ".timeindex"):
                try:
                    os.unlink(segment_path(log.dir, old.base_offset, suffix))
                except FileNotFoundError:
                    pass
        final = segment_path(log.dir, base)
        os.replace(swap, final)
        group.segment.path = final
        for old in group.sources:
            old.unlinked()
    fsync_dir(log.dir)
    cleaned = [group.segment for group in plan.groups]
    for seg in cleaned:
        seg.write_index_files()
    # The old segments are no longer the log's; their files are gone, and their descriptors
    # close when the last in-flight read of them does (never delete() them: their names are
    # the new segments' now).
    log._segments[first:first + n] = cleaned
    log._bases[first:first + n] = [seg.base_offset for seg in cleaned]
    with log._lock:  # (a replaced segment still waiting for its fsync needs none now)
        log._dirty = {k: v for k, v in log._dirty.items() if v in log._segments}
    log.cleaner_checkpoint = plan.end_offset
    _write_checkpoint_later(log)
    return True


def _write_checkpoint_later(log) -> None:
    """Write the log's cleaner checkpoint on storage's background writer (in order with the
    other writes of it, the value it has when the write runs)."""
    directory = log.dir

    def write_checkpoint() -> None:
        if not log.discarded:
            atomic_write(os.path.join(directory, CLEANER_CHECKPOINT_FILE), f"{log.cleaner_checkpoint}\n".encode())
    background_writes().submit(write_checkpoint)
