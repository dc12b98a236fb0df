"""What the Raft groups tell the node: a new epoch's LeaderChange batch to append, a follower's
appends and truncations to flush, HW movement to wake parked requests and feed snapshots, and
snapshot downloads to begin and install."""
from __future__ import annotations

from collections import deque
from typing import Callable

from .handlers.context import LATENCY_SAMPLES_KEPT
from .node_changes import NodeChanges
from .partition import Partition
from .raft.leader_change import leader_change_batch
from .raft.voter_set import voters_batch
from .snapshots.coordination import SnapshotCoordination
from .wall_clock import WallClock


class GroupHooks:
    def __init__(self, node_id: int, changes: NodeChanges, snapshots: SnapshotCoordination,
                 wall: WallClock | None = None) -> None:
        self._node_id = node_id
        self._wall = wall or WallClock()
        self._changes = changes
        self._snapshots = snapshots
        # ms from losing a leader to leading (groups here), until /metrics drains them
        self.election_latencies: deque = deque(maxlen=LATENCY_SAMPLES_KEPT)
        # (snapshots): a snapshot-policy partition's state caught up with its HW
        self.on_state_caught_up: Callable | None = None
        self.on_installed: Callable | None = None  # (partition, now_ms): a snapshot was installed

    def append_leader_change(self, group, now_ms: int, granting=()) -> None:
        partition = group.partition
        batch = leader_change_batch(self._node_id, group.epoch, group.voters, granting or (self._node_id,),
                                    self._wall.at(now_ms))
        partition.log.append_as_leader(batch, group.epoch, now_ms=now_ms)
        self._changes.appended(partition)
        partition.record_change()  # follower fetch sessions read up to the log end
        self._changes.wake([partition.key], now_ms)

    def append_voters(self, group, voter_set, now_ms: int) -> None:
        """A VotersRecord (after a KRaftVersionRecord the first time), as the group's leader."""
        partition = group.partition
        batch = voters_batch(voter_set, group.epoch, self._wall.at(now_ms),
                             with_version=not partition.log.voter_sets.latest())
        partition.log.append_as_leader(batch, group.epoch, now_ms=now_ms)
        self._changes.appended(partition)
        partition.record_change()
        self._changes.wake([partition.key], now_ms)

    def partition_changed(self, partition: Partition, *, hw: bool) -> None:
        partition.record_change()
        if hw:
            self.hw_moved([partition.key])
        else:
            self._changes.wake([partition.key])

    def hw_moved(self, keys) -> None:
        changes = self._changes
        changes.wake(keys)
        for key in keys:
            self._snapshots.hw_moved(key, self.on_state_caught_up)

    def follower_appended(self, partition: Partition) -> None:
        self._changes.appended(partition)

    def follower_truncated(self, partition: Partition) -> None:
        self._changes.appended(partition)
        partition.record_change()

    def follower_log_start(self, partition: Partition, leader_log_start: int) -> None:
        self._snapshots.follower_log_start(partition, leader_log_start)

    def begin_snapshot_download(self, partition: Partition, snapshot_id):
        return partition.snapshots.store.begin_download(snapshot_id)

    def install_snapshot(self, partition: Partition, snapshot_id, now_ms: int, prepared=None) -> None:
        self._snapshots.install(partition, snapshot_id, prepared)
        self._changes.appended(partition)
        if self.on_installed is not None:
            self.on_installed(partition, now_ms)
