"""One partition led by this node: its log, leader epoch and high watermark."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from .topic_config import TopicConfig

PartitionKey = tuple[str, int]


@dataclass(slots=True, eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: object  # a kraftd.storage PartitionLog
    config: TopicConfig
    leader_epoch: int
    high_watermark: int = 0
    # When fsync is off, the HW follows the log end at once; otherwise only durable data counts.
    hw_follows_flush: bool = True
    leader_id: int = -1
    # KIP-630 state and snapshots, for cleanup.policy=snapshot topics only.
    snapshots: object = None
    # KIP-227: changes go to the node's ChangeJournal under this key, for fetch sessions.
    journal: object = None
    session_key: int = 0

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.index)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        # No transactions: nothing is ever pending, so LSO = HW.
        return self.high_watermark

    def needs_flush(self) -> bool:
        return self.log.flushed_offset < self.log.log_end_offset

    def after_append(self) -> bool:
        """Update the HW after an append; True when it moved."""
        if self.hw_follows_flush:
            return False
        return self._advance_hw(self.log.log_end_offset)

    def after_flush(self, flushed_offset: int) -> bool:
        return self._advance_hw(min(flushed_offset, self.log.log_end_offset))

    def _advance_hw(self, offset: int) -> bool:
        if offset > self.high_watermark:
            self.high_watermark = offset
            self._record_change()
            return True
        return False

    def after_log_start_moved(self) -> None:
        # DeleteRecords/retention never move the log start past the HW, but keep HW ≥ log start.
        if self.high_watermark < self.log.log_start_offset:
            self.high_watermark = self.log.log_start_offset
        self._record_change()

    def _record_change(self) -> None:
        if self.journal is not None:
            self.journal.record(self.session_key)
