"""What the node reports to /metrics: the metadata quorum and its leaderships, partitions'
offsets, snapshots, fetch sessions, consumer groups, parked requests and latency samples."""
from __future__ import annotations

from .handlers.context import HandlerContext
from .housekeeping import Housekeeping
from .purgatory import Purgatory
from .snapshots.coordination import SnapshotCoordination


class NodeStats:
    def __init__(self, ctx: HandlerContext, hooks, housekeeping: Housekeeping, snapshots: SnapshotCoordination,
                 purgatory: Purgatory, compaction=None) -> None:
        self._ctx = ctx
        self._hooks = hooks
        self._housekeeping = housekeeping
        self._snapshots = snapshots
        self._purgatory = purgatory
        self._compaction = compaction
        self.now_ms = lambda: 0  # the time of the node's latest call

    def metrics_values(self) -> dict:
        """Exposed as kraftd_<key> by the shell's /metrics (a counter when it ends in _total)."""
        values = {"producer_ids_expired_total": self._housekeeping.producer_ids_expired,
                  "producer_states": self.producer_state_count(),
                  "parked_requests": len(self._purgatory),
                  # sent to replicas a partition move adds, and reads the move throttle held back
                  "reassignment_bytes_total": self._ctx.move_throttle.sent_bytes,
                  "reassignment_throttled_total": self._ctx.move_throttle.throttled}
        if self._compaction is not None:
            values.update(self._compaction.stats(self.now_ms()))
        return values

    def producer_state_count(self) -> int:
        return sum(len(p.log.producer_state) for p in self._ctx.topics.partitions())

    def cluster_stats(self) -> dict:
        """Gauges: the metadata quorum and this node's leaderships."""
        plane = self._ctx.plane
        stats = {"metadata_leader_id": plane.leader_id if plane else -1,
                 "metadata_epoch": plane.epoch if plane else -1,
                 "leader_partitions": 0, "under_replicated_partitions": 0, "offline_partitions": 0,
                 "partitions": []}
        now = self.now_ms()
        for group in self._ctx.replication.groups.values():
            partition = group.partition
            stats["partitions"].append({"topic": partition.topic, "partition": partition.index,
                                        "leader_epoch": group.epoch, "is_leader": group.is_leader})
            if not group.is_leader or (plane is not None and partition is plane.partition):
                continue
            stats["leader_partitions"] += 1
            if plane is not None and len(plane.isr_of(group, now)) < len(group.voters):
                stats["under_replicated_partitions"] += 1
        controller = plane.active_controller() if plane else None
        if controller is not None:
            stats["offline_partitions"] = controller.offline_partitions()
        return stats

    def drain_raft_latencies(self) -> tuple[list[float], list[float]]:
        """(election, commit) latency samples in ms since the last call (the /metrics scrape)."""
        elections, commits = list(self._hooks.election_latencies), list(self._ctx.commit_latencies)
        self._hooks.election_latencies.clear()
        self._ctx.commit_latencies.clear()
        return elections, commits

    def group_stats(self) -> dict | None:
        """Consumer groups (None until this node has served a group request)."""
        coordinator = self._ctx.groups
        if coordinator is None:
            return None
        return {**coordinator.stats(), "load_times_ms": coordinator.drain_load_times()}

    def fetch_session_stats(self) -> dict:
        cache = self._ctx.fetch_sessions
        return {"sessions": len(cache), "partitions_cached": cache.partitions_cached, "evictions": cache.evictions}

    def snapshot_stats(self) -> list[dict]:
        return self._snapshots.stats()

    def partition_offsets(self) -> list[dict]:
        return [
            {"topic": p.topic, "partition": p.index, "log_start_offset": p.log_start_offset,
             "log_end_offset": p.log_end_offset, "high_watermark": p.high_watermark}
            for p in self._ctx.topics.partitions()
        ]
