"""Idempotent-producer state per partition: epochs and the last batches' sequence ranges.

The broker must recognise a retried batch (same producer id, epoch and sequence range) and
acknowledge it with the offsets it got the first time instead of appending it again; Kafka
remembers the last 5 batches per producer because a producer has at most 5 in flight.

`check()` never mutates; the log calls `update()` for every batch it appends (leader and
follower appends, and the rebuild on open).

A producer is forgotten only when it expires (`expire_idle`), never because the log start
passed its batches (Kafka since KIP-360): a batch the producer sent but was never told about
(its request timed out) may be retried long after a snapshot or retention moved the log start
past it, and a producer with no state would accept a retried sequence 0 as new and append it
twice. The log keeps the state of the batches below its log start so that its rebuilds
(recovery, truncation) start from it (see PartitionLog).
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["ProducerStatus", "BatchMetadata", "ProducerEntry", "ProducerStateTable", "SequenceCheck",
           "update_producers", "producers_rebuilt"]

INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NUM_BATCHES_TO_RETAIN = 5


class ProducerStatus(enum.Enum):
    OK = "ok"
    DUPLICATE = "duplicate"  # acknowledge with the original offsets, do not append
    OUT_OF_ORDER_SEQUENCE = "out_of_order_sequence"
    INVALID_PRODUCER_EPOCH = "invalid_producer_epoch"  # an older (fenced) epoch
    UNKNOWN_PRODUCER_ID = "unknown_producer_id"  # no state and the sequence is not 0


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int = -1


# Kafka error-code names (kraftd.protocol.errors.ErrorCode) for the non-OK statuses.
_ERROR_NAMES = {
    ProducerStatus.OUT_OF_ORDER_SEQUENCE: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    ProducerStatus.INVALID_PRODUCER_EPOCH: "INVALID_PRODUCER_EPOCH",
    ProducerStatus.UNKNOWN_PRODUCER_ID: "UNKNOWN_PRODUCER_ID",
}


class SequenceCheck:
    """Unpacks as (status, duplicate); the properties serve the produce handler directly."""

    __slots__ = ("status", "duplicate", "detail")

    def __init__(self, status: ProducerStatus, duplicate: BatchMetadata | None = None, detail: str = ""):
        self.status = status
        self.duplicate = duplicate
        self.detail = detail

    def __iter__(self):
        return iter((self.status, self.duplicate))

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other)

    def __repr__(self) -> str:
        return f"SequenceCheck({self.status.name}, {self.duplicate!r}, {self.detail!r})"

    @property
    def error(self) -> str | None:
        """ErrorCode name to answer with, or None (OK or DUPLICATE)."""
        return _ERROR_NAMES.get(self.status)

    @property
    def message(self) -> str | None:
        return self.detail or None

    @property
    def duplicate_first_offset(self) -> int | None:
        return self.duplicate.first_offset if self.duplicate is not None else None


_OK = SequenceCheck(ProducerStatus.OK)


@dataclass(slots=True)
class ProducerEntry:
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    # The node's time at the first expiry check after this producer's latest batch (an upper
    # bound on when it was last active); -1 until that check.
    last_seen_ms: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


def next_sequence(seq: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (KIP-98)."""
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateTable:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # Producers with a batch since the last expire_idle(): stamped with its time there, so
        # the table needs no clock of its own (the node's time is the only one, sans-IO).
        # (a dict of None, not a set: a dict of ints is never tracked by the garbage collector,
        # a set always is; two tables a partition)
        self._touched: dict[int, None] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def __contains__(self, producer_id: int) -> bool:
        return producer_id in self._producers

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(
        self, producer_id: int, producer_epoch: int, base_sequence: int, last_sequence: int
    ) -> SequenceCheck:
        if producer_id < 0 or base_sequence == NO_SEQUENCE:
            return _OK  # not idempotent
        entry = self._producers.get(producer_id)
        if entry is None:
            # Kafka ≥ 2.5 accepts any sequence here (state may have expired); we keep the
            # stricter pre-KIP-360 answer so the client resets (clients handle this code).
            if base_sequence != 0:
                return SequenceCheck(
                    ProducerStatus.UNKNOWN_PRODUCER_ID, None,
                    f"No state for producer {producer_id}; its first sequence must be 0, got {base_sequence}.")
            return _OK
        if producer_epoch < entry.producer_epoch:
            return SequenceCheck(
                ProducerStatus.INVALID_PRODUCER_EPOCH, None,
                f"Producer {producer_id} epoch {producer_epoch} is older than {entry.producer_epoch}.")
        if producer_epoch > entry.producer_epoch:
            # A bumped epoch restarts the sequence space.
            if base_sequence != 0:
                return SequenceCheck(
                    ProducerStatus.OUT_OF_ORDER_SEQUENCE, None,
                    f"New epoch {producer_epoch} of producer {producer_id} must start at sequence 0, got {base_sequence}.")
            return _OK
        for batch in entry.batches:
            if batch.first_seq == base_sequence and batch.last_seq == last_sequence:
                return SequenceCheck(ProducerStatus.DUPLICATE, batch)
        last = entry.last_seq
        expected = 0 if last == NO_SEQUENCE else next_sequence(last)  # NO_SEQUENCE: only markers so far
        if base_sequence == expected:
            return _OK
        return SequenceCheck(
            ProducerStatus.OUT_OF_ORDER_SEQUENCE, None,
            f"Out of order sequence for producer {producer_id}: expected {expected}, got {base_sequence}.")

    def update(self, producer_id: int, producer_epoch: int, batch: BatchMetadata, *, is_control: bool = False) -> None:
        """Record an appended batch (no validation: the leader checked, a follower trusts)."""
        first_seq, timestamp = batch.first_seq, batch.timestamp
        if producer_id < 0:
            return
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.producer_epoch:
            entry = self._producers[producer_id] = ProducerEntry(producer_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self._touched[producer_id] = None
        if not is_control and first_seq != NO_SEQUENCE:
            entry.batches.append(batch)

    def expire_idle(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's producer.id.expiration.ms: forget producers whose last batch was appended at
        least `expiration_ms` ago (an entry is stamped `now_ms` at the first call after each of
        its batches, so with calls every interval, expiry comes between `expiration_ms` and
        `expiration_ms` + interval after the last batch). Returns how many were forgotten."""
        producers = self._producers
        for pid in self._touched:
            entry = producers.get(pid)
            if entry is not None:
                entry.last_seen_ms = now_ms
        self._touched.clear()
        cutoff = now_ms - expiration_ms
        gone = [pid for pid, e in producers.items() if e.last_seen_ms <= cutoff]
        for pid in gone:
            del producers[pid]
        return len(gone)

    def below(self, offset: int, previous: "ProducerStateTable") -> "ProducerStateTable":
        """The state of the batches below `offset` (the log start moves there), from this table
        and `previous`, the state below the last log start. A producer with a remembered batch
        below `offset` keeps its epoch and those batches (after the older ones `previous` has of
        that epoch); one whose remembered batches all lie at or past `offset` keeps what
        `previous` says of it (its last batches below `offset` may be older than that, but its
        batches past `offset` are in the log: a rebuild replays them). Producers this table
        forgot (expired) are gone. Costs a pass over the producers, no read of the log."""
        out = ProducerStateTable()
        for pid, entry in self._producers.items():
            kept = [b for b in entry.batches if b.last_offset < offset]
            old = previous._producers.get(pid)
            if kept:
                new = ProducerEntry(entry.producer_epoch, last_timestamp=entry.last_timestamp,
                                    last_seen_ms=entry.last_seen_ms)
                if old is not None and old.producer_epoch == entry.producer_epoch:
                    new.batches.extend(b for b in old.batches if b.last_offset < kept[0].first_offset)
                new.batches.extend(kept)
            elif old is not None:
                new = ProducerEntry(old.producer_epoch, deque(old.batches, maxlen=NUM_BATCHES_TO_RETAIN),
                                    old.last_timestamp, entry.last_seen_ms)
            else:
                continue
            out._producers[pid] = new
            if pid in self._touched:
                out._touched[pid] = None
        return out

    def remembered_batch_offsets(self) -> frozenset[int]:
        """The last offsets of every batch the table remembers (the log cleaner keeps those
        batches, emptied if need be, so that a rebuild still knows them)."""
        return frozenset(b.last_offset for e in self._producers.values() for b in e.batches)

    def copy(self) -> "ProducerStateTable":
        return ProducerStateTable.from_snapshot(self.snapshot())

    def clear(self) -> None:
        self._producers.clear()
        self._touched.clear()

    def snapshot(self) -> dict:
        """JSON-able copy (used for the clean-shutdown snapshot)."""
        return {
            str(pid): {
                "epoch": e.producer_epoch,
                "ts": e.last_timestamp,
                "seen": -1 if pid in self._touched else e.last_seen_ms,
                "batches": [list(b) for b in e.batches],
            }
            for pid, e in self._producers.items()
        }

    @classmethod
    def from_snapshot(cls, data: dict) -> "ProducerStateTable":
        table = cls()
        for pid, e in data.items():
            entry = ProducerEntry(int(e["epoch"]), last_timestamp=int(e["ts"]), last_seen_ms=int(e.get("seen", -1)))
            entry.batches.extend(BatchMetadata(*b) for b in e["batches"])
            table._producers[int(pid)] = entry
            if entry.last_seen_ms < 0:
                table._touched[int(pid)] = None  # active before the shutdown: stamped at the next check
        return table


def update_producers(table: ProducerStateTable, headers) -> None:
    """Follow batches (record batch headers, in log order) into `table`."""
    for h in headers:
        if h.producer_id >= 0:
            batch = BatchMetadata(h.base_sequence, last_sequence_of(h.base_sequence, h.last_offset_delta),
                                  h.base_offset, h.last_offset, h.max_timestamp)
            table.update(h.producer_id, h.producer_epoch, batch, is_control=h.is_control)


def producers_rebuilt(retained: ProducerStateTable, retained_offset: int, headers) -> ProducerStateTable:
    """A copy of `retained` (the state of the batches whose last offset is below
    `retained_offset`), then the batches of `headers` past it on top (a log's rebuild)."""
    table = retained.copy()
    update_producers(table, (h for h in headers if h.last_offset >= retained_offset))
    return table


def last_sequence_of(base_sequence: int, last_offset_delta: int) -> int:
    """Last sequence of a batch: base + delta, wrapping past INT32_MAX to 0."""
    if base_sequence < 0:
        return NO_SEQUENCE
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta
