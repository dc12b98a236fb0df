"""The partition-log interface quorum programs against, and its result types.

`FileLog` (segments on disk) and `MemoryLog` (for deterministic simulation) both implement
`PartitionLog`; one contract test suite runs against both.
"""
from __future__ import annotations

import abc
import collections
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.records import (BatchHeader, crc_ok, iter_batch_headers, patch_base_offset,
                                     patch_leader_epoch, set_log_append_time)

from .errors import NonContiguousAppendError
from .leader_epoch_cache import LeaderEpochCache
from .voter_set_cache import VoterSetCache, voters_values_in
from .producer_state import ProducerStateTable, producers_rebuilt, update_producers

__all__ = ["AppendResult", "ReadResult", "Region", "PartitionLog", "RecoveryReport"]


LEADER_APPENDS_KEPT = 64


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    max_timestamp: int  # -1 if no batch carried a timestamp
    offset_of_max_timestamp: int  # last offset of the batch holding max_timestamp (Kafka's "shallow" offset)
    log_append_time_ms: int = -1  # now_ms when LogAppendTime was applied, else -1


class Region(Protocol):
    """A zero-copy slice of stored batches (FileRegion or MemoryRegion)."""

    def __len__(self) -> int: ...
    def view(self) -> memoryview: ...


@dataclass(frozen=True, slots=True)
class ReadResult:
    regions: list  # list[Region]; whole batches, in offset order
    size: int  # total bytes over regions
    first_offset: int = -1  # base offset of the first batch returned (may be < requested), -1 if empty
    next_offset: int = -1  # offset after the last batch returned (requested offset if empty)

    def to_bytes(self) -> bytes:
        """Materialise (tests, small reads); the server writes regions without this copy."""
        return b"".join(bytes(r.view()) for r in self.regions)


@dataclass(slots=True)
class RecoveryReport:
    """What opening a FileLog found and repaired (the caller logs it)."""

    segments: int = 0
    segments_scanned: list[int] | tuple[int, ...] = field(default_factory=list)  # base offsets fully scanned
    indexes_rebuilt: list[int] | tuple[int, ...] = field(default_factory=list)
    truncated_segment: int | None = None  # base offset of the segment cut at a torn/corrupt batch
    truncated_at_position: int | None = None
    truncated_bytes: int = 0
    truncation_reason: str | None = None
    deleted_segments: list[int] | tuple[int, ...] = field(default_factory=list)  # after a corrupt one
    swaps_finished: list[int] | tuple[int, ...] = ()  # cleaned segments a crash left mid-swap (storage/cleaner.py)
    log_start_offset: int = 0
    log_end_offset: int = 0
    clean_shutdown: bool = False

    def settle(self) -> "RecoveryReport":
        """The lists as tuples, once recovery is done: a tuple of ints is not tracked by the
        garbage collector, and every open log keeps its report."""
        self.segments_scanned = tuple(self.segments_scanned)
        self.indexes_rebuilt = tuple(self.indexes_rebuilt)
        self.deleted_segments = tuple(self.deleted_segments)
        self.swaps_finished = tuple(self.swaps_finished)
        return self

    @property
    def truncated(self) -> bool:
        return self.truncated_segment is not None or bool(self.deleted_segments)


