"""Snapshots across a node's snapshot-policy partitions (KIP-630): which are due, the jobs the
shell runs in a worker thread, and when each partition's log start may move.

A leader moves its log start to its latest snapshot once every live replica has fetched past
it, or once `snapshot_start_offset_lag_time_max_ms` has passed; a follower takes the lesser of
the leader's log start and its own latest snapshot as it fetches.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator

from ..metadata.names import METADATA_TOPIC
from ..metadata.state_machine import MetadataStateMachine
from ..node_config import NodeConfig
from ..partition import Partition, PartitionKey
from .partition_snapshots import PartitionSnapshots, SnapshotJob

log = logging.getLogger(__name__)


class SnapshotCoordination:
    def __init__(self, config: NodeConfig, open_store: Callable | None, *, clustered: bool, check_quorum_ms: int,
                 clock: Callable[[], float] | None) -> None:
        self._config = config
        self._check_quorum_ms = check_quorum_ms  # a replica not heard from for this long is not live
        self._open_store = open_store
        self._clustered = clustered
        self._clock = clock  # monotonic seconds, only to report how long loading took
        self._by_key: dict[PartitionKey, PartitionSnapshots] = {}
        self._due: set[PartitionKey] = set()

    # -- the partitions' snapshot managers, by key ------------------------------------------------
    def __getitem__(self, key: PartitionKey) -> PartitionSnapshots:
        return self._by_key[key]

    def get(self, key: PartitionKey) -> PartitionSnapshots | None:
        return self._by_key.get(key)

    def items(self):
        return self._by_key.items()

    def values(self):
        return self._by_key.values()

    def __iter__(self) -> Iterator[PartitionKey]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def attach(self, partition: Partition) -> None:
        """Startup invariants and the state from the latest snapshot; the log tail is applied as
        the HW covers it (only committed records reach the state)."""
        machine = MetadataStateMachine() if partition.topic == METADATA_TOPIC and self._clustered else None
        snapshots = PartitionSnapshots(partition, self._open_store(partition.topic, partition.index), machine)
        started = self._clock() if self._clock else None
        for name in snapshots.recover():
            log.info("removed leftover snapshot file %s", name)
        snapshots.load()
        if started is not None:
            snapshots.load_ms = (self._clock() - started) * 1000.0
        partition.snapshots = snapshots
        self._by_key[partition.key] = snapshots
        if hasattr(partition.log, "cache_replicated"):
            partition.log.cache_replicated = True  # the state machine reads committed records back

    def forget(self, key: PartitionKey) -> None:
        self._by_key.pop(key, None)
        self._due.discard(key)

    # -- as the log moves -------------------------------------------------------------------------
    def hw_moved(self, key: PartitionKey, on_caught_up: Callable | None) -> None:
        """The state catches up with the new HW (then `on_caught_up(snapshots)`); a snapshot may
        fall due."""
        snapshots = self._by_key.get(key)
        if snapshots is not None:
            snapshots.catch_up()
            if on_caught_up is not None:
                on_caught_up(snapshots)
            if snapshots.due():
                self._due.add(key)

    def follower_log_start(self, partition: Partition, leader_log_start: int) -> None:
        """Followers advance to min(leader's log start, own HW) (KIP-630); a snapshot-policy
        follower only to one of its own snapshots, so its earliest snapshot sits at its log
        start and its state can always be rebuilt."""
        partition.leader_log_start = leader_log_start
        target = min(leader_log_start, partition.high_watermark)
        snapshots = partition.snapshots
        at = None
        if snapshots is not None:
            own = [sid for sid in snapshots.store.ids() if sid.end_offset <= target]
            if not own:
                return
            at = own[-1]
            target = at.end_offset
        if target > partition.log.log_start_offset:
            partition.log.advance_log_start(target)
            partition.after_log_start_moved()
            if at is not None:
                snapshots.store.delete_older_than(at)

    def install(self, partition: Partition, snapshot_id, prepared=None) -> None:
        """A downloaded snapshot is in place: the log restarts at its end, the state is loaded
        (`prepared`: decoded already, off the loop)."""
        snapshots = partition.snapshots
        partition.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        partition.log.epoch_cache.assign(snapshot_id.epoch, snapshot_id.end_offset)
        snapshots.seed_voters(snapshot_id)
        snapshots.load(prepared)
        if snapshot_id.end_offset > partition.high_watermark:
            partition.set_high_watermark(snapshot_id.end_offset)
        partition.after_log_start_moved()
        snapshots.store.delete_older_than(snapshot_id)

    # -- jobs: the shell runs job.run() in a worker thread ---------------------------------------
    def jobs(self) -> list[SnapshotJob]:
        if not self._due:  # the shell asks after every batch of requests
            return []
        jobs = []
        for key in sorted(self._due):
            snapshots = self._by_key.get(key)
            if snapshots is not None and snapshots.due():
                jobs.append(snapshots.start_job())
        self._due.clear()
        return jobs

    def on_done(self, job: SnapshotJob, now_ms: int, error: BaseException | None = None) -> None:
        snapshots = self._by_key.get(job.key)
        if snapshots is None:
            return
        snapshots.finish(job, error, now_ms)
        if error is not None:
            log.error("snapshot %s of %s-%s failed: %s", job.snapshot_id, *job.key, error)
        else:
            self.advance_log_start(snapshots, now_ms)
            if snapshots.due():
                self._due.add(job.key)

    def request(self, topic: str, index: int) -> bool:
        """`kraftd snapshot create`: snapshot now if anything is newer than the latest one."""
        snapshots = self._by_key.get((topic, index))
        if snapshots is None:
            return False
        snapshots.requested = True
        self._due.add((topic, index))
        return True

    # -- the log start ---------------------------------------------------------------------------
    def gate_log_starts(self, now_ms: int) -> None:
        """A replica that went away stops holding back the log start once it is no longer live."""
        for snapshots in self._by_key.values():
            latest = snapshots.latest
            if latest is not None and latest.end_offset > snapshots.partition.log.log_start_offset:
                self.advance_log_start(snapshots, now_ms)

    def advance_log_start(self, snapshots: PartitionSnapshots, now_ms: int) -> None:
        group = snapshots.partition.raft
        if not group.is_leader:
            # An idle partition's incremental fetches stop naming it once the leader's log
            # start has been sent: a snapshot of our own taken after that is our cue.
            partition = snapshots.partition
            if partition.leader_log_start > partition.log.log_start_offset:
                self.follower_log_start(partition, partition.leader_log_start)
            return
        latest = snapshots.latest
        if latest is None:
            return
        lagging = group.role.progress.min_live_offset(now_ms, self._check_quorum_ms, group.session_fetch_ms)
        waited = now_ms - snapshots.latest_taken_ms >= self._config.snapshot_start_offset_lag_time_max_ms
        if lagging is None or lagging >= latest.end_offset or waited:
            snapshots.advance_log_start()

    def stats(self) -> list[dict]:
        out = []
        for (topic, index), snapshots in self._by_key.items():
            latest = snapshots.latest
            out.append({"topic": topic, "partition": index, "lag": snapshots.lag(),
                        "size_bytes": snapshots.store.size(latest) if latest else 0,
                        "latest": latest, "load_ms": snapshots.load_ms})
        return out
