"""The group coordinator of one node: which `__consumer_offsets` partitions it leads, the
groups and committed offsets loaded from them, and the writes that change them.

A partition's state is its KeyValueStateMachine (snapshot + committed tail, KIP-630). When
this node starts leading a partition, the first request for one of its groups loads that
state into groups and an offset index (COORDINATOR_LOAD_IN_PROGRESS until the new epoch's
start is committed, so the state is complete); a partition led by another node answers
NOT_COORDINATOR. Rebalances live in `rebalance.py`, sessions in `sessions.py`.
"""
from __future__ import annotations

import logging
import uuid
from typing import Callable

from ...protocol.errors import ErrorCode
from ...protocol.messages import GroupMetadataValue

from ..metadata.leaders import partition_leader
from ..topics import TopicError
from .group import Group, Member
from .offsets_topic import (OFFSETS_TOPIC, OffsetEntry, decode_group_value, decode_key, decode_offset_value,
                            group_key, group_value, offset_key, partition_for)
from .rebalance import start_session
from .retention import start_retention
from .settings import GroupSettings
from .state import GroupState
from .writes import append_records

log = logging.getLogger(__name__)
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "snapshot", "segment.bytes": str(100 * 1024 * 1024)}


class GroupCoordinator:
    def __init__(self, ctx, settings: GroupSettings | None = None, new_member_id: Callable | None = None,
                 clock: Callable | None = None) -> None:
        self.ctx = ctx
        self.settings = settings or GroupSettings.from_node_config(ctx.config)
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetEntry]] = {}
        self.loaded: dict[int, int] = {}  # partition index -> the leader epoch its state was loaded at
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self._clock = clock or ctx.clock  # monotonic seconds, only to measure load times
        # Metrics, drained or read by the shell.
        self.rebalances_total = 0
        self.offset_commits_total = 0
        self.load_times_ms: list[float] = []
        self._retention_timer = None

    # -- routing ------------------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        topic = self.ctx.topics.get(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        plane = self.ctx.plane
        info = plane.image.topic(OFFSETS_TOPIC) if plane is not None else None
        return len(info.partitions) if info is not None else self.settings.offsets_topic_num_partitions

    def partition_index(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> ErrorCode:
        """Create `__consumer_offsets` on the first FindCoordinator, as Kafka does."""
        ctx = self.ctx
        if ctx.topics.get(OFFSETS_TOPIC) is not None:
            return ErrorCode.NONE
        plane = ctx.plane
        if plane is not None and plane.image.topic(OFFSETS_TOPIC) is not None:
            return ErrorCode.NONE
        try:
            ctx.create_topic(OFFSETS_TOPIC, self.settings.offsets_topic_num_partitions, dict(OFFSETS_TOPIC_CONFIGS))
        except TopicError as exc:
            if exc.error_name == "TOPIC_ALREADY_EXISTS":
                return ErrorCode.NONE
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def coordinator_node(self, group_id: str) -> int:
        """The node leading the group's partition, or -1."""
        index = self.partition_index(group_id)
        local = self.ctx.topics.partition(OFFSETS_TOPIC, index)
        plane = self.ctx.plane
        if plane is None:
            return local.leader_id if local is not None and local.raft is not None else -1
        info = plane.image.topic(OFFSETS_TOPIC)
        if info is None or index not in info.partitions:
            return -1
        return partition_leader(self.ctx, plane.image, OFFSETS_TOPIC, info.partitions[index])[0]

    def partition_of(self, group_id: str):
        return self.ctx.topics.partition(OFFSETS_TOPIC, self.partition_index(group_id))

    def check(self, group_id: str, now_ms: int) -> ErrorCode:
        """NONE if this node coordinates the group and its partition's state is loaded."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_of(group_id)
        if partition is None or partition.raft is None or not partition.is_leader:
            return ErrorCode.NOT_COORDINATOR
        if partition.high_watermark < partition.raft.role.epoch_start_offset:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition.snapshots is None:
            # Not a snapshot-policy topic (made by hand, or by an older version): no state to load.
            log.error("%s-%d is not a snapshot-policy topic: cannot coordinate groups", OFFSETS_TOPIC, partition.index)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.loaded.get(partition.index) != partition.leader_epoch:
            self._load(partition, now_ms)
        return ErrorCode.NONE

    def led_partitions(self, now_ms: int) -> list[int]:
        """Indexes of the offsets partitions this node leads and has loaded (ListGroups)."""
        topic = self.ctx.topics.get(OFFSETS_TOPIC)
        out = []
        for partition in (topic.partitions if topic is not None else []):
            if partition is not None and partition.raft is not None and partition.is_leader and partition.snapshots:
                if partition.high_watermark >= partition.raft.role.epoch_start_offset:
                    if self.loaded.get(partition.index) != partition.leader_epoch:
                        self._load(partition, now_ms)
                    out.append(partition.index)
        return out

    # -- loading (snapshot + committed tail, already applied by the state machine) ---------------
    def _load(self, partition, now_ms: int) -> None:
        started = self._clock() if self._clock else None
        index = partition.index
        for group_id in [g for g, group in self.groups.items() if group.partition == index]:
            self._forget(group_id)
        for group_id in [g for g in self.offsets if self.partition_index(g) == index]:
            del self.offsets[group_id]
        snapshots = partition.snapshots
        snapshots.catch_up()
        for key, value in snapshots.machine.state.items():
            decoded = decode_key(key)
            if decoded is None:
                continue
            if decoded[0] == "offset":
                _, group_id, topic, p = decoded
                self.offsets.setdefault(group_id, {})[(topic, p)] = decode_offset_value(value)
                if group_id not in self.groups:
                    self.groups[group_id] = Group(group_id, index, protocol_type="")
            else:
                group = self._group_from_record(decoded[1], index, decode_group_value(value), now_ms)
                self.groups[group.group_id] = group
                for member in group.members.values():
                    start_session(self, group, member, now_ms)
        self.loaded[index] = partition.leader_epoch
        if started is not None:
            self.load_times_ms.append((self._clock() - started) * 1000.0)
        log.info("loaded __consumer_offsets-%d at epoch %d: %d groups", index, partition.leader_epoch,
                 sum(1 for g in self.groups.values() if g.partition == index))

    def _group_from_record(self, group_id: str, index: int, value, now_ms: int) -> Group:
        group = Group(group_id, index, generation=value.generation, protocol_type=value.protocol_type,
                      protocol_name=value.protocol, leader_id=value.leader,
                      state_timestamp_ms=self.ctx.wall.to_core(value.current_state_timestamp, now_ms))
        for m in value.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.session_timeout,
                            m.rebalance_timeout, value.protocol_type,
                            [(value.protocol, bytes(m.subscription))], assignment=bytes(m.assignment))
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def _forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member in group.members.values():
            if member.timer is not None:
                member.timer.cancel()
        for timer in group.pending_members.values():
            timer.cancel()
        if group.join_timer is not None:
            group.join_timer.cancel()

    # -- groups --------------------------------------------------------------------------------
    def group(self, group_id: str) -> Group | None:
        group = self.groups.get(group_id)
        return None if group is None or group.state is GroupState.DEAD else group

    def room_for(self, group_id: str) -> bool:
        """May `group_id` be created? False (counted) once `max_groups` groups are held."""
        if group_id in self.groups or len(self.groups) < self.settings.max_groups:
            return True
        self.ctx.refusals.refuse("groups")
        return False

    def get_or_create(self, group_id: str, now_ms: int) -> Group:
        group = self.group(group_id)
        if group is None:
            group = Group(group_id, self.partition_index(group_id), state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        return group

    def new_member_id(self, client_id: str) -> str:
        return self._new_member_id(client_id)

    def group_record(self, group: Group, now_ms: int) -> tuple[bytes, bytes]:
        M = GroupMetadataValue.MemberMetadata
        members = [M(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                     client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                     session_timeout=m.session_timeout_ms,
                     subscription=m.metadata_for(group.protocol_name or ""), assignment=m.assignment)
                   for m in group.members.values()]
        value = GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation,
                                   protocol=group.protocol_name, leader=group.leader_id,
                                   current_state_timestamp=self.ctx.wall.at(now_ms),
                                   members=members)
        return group_key(group.group_id), group_value(value)

    def write_group(self, group: Group, now_ms: int) -> int | None:
        """Store the group's metadata; returns the offset to wait for (None: not leading)."""
        partition = self.partition_of(group.group_id)
        if partition is None or partition.raft is None or not partition.is_leader:
            return None
        return append_records(self.ctx, partition, [self.group_record(group, now_ms)], now_ms)

    # -- offsets -------------------------------------------------------------------------------
    def committed(self, group_id: str, topic: str, index: int) -> OffsetEntry | None:
        return self.offsets.get(group_id, {}).get((topic, index))

    def apply_commits(self, group_id: str, entries: dict) -> None:
        if entries:
            self.offsets.setdefault(group_id, {}).update(entries)
            self.offset_commits_total += len(entries)

    def delete_offsets(self, group_id: str, keys) -> list:
        """Tombstones for these (topic, partition) offsets; forgets them at once."""
        stored = self.offsets.get(group_id, {})
        out = []
        for topic, index in keys:
            if stored.pop((topic, index), None) is not None:
                out.append((offset_key(group_id, topic, index), None))
        if not stored:
            self.offsets.pop(group_id, None)
        return out

    def delete_group(self, group_id: str, now_ms: int) -> list:
        """Tombstones for an empty group and its offsets; the group is Dead from now on."""
        group = self.groups.get(group_id)
        records = self.delete_offsets(group_id, list(self.offsets.get(group_id, {})))
        records.append((group_key(group_id), None))
        if group is not None:
            group.transition(GroupState.DEAD, now_ms)
            self._forget(group_id)
        return records

    # -- metrics -------------------------------------------------------------------------------
    def stats(self) -> dict:
        states = {s.value: 0 for s in GroupState if s is not GroupState.DEAD}
        members = 0
        for group in self.groups.values():
            if group.state is not GroupState.DEAD:
                states[group.state.value] += 1
                members += len(group.members)
        return {"groups": states, "members": members, "rebalances_total": self.rebalances_total,
                "offset_commits_total": self.offset_commits_total}

    def drain_load_times(self) -> list[float]:
        out, self.load_times_ms = self.load_times_ms, []
        return out


def coordinator_of(ctx) -> GroupCoordinator:
    """The node's coordinator, made on first use (it holds no state until a group appears)."""
    coordinator = ctx.groups
    if coordinator is None:
        coordinator = ctx.groups = GroupCoordinator(ctx)
        start_retention(coordinator)
    return coordinator
