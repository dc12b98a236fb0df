"""One partition replica on this node: its log, high watermark and Raft group.

Leader and epoch are read from the group's state (`raft`), never copied here.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..storage.log_base import PartitionLog
from .fetch_sessions.journal import ChangeJournal
from .topic_config import TopicConfig

if TYPE_CHECKING:  # (annotations only: both modules hold partitions)
    from .raft.group import RaftGroup
    from .snapshots.partition_snapshots import PartitionSnapshots

PartitionKey = tuple[str, int]


@dataclass(slots=True, eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: PartitionLog
    config: TopicConfig
    high_watermark: int = 0
    # KIP-630 state and snapshots, for cleanup.policy=snapshot topics only.
    snapshots: PartitionSnapshots | None = None
    # KIP-227: changes go to the node's ChangeJournal under this key, for fetch sessions.
    journal: ChangeJournal | None = None
    session_key: int = 0
    # The partition's Raft group: epoch, leader, role (set right after the partition is made).
    raft: RaftGroup | None = None
    # Its replicas as assigned, the preferred leader first (a cluster's placement).
    replicas: tuple[int, ...] = ()
    # A follower's view of the leader's log start (the latest Fetch answer that named it): a
    # snapshot-policy follower may reach it only once it has a snapshot of its own there.
    leader_log_start: int = 0

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.index)

    @property
    def leader_epoch(self) -> int:
        return self.raft.epoch

    @property
    def leader_id(self) -> int:
        return self.raft.leader_id

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

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

    def set_high_watermark(self, offset: int) -> None:
        """Only the Raft group moves the HW (forward)."""
        self.high_watermark = offset
        self.record_change()

    def after_log_start_moved(self) -> None:
        # DeleteRecords/retention never move the log start past the HW, but keep HW ≥ log start.
        if self.high_watermark < self.log.log_start_offset:
            self.high_watermark = self.log.log_start_offset
        self.record_change()

    def record_change(self) -> None:
        if self.journal is not None:
            self.journal.record(self.session_key)
