"""Rebalances of a classic group: joining, the join phase's end, the leader's assignment, and
members leaving. Parked JoinGroup/SyncGroup requests watch the group's purgatory key; each
function here returns the keys to wake (or changes state the parked requests then read)."""
from __future__ import annotations

import logging

from ...protocol.errors import ErrorCode
from ...protocol.messages import JoinGroupResponse, SyncGroupResponse

from .group import Group, Member
from .state import GroupState

log = logging.getLogger(__name__)
S = GroupState


# -- the join phase ------------------------------------------------------------------------------
def prepare_rebalance(coordinator, group: Group, now_ms: int, reason: str) -> list:
    if group.is_(S.COMPLETING_REBALANCE):
        group.sync_write_end = None  # parked SyncGroups now get REBALANCE_IN_PROGRESS
        group.pending_assignments = None
    initial = group.is_(S.EMPTY)
    group.transition(S.PREPARING_REBALANCE, now_ms)
    group.rebalances += 1
    coordinator.rebalances_total += 1
    rebalance_ms = group.max_rebalance_timeout_ms()
    delay = coordinator.settings.group_initial_rebalance_delay_ms
    if initial and delay > 0:
        # Kafka's delayed initial rebalance: wait for more members before the first generation,
        # restarting the delay as members arrive, within the rebalance timeout.
        first = min(delay, rebalance_ms)
        group.in_initial_delay = True
        group.initial_delay_left_ms = max(rebalance_ms - first, 0)
        _arm_join_deadline(coordinator, group, now_ms + first)
    else:
        group.in_initial_delay = False
        _arm_join_deadline(coordinator, group, now_ms + rebalance_ms)
    log.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation, reason)
    return [group.key]


def _arm_join_deadline(coordinator, group: Group, deadline_ms: int) -> None:
    group.join_deadline_ms = deadline_ms
    if group.join_timer is not None:
        group.join_timer.cancel()
    group.join_timer = coordinator.ctx.purgatory.schedule(deadline_ms, lambda now: _join_deadline(coordinator, group, now))


def _join_deadline(coordinator, group: Group, now_ms: int):
    if coordinator.groups.get(group.group_id) is not group or not group.is_(S.PREPARING_REBALANCE):
        return None
    group.in_initial_delay = False
    if group.all_joined() or now_ms >= group.join_deadline_ms:
        return complete_join(coordinator, group, now_ms)
    return None


def extend_initial_delay(coordinator, group: Group, now_ms: int) -> None:
    """A new member during the initial delay restarts it, within what is left of the budget."""
    delay = min(coordinator.settings.group_initial_rebalance_delay_ms, group.initial_delay_left_ms)
    if delay > 0:
        group.initial_delay_left_ms -= delay
        _arm_join_deadline(coordinator, group, max(group.join_deadline_ms, now_ms + delay))


def maybe_complete_join(coordinator, group: Group, now_ms: int) -> list:
    if group.is_(S.PREPARING_REBALANCE) and not group.in_initial_delay and group.all_joined():
        return complete_join(coordinator, group, now_ms)
    return [group.key]


def complete_join(coordinator, group: Group, now_ms: int) -> list:
    """End the join phase: members that did not rejoin are dropped; a new generation starts."""
    if group.join_timer is not None:
        group.join_timer.cancel()
        group.join_timer = None
    for member in [m for m in group.members.values() if not m.awaiting_join]:
        group.remove(member.member_id)
    group.generation += 1
    if not group.members:
        group.protocol_name = None
        group.leader_id = None
        group.transition(S.EMPTY, now_ms)
        coordinator.write_group(group, now_ms)
        return [group.key]
    group.protocol_name = group.select_protocol()
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members))
    group.transition(S.COMPLETING_REBALANCE, now_ms)
    everyone = [JoinGroupResponse.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id,
                                                          metadata=m.metadata_for(group.protocol_name))
                for m in group.members.values()]
    for member in group.members.values():
        member.join_answer = join_response(group, member.member_id,
                                           everyone if member.member_id == group.leader_id else [])
        touch(member, now_ms)
    log.info("group %s: generation %d with %d members, protocol %s", group.group_id, group.generation,
             len(group.members), group.protocol_name)
    return [group.key]


def join_response(group: Group, member_id: str, members: list, error=ErrorCode.NONE) -> JoinGroupResponse:
    return JoinGroupResponse(throttle_time_ms=0, error_code=error, generation_id=group.generation,
                             protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                             leader=group.leader_id or "", member_id=member_id, members=members)


def join_error(error: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(throttle_time_ms=0, error_code=error, generation_id=-1, protocol_name="",
                             leader="", member_id=member_id, members=[])


class DelayedJoin:
    """A JoinGroup waiting for the join phase to end."""

    def __init__(self, coordinator, group: Group, member: Member, deadline_ms: int) -> None:
        self.coordinator, self.group, self.member = coordinator, group, member
        self.deadline_ms = deadline_ms
        member.awaiting_join = True

    def watch_keys(self):
        return [self.group.key]

    def try_complete(self, now_ms: int):
        group, member = self.group, self.member
        if self.coordinator.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            member.awaiting_join = False
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID if group.state is not S.DEAD
                              else ErrorCode.NOT_COORDINATOR, member.member_id)
        if member.join_answer is not None:
            answer, member.join_answer = member.join_answer, None
            member.awaiting_join = False
            return answer
        return None

    def expire(self, now_ms: int):
        self.member.awaiting_join = False
        return join_error(ErrorCode.REBALANCE_IN_PROGRESS, self.member.member_id)


