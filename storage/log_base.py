"""The partition-log interface quorum programs against, and its result types.

`FileLog` (segments on disk) and `MemoryLog` (for deterministic simulation) both implement
`PartitionLog`; one contract test suite runs against both.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Protocol

from .leader_epoch_cache import LeaderEpochCache
from .producer_state import ProducerStateTable

__all__ = ["AppendResult", "ReadResult", "Region", "PartitionLog", "RecoveryReport"]


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
    segments_scanned: list[int] = field(default_factory=list)  # base offsets fully scanned
    indexes_rebuilt: list[int] = field(default_factory=list)
    truncated_segment: int | None = None  # base offset of the segment cut at a torn/corrupt batch
    truncated_at_position: int | None = None
    truncated_bytes: int = 0
    truncation_reason: str | None = None
    deleted_segments: list[int] = field(default_factory=list)  # after a corrupt one
    log_start_offset: int = 0
    log_end_offset: int = 0
    clean_shutdown: bool = False

    @property
    def truncated(self) -> bool:
        return self.truncated_segment is not None or bool(self.deleted_segments)


class PartitionLog(abc.ABC):
    """One partition's log. Everything runs on one thread, except `flush()` which may run on a
    worker thread concurrently with appends and reads."""

    epoch_cache: LeaderEpochCache
    producer_state: ProducerStateTable

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def flushed_offset(self) -> int:
        """Every offset below this is durable."""

    @abc.abstractmethod
    def append_as_leader(
        self, batches: bytearray, leader_epoch: int, *, now_ms: int, log_append_time: bool = False
    ) -> AppendResult:
        """Assign offsets from the log end (patching baseOffset/partitionLeaderEpoch in place)."""

    @abc.abstractmethod
    def append_as_follower(self, batches) -> AppendResult:
        """Append batches that already carry offsets/epochs; they must start at the log end."""

    @abc.abstractmethod
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult: ...

    @abc.abstractmethod
    def flush(self) -> int:
        """Make everything appended so far durable; returns the new flushed offset."""

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

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader_epoch) of the first record with timestamp ≥ target."""

    @abc.abstractmethod
    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader_epoch) of the record with the largest timestamp."""

    @abc.abstractmethod
    def close(self) -> None: ...
