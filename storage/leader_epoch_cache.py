"""Leader epoch → start offset cache (KIP-101, KIP-320), with Kafka's checkpoint file.

Semantics follow Apache Kafka's LeaderEpochFileCache (3.x):

- `assign(epoch, start)` is a no-op when `epoch` equals the latest epoch and `start` is not
  smaller than its start offset. Otherwise every entry, from the end, whose epoch ≥ `epoch` or
  whose start ≥ `start` is dropped (the new entry supersedes them) and the entry is added.
  Note: Kafka therefore does *not* ignore a lower epoch; it rewinds the cache. The log only calls
  `assign` for an epoch above the latest (as Kafka's log recovery does), so from the log's
  point of view non-increasing epochs are ignored.
- `end_offset_for(requested, leo)`: UNDEFINED (-1) → (-1, -1); requested == latest → (latest,
  leo); requested above every epoch (or an empty cache) → (-1, -1); requested below the earliest
  epoch → (requested, start of the earliest epoch) — Kafka's released behaviour (its javadoc
  still says UNDEFINED_EPOCH_OFFSET, the code returns the earliest start so a follower truncates
  to the leader's first known offset); otherwise (largest epoch ≤ requested, start of the next
  higher epoch).

Every change rewrites the checkpoint atomically ("0\\n<count>\\n<epoch> <start>\\n..."). The
file is written *before* the log data it describes (see FileLog), so after a crash it may hold
entries beyond the recovered log end; recovery calls `truncate_from_end(leo)`.
"""
from __future__ import annotations

import bisect
import os
import threading
from typing import NamedTuple

from .atomic_file import atomic_write

__all__ = ["EpochEntry", "LeaderEpochCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_CHECKPOINT_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Sorted (epoch, start_offset) entries; both strictly increasing. `path=None` → in memory."""

    def __init__(self, path: str | os.PathLike | None = None, *, deferred: bool = False):
        """With `deferred`, changes mark the checkpoint dirty and `write_checkpoint()` (the
        log's flush) writes it: FileLog re-derives epochs from the batches it scans after its
        recovery point, so the file only has to be current for data that has been flushed."""
        self._path = os.fspath(path) if path is not None else None
        self._epochs: list[int] = []
        self._starts: list[int] = []
        self._deferred = deferred
        self._dirty = False
        self._lock = threading.Lock()  # write_checkpoint() runs on the flusher's thread
        if self._path is not None and os.path.exists(self._path):
            for epoch, start in _read_checkpoint(self._path):
                self._assign(epoch, start)

    # -- queries ---------------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts)]

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def __len__(self) -> int:
        return len(self._epochs)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch / KIP-320 divergence checks."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Below the earliest epoch: data of older epochs was deleted; the follower must
            # truncate to where our history starts.
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the entry covering `offset`, or None if it is before the first entry."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else None

    # -- changes (each persists the checkpoint when it changed something) ---------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        if self._assign(epoch, start_offset):
            self._write()
            return True
        return False

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries whose start ≥ end_offset (after a log truncation to end_offset)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        i = bisect.bisect_left(self._starts, end_offset)
        with self._lock:
            del self._epochs[i:], self._starts[i:]
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below start_offset; the last such entry now starts there."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0 or (i == 1 and self._starts[0] == start_offset):
            return
        keep_epoch = self._epochs[i - 1]
        with self._lock:
            del self._epochs[:i], self._starts[:i]
            self._epochs.insert(0, keep_epoch)
            self._starts.insert(0, start_offset)
        self._write()

    def clear(self) -> None:
        if self._epochs:
            with self._lock:
                self._epochs.clear()
                self._starts.clear()
            self._write()

    # -- internals ----------------------------------------------------------------------------
    def _assign(self, epoch: int, start: int) -> bool:
        with self._lock:
            return self._assign_locked(epoch, start)

    def _assign_locked(self, epoch: int, start: int) -> bool:
        if epoch < 0 or start < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start})")
        if self._epochs and epoch == self._epochs[-1] and start >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start)
        return True

    def _write(self) -> None:
        if self._path is None:
            return
        if self._deferred:
            self._dirty = True
            return
        self._write_file(list(zip(self._epochs, self._starts)))

    @property
    def checkpoint_pending(self) -> bool:
        """Deferred mode: a change that write_checkpoint has not written yet."""
        return self._dirty

    def write_checkpoint(self) -> None:
        """Write the checkpoint if it changed since the last write (deferred mode)."""
        with self._lock:
            if not self._dirty or self._path is None:
                return
            entries = list(zip(self._epochs, self._starts))
            self._dirty = False
        try:
            self._write_file(entries)
        except BaseException:
            self._dirty = True
            raise

    def _write_file(self, entries: list[tuple[int, int]]) -> None:
        lines = [str(_CHECKPOINT_VERSION), str(len(entries))] + [f"{e} {s}" for e, s in entries]
        atomic_write(self._path, ("\n".join(lines) + "\n").encode())

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries!r})"


def _read_checkpoint(path: str) -> list[tuple[int, int]]:
    with open(path, encoding="ascii") as f:
        lines = f.read().splitlines()
    if len(lines) < 2 or int(lines[0]) != _CHECKPOINT_VERSION:
        raise ValueError(f"{path}: unsupported leader-epoch checkpoint")
    count = int(lines[1])
    if len(lines) - 2 < count:
        raise ValueError(f"{path}: expected {count} entries, found {len(lines) - 2}")
    out = []
    for line in lines[2 : 2 + count]:
        epoch, start = line.split()
        out.append((int(epoch), int(start)))
    return out