# -- members -------------------------------------------------------------------------------------
def add_member_and_rebalance(coordinator, group: Group, member: Member, now_ms: int, reason: str) -> list:
    group.add(member)
    start_session(coordinator, group, member, now_ms)
    if group.is_(S.PREPARING_REBALANCE) and group.in_initial_delay:
        extend_initial_delay(coordinator, group, now_ms)
        return [group.key]
    return maybe_prepare_rebalance(coordinator, group, now_ms, reason)


def maybe_prepare_rebalance(coordinator, group: Group, now_ms: int, reason: str) -> list:
    if group.is_(S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY):
        return prepare_rebalance(coordinator, group, now_ms, reason)
    return [group.key]


def remove_member(coordinator, group: Group, member_id: str, now_ms: int, reason: str) -> list:
    member = group.remove(member_id)
    if member is None:
        return []
    log.info("group %s: member %s removed (%s)", group.group_id, member_id, reason)
    if group.is_(S.STABLE, S.COMPLETING_REBALANCE):
        return prepare_rebalance(coordinator, group, now_ms, f"{member_id} left ({reason})")
    if group.is_(S.PREPARING_REBALANCE):
        return maybe_complete_join(coordinator, group, now_ms)
    return [group.key]


# -- the sync phase ------------------------------------------------------------------------------
def sync_error(error: ErrorCode) -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=error, assignment=b"")


def sync_answer(coordinator, group: Group, member: Member, generation: int, partition):
    """The answer for a SyncGroup of this member now, or None to keep waiting."""
    if coordinator.groups.get(group.group_id) is not group or group.state is S.DEAD:
        return sync_error(ErrorCode.NOT_COORDINATOR)
    if group.members.get(member.member_id) is not member:
        return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
    if group.generation != generation or group.is_(S.PREPARING_REBALANCE, S.EMPTY):
        return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
    if group.is_(S.COMPLETING_REBALANCE) and group.sync_write_end is not None:
        if not partition.is_leader:
            return sync_error(ErrorCode.NOT_COORDINATOR)
        if partition.high_watermark >= group.sync_write_end:
            finish_sync(group, now_ms=None)
    if group.is_(S.STABLE):
        return SyncGroupResponse(throttle_time_ms=0, error_code=0, protocol_type=group.protocol_type,
                                 protocol_name=group.protocol_name, assignment=member.assignment)
    return None


def finish_sync(group: Group, now_ms) -> None:
    """The leader's assignment is committed: hand it out, the group is Stable."""
    for member_id, member in group.members.items():
        member.assignment = group.pending_assignments.get(member_id, b"")
    group.pending_assignments = None
    group.sync_write_end = None
    group.transition(S.STABLE, group.state_timestamp_ms if now_ms is None else now_ms)


class DelayedSync:
    """A SyncGroup waiting for the leader's assignment to be committed."""

    def __init__(self, coordinator, group: Group, member: Member, generation: int, partition, deadline_ms: int):
        self.coordinator, self.group, self.member = coordinator, group, member
        self.generation, self.partition = generation, partition
        self.deadline_ms = deadline_ms
        member.awaiting_sync = True

    def watch_keys(self):
        return [self.group.key, self.partition.key]

    def try_complete(self, now_ms: int):
        answer = sync_answer(self.coordinator, self.group, self.member, self.generation, self.partition)
        if answer is not None:
            self.member.awaiting_sync = False
        return answer

    def expire(self, now_ms: int):
        self.member.awaiting_sync = False
        return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)


# -- member liveness: one timer per member (its session) and per KIP-394 pending member id ---------
# A member is alive while it heartbeats within its session timeout, or while a JoinGroup or
# SyncGroup of its is parked (Kafka keeps those alive too). A timer that fires early (the member
# heartbeated since) re-arms itself at the new deadline, so a heartbeat costs no heap entry.

def start_session(coordinator, group, member, now_ms: int) -> None:
    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
    if member.timer is None or member.timer.cancelled:
        _arm(coordinator, group, member, member.heartbeat_deadline_ms)


def touch(member, now_ms: int) -> None:
    """A heartbeat, join or sync: the session restarts."""
    member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms


def _arm(coordinator, group, member, deadline_ms: int) -> None:
    purgatory = coordinator.ctx.purgatory
    member.timer = purgatory.schedule(deadline_ms, lambda now: _expired(coordinator, group, member, now))


def _expired(coordinator, group, member, now_ms: int):
    if coordinator.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
        return None
    if member.awaiting_join or member.awaiting_sync:
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
    if now_ms < member.heartbeat_deadline_ms:
        _arm(coordinator, group, member, member.heartbeat_deadline_ms)
        return None
    return remove_member(coordinator, group, member.member_id, now_ms, "session timeout")


def add_pending(coordinator, group, member_id: str, session_timeout_ms: int, now_ms: int) -> None:
    """KIP-394: a member id handed out with MEMBER_ID_REQUIRED, valid for one session timeout."""
    def expired(now):
        if group.pending_members.pop(member_id, None) is None:
            return None
        return maybe_complete_join(coordinator, group, now)
    old = group.pending_members.pop(member_id, None)
    if old is not None:
        old.cancel()
    group.pending_members[member_id] = coordinator.ctx.purgatory.schedule(now_ms + session_timeout_ms, expired)
