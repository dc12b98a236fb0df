"""The node's periodic chores: retention (delete policy, leaders only), forgetting idle
producers, and moving snapshot partitions' log starts once lagging replicas are no longer live."""
from __future__ import annotations

import logging

from .node_config import NodeConfig
from .snapshots.coordination import SnapshotCoordination
from .topics import TopicRegistry
from .wall_clock import WallClock

log = logging.getLogger(__name__)
LOG_START_GATE_INTERVAL_MS = 1000


class Housekeeping:
    def __init__(self, config: NodeConfig, topics: TopicRegistry, snapshots: SnapshotCoordination,
                 wall: WallClock | None = None) -> None:
        self._wall = wall or WallClock()
        self._config = config
        self._topics = topics
        self._snapshots = snapshots
        self._next_retention_ms = 0
        self._next_gate_ms = 0
        self._next_producer_expiry_ms = 0
        self.producer_ids_expired = 0  # kraftd_producer_ids_expired_total

    def poll(self, now_ms: int) -> None:
        config = self._config
        if now_ms >= self._next_retention_ms:
            self._apply_retention(now_ms)
            self._next_retention_ms = now_ms + config.retention_check_interval_ms
            self._next_gate_ms = now_ms
        if now_ms >= self._next_producer_expiry_ms:
            self._expire_producers(now_ms)
            self._next_producer_expiry_ms = now_ms + config.producer_id_expiration_check_interval_ms
        if now_ms >= self._next_gate_ms:
            # Cheap (snapshot partitions only): a replica that went away stops holding back
            # the log start once it is no longer live, not at the next retention check.
            self._snapshots.gate_log_starts(now_ms)
            self._next_gate_ms = now_ms + LOG_START_GATE_INTERVAL_MS

    def deadlines(self) -> list[int]:
        deadlines = [self._next_retention_ms, self._next_producer_expiry_ms]
        if len(self._snapshots):
            deadlines.append(self._next_gate_ms)
        return deadlines

    def _expire_producers(self, now_ms: int) -> None:
        """producer_id_expiration_ms: idempotent producers idle that long are forgotten (a
        later batch of theirs must start at sequence 0 again, or gets UNKNOWN_PRODUCER_ID)."""
        expiration = self._config.producer_id_expiration_ms
        expired = 0
        for partition in self._topics.partitions():
            expired += partition.log.producer_state.expire_idle(now_ms, expiration)
        if expired:
            self.producer_ids_expired += expired
            log.info("expired %d idle producer states", expired)

    def _apply_retention(self, now_ms: int) -> None:
        wall_ms = self._wall.at(now_ms)  # retention.ms is measured against record timestamps
        for partition in self._topics.partitions():
            cfg = partition.config
            if not cfg.deletes or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
                continue
            if not partition.is_leader:
                continue  # followers take the leader's log start as they fetch
            partition.log.apply_retention(wall_ms, cfg.retention_ms, cfg.retention_bytes,
                                          max_offset=partition.high_watermark)
            partition.after_log_start_moved()