class PartitionLog(abc.ABC):
    """One partition's log. Everything runs on one thread, except `flush()` which may run on a
    worker thread concurrently with appends and reads."""

    epoch_cache: LeaderEpochCache
    voter_sets: VoterSetCache  # the VotersRecords in the log (KIP-853)
    producer_state: ProducerStateTable

    # Implementations keep these four fields; appends and flushes update them.
    _log_start: int
    _leo: int
    _flushed: int
    _segments: list

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is durable."""
        return self._flushed

    @property
    def segments(self) -> list:
        return list(self._segments)

    def append_as_leader(
        self, batches: bytearray, leader_epoch: int, *, now_ms: int, log_append_time: bool = False,
        wall_ms: int | None = None,
    ) -> AppendResult:
        """Assign offsets from the log end (patching baseOffset/partitionLeaderEpoch in place:
        `batches` is a bytearray or a writable memoryview, else it is copied first; Produce hands
        over a large request's own buffer, which the connection read it into).
        `now_ms` is the caller's timer clock; `wall_ms` (default `now_ms`) is what LogAppendTime
        writes into the batches."""
        stamp = now_ms if wall_ms is None else wall_ms
        if not isinstance(batches, bytearray) and not (isinstance(batches, memoryview) and not batches.readonly):
            batches = bytearray(batches)
        offset = self.log_end_offset
        # (log end before, time) of recent leader appends: a follower whose log ends at E was
        # caught up until the first append made at or after E (the ISR's "last caught up").
        appends = getattr(self, "leader_appends", None)
        if appends is None:
            appends = self.leader_appends = collections.deque(maxlen=LEADER_APPENDS_KEPT)
        appends.append((offset, now_ms))
        placed: list[tuple[int, BatchHeader]] = []
        for pos, h in list(iter_batch_headers(batches)):
            patch_base_offset(batches, pos, offset)
            patch_leader_epoch(batches, pos, leader_epoch)
            if log_append_time:
                h = set_log_append_time(batches, pos, h, stamp)
            h = h._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
            placed.append((pos, h))
            offset = h.next_offset
        if not placed or sum(h.size for _, h in placed) != len(batches):
            raise ValueError("append_as_leader needs whole, valid record batches")
        latest = self.epoch_cache.latest_epoch
        if latest is None or leader_epoch > latest:
            # Checkpoint before data: after a crash it may name offsets past the log end, which
            # recovery trims; it never misses an epoch whose data survived.
            self.epoch_cache.assign(leader_epoch, placed[0][1].base_offset)
        self._note_voter_sets(batches, placed)
        return self._append(batches, placed, stamp if log_append_time else -1)

    def append_as_follower(self, batches) -> AppendResult:
        """Append batches that already carry offsets/epochs; they must start at the log end (or,
        in a log with `gaps_allowed`, after it: a compacted leader's cleaned range)."""
        view = memoryview(batches)
        expected = self.log_end_offset
        placed: list[tuple[int, BatchHeader]] = []
        for pos, h in iter_batch_headers(view):
            if h.base_offset < expected or (h.base_offset > expected and not self.gaps_allowed):
                raise NonContiguousAppendError(f"batch at {h.base_offset}, log end is {expected}")
            if h.magic != 2 or not crc_ok(view, pos, h):
                raise NonContiguousAppendError(f"corrupt batch at offset {h.base_offset}")
            placed.append((pos, h))
            expected = h.next_offset
        if not placed or sum(h.size for _, h in placed) != len(view):
            raise ValueError("append_as_follower needs whole record batches")
        for _, h in placed:
            latest = self.epoch_cache.latest_epoch
            if h.partition_leader_epoch >= 0 and (latest is None or h.partition_leader_epoch > latest):
                self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self._note_voter_sets(view, placed)
        return self._append(view, placed, -1, replicated=True)

    def _note_voter_sets(self, buf, placed) -> None:
        """VotersRecords in the control batches about to be appended (KIP-853): recorded, and
        checkpointed, before the data (storage/voter_set_cache.py)."""
        for pos, h in placed:
            if h.is_control:
                for offset, value in voters_values_in(memoryview(buf)[pos:pos + h.size], h):
                    self.voter_sets.assign(offset, value)

    def _append(self, buf, placed: list, log_append_time_ms: int, *, replicated: bool = False) -> AppendResult:
        self._store(buf, placed, replicated=replicated)
        headers = [h for _, h in placed]
        self._update_producers(headers)
        max_ts, offset_of_max = -1, headers[-1].last_offset
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        return AppendResult(headers[0].base_offset, headers[-1].last_offset, max_ts, offset_of_max,
                            log_append_time_ms)

    def _update_producers(self, headers, table: ProducerStateTable | None = None) -> None:
        """Idempotent-producer state follows every appended (or recovered) batch."""
        update_producers(self.producer_state if table is None else table, headers)

    # Producer state below the log start. Moving the log start forgets no producer (only expiry
    # does: see producer_state), but a rebuild of the state reads the log from its start; so the
    # log keeps `_retained`, the state of every batch whose last offset is below
    # `_retained_offset` (the log start when it last moved), and rebuilds start from a copy of it.
    _retained: ProducerStateTable
    _retained_offset: int

    def _retain_producers(self, new_start: int) -> None:
        """The log start moves to `new_start` (see ProducerStateTable.below)."""
        self._retained = self.producer_state.below(new_start, self._retained)
        self._retained_offset = new_start

    def _producers_restarted_at(self, offset: int) -> None:
        """The log is emptied and starts at `offset`: the retained state still holds if it is
        the state below that very offset (truncation to the log start), else nothing is known."""
        if offset != self._retained_offset:
            self._retained, self._retained_offset = ProducerStateTable(), offset
        self.producer_state = self._retained.copy()

    def _producers_rebuilt(self, headers) -> ProducerStateTable:
        """The retained state, then `headers` (the log's batches from its start) on top."""
        return producers_rebuilt(self._retained, self._retained_offset, headers)

    @abc.abstractmethod
    def _store(self, buf, placed: list[tuple[int, BatchHeader]], *, replicated: bool = False) -> None:
        """Write whole batches, found at these positions of `buf`, at the log end; `replicated`:
        a follower's copy of its leader's batches."""

    @abc.abstractmethod
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult: ...

    @abc.abstractmethod
    def flush(self) -> int:
        """Make everything appended so far durable; returns the new flushed offset."""

    def flush_is_small(self, max_bytes: int) -> bool:
        """The next flush is cheap enough to run on the event loop (see FileLog)."""
        return False

    def begin_flush(self):
        """If the next flush is nothing but fsyncs of open files: take it, and return a plan
        naming their `fds`. The caller fsyncs them (by AIO: server/log_flusher.py) and then
        calls `end_flush(plan)`, or `abort_flush(plan)` if one failed. None: use flush()."""
        return None

    def end_flush(self, plan) -> int:
        """After every fd of `plan` was fsynced: the new flushed offset."""
        raise NotImplementedError

    def abort_flush(self, plan) -> None:
        """An fsync of `plan` failed: what it took is dirty again."""
        raise NotImplementedError

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Drop every batch containing an offset ≥ `offset` (a batch straddling it goes too)."""

    @abc.abstractmethod
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log; both log start and log end become `offset` (snapshot install)."""

    @abc.abstractmethod
    def advance_log_start(self, offset: int) -> None: ...

    @abc.abstractmethod
    def apply_retention(
        self, now_ms: int, retention_ms: int, retention_bytes: int, *, max_offset: int | None = None
    ) -> int:
        """Delete expired oldest segments (never data at/after max_offset); returns how many."""

    def reconfigure(self, *, segment_bytes: int, segment_ms: int | None, compacted: bool) -> None:
        """The topic's configs changed (IncrementalAlterConfigs): new segments follow the new
        sizes; a log that becomes compacted allows gaps from now on (and for good)."""
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        if compacted:
            self.gaps_allowed = True

    def cleanable(self, *, max_offset: int, now_ms: int, min_lag_ms: int):
        """A compacted log's cleanable range (storage/cleaning.py), or None: nothing to clean,
        or a log without a cleaner."""
        return None

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader_epoch) of the first record with timestamp ≥ target."""

    @abc.abstractmethod
    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader_epoch) of the record with the largest timestamp."""

    @abc.abstractmethod
    def close(self) -> None: ...

    #: Offsets may be missing between batches: a compacted topic's log, where the cleaner removed
    #: whole batches (its replicas copy the gaps, and recovery keeps them).
    gaps_allowed = False

    #: The partition was deleted (discard()): a flush still running for it is moot, and what it
    #: reports (an offset or an error) is about files nobody owns any more.
    discarded = False

    def discard(self, *, remove: bool = True) -> None:
        """The partition is deleted: let go of it (a file log also removes its files; with
        `remove=False` it only moves them out of the way, and `remove_discarded()` removes them)."""
        self.discarded = True
        self.close()

    def remove_discarded(self) -> None:
        """After `discard(remove=False)`: remove what the log left (nothing here)."""
