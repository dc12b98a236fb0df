"""Idempotent-producer state per partition: epochs and the last batches' sequence ranges.

The broker must recognise a retried batch (same producer id, epoch and sequence range) and
acknowledge it with the offsets it got the first time instead of appending it again; Kafka
remembers the last 5 batches per producer because a producer has at most 5 in flight.

`check()` never mutates; the log calls `update()` for every batch it appends (leader and
follower appends, and the rebuild on open).
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["ProducerStatus", "BatchMetadata", "ProducerEntry", "ProducerStateTable"]

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


@dataclass(slots=True)
class ProducerEntry:
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1

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

    def __len__(self) -> int:
        return len(self._producers)

    def __contains__(self, producer_id: int) -> bool:
        return producer_id in self._producers

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(
        self, producer_id: int, producer_epoch: int, base_sequence: int, last_sequence: int
    ) -> tuple[ProducerStatus, BatchMetadata | None]:
        if producer_id < 0 or base_sequence == NO_SEQUENCE:
            return ProducerStatus.OK, None  # not idempotent
        entry = self._producers.get(producer_id)
        if entry is None:
            # Kafka ≥ 2.5 accepts any sequence here (state may have expired); we keep the
            # stricter pre-KIP-360 answer so the client resets (clients handle this code).
            if base_sequence != 0:
                return ProducerStatus.UNKNOWN_PRODUCER_ID, None
            return ProducerStatus.OK, None
        if producer_epoch < entry.producer_epoch:
            return ProducerStatus.INVALID_PRODUCER_EPOCH, None
        if producer_epoch > entry.producer_epoch:
            # A bumped epoch restarts the sequence space.
            if base_sequence != 0:
                return ProducerStatus.OUT_OF_ORDER_SEQUENCE, None
            return ProducerStatus.OK, None
        for batch in entry.batches:
            if batch.first_seq == base_sequence and batch.last_seq == last_sequence:
                return ProducerStatus.DUPLICATE, batch
        last = entry.last_seq
        if last == NO_SEQUENCE:  # only control batches seen for this epoch
            ok = base_sequence == 0
        else:
            ok = base_sequence == next_sequence(last)
        return (ProducerStatus.OK if ok else ProducerStatus.OUT_OF_ORDER_SEQUENCE), None

    def update(
        self,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int = -1,
        *,
        is_control: bool = False,
    ) -> None:
        """Record an appended batch (no validation: the leader checked, a follower trusts)."""
        if producer_id < 0:
            return
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.producer_epoch:
            entry = self._producers[producer_id] = ProducerEntry(producer_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if not is_control and first_seq != NO_SEQUENCE:
            entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose last batch is below the log start (Kafka does the same)."""
        gone = [
            pid
            for pid, e in self._producers.items()
            if e.batches and e.batches[-1].last_offset < log_start_offset
        ]
        for pid in gone:
            del self._producers[pid]

    def clear(self) -> None:
        self._producers.clear()

    def snapshot(self) -> dict:
        """JSON-able copy (used for the clean-shutdown snapshot)."""
        return {
            str(pid): {
                "epoch": e.producer_epoch,
                "ts": e.last_timestamp,
                "batches": [list(b) for b in e.batches],
            }
            for pid, e in self._producers.items()
        }

    @classmethod
    def from_snapshot(cls, data: dict) -> "ProducerStateTable":
        table = cls()
        for pid, e in data.items():
            entry = ProducerEntry(int(e["epoch"]), last_timestamp=int(e["ts"]))
            entry.batches.extend(BatchMetadata(*b) for b in e["batches"])
            table._producers[int(pid)] = entry
        return table
