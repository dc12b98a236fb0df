"""JoinGroup (v0-9): enter a classic group's rebalance.

A first join without a member id gets one back with MEMBER_ID_REQUIRED (KIP-394, v4+) and
joins again with it; a static member (group.instance.id, KIP-345) that rejoins without its
member id replaces its old one, without a rebalance unless the group's protocol would change.
The answer waits for the join phase to end (every member rejoined, or the rebalance timeout;
the first generation also waits out group_initial_rebalance_delay_ms)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..groups.group import Member
from ..groups.rebalance import (DelayedJoin, add_member_and_rebalance, add_pending, join_error, join_response,
                                maybe_complete_join, prepare_rebalance, start_session, touch)
from ..groups.state import GroupState as S
from ..metadata.acls import Operation
from ..outcomes import Park, Respond
from .group_common import checked_group, coordinator_of

JOIN_GRACE_MS = 5000  # a parked join is answered by its group's deadline; this is a backstop


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    error = checked_group(ctx, coordinator, peer, Operation.READ, request.group_id, now_ms)
    if error:
        return Respond(join_error(error, request.member_id))
    settings = coordinator.settings
    if not settings.group_min_session_timeout_ms <= request.session_timeout_ms <= settings.group_max_session_timeout_ms:
        return Respond(join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id))
    rebalance_timeout = request.rebalance_timeout_ms if request.rebalance_timeout_ms > 0 else request.session_timeout_ms
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    member_id = request.member_id
    group = coordinator.group(request.group_id)
    if group is None:
        if member_id:
            return Respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        if not coordinator.room_for(request.group_id):  # max_groups
            return Respond(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        group = coordinator.get_or_create(request.group_id, now_ms)
    if not group.supports(request.protocol_type, protocols):
        return Respond(join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
    instance_id = request.group_instance_id
    new = Member(member_id, instance_id, header.client_id or "", _host(peer), request.session_timeout_ms,
                 rebalance_timeout, request.protocol_type, protocols)

    if not member_id:
        if instance_id is not None and instance_id in group.static_members:
            return _static_rejoin(ctx, coordinator, group, new, now_ms)
        if len(group.members) + len(group.pending_members) >= settings.group_max_size:
            ctx.refusals.refuse("group_members")
            return Respond(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED))
        new.member_id = coordinator.new_member_id(header.client_id or "consumer")
        if instance_id is None and header.request_api_version >= 4:
            add_pending(coordinator, group, new.member_id, request.session_timeout_ms, now_ms)
            return Respond(join_error(ErrorCode.MEMBER_ID_REQUIRED, new.member_id))
        return _park(ctx, coordinator, group, new, now_ms, add=True)

    if member_id in group.pending_members:
        group.pending_members.pop(member_id).cancel()
        return _park(ctx, coordinator, group, new, now_ms, add=True)
    member = group.members.get(member_id)
    if member is None:
        return Respond(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
    if instance_id is not None and group.static_members.get(instance_id) != member_id:
        return Respond(join_error(ErrorCode.FENCED_INSTANCE_ID, member_id))
    touch(member, now_ms)
    if group.is_(S.PREPARING_REBALANCE):
        _update(member, new)
        return _park(ctx, coordinator, group, member, now_ms)
    if group.is_(S.COMPLETING_REBALANCE):
        if member.same_protocols(protocols):  # a retried join: the same answer again
            return Respond(_current(group, member_id))
        _update(member, new)
        prepare_rebalance(coordinator, group, now_ms, f"{member_id} changed its protocols")
        return _park(ctx, coordinator, group, member, now_ms)
    # Stable: the leader rejoining, or changed protocols, start a rebalance; otherwise the
    # member learns the current generation.
    if member_id == group.leader_id or not member.same_protocols(protocols):
        _update(member, new)
        prepare_rebalance(coordinator, group, now_ms, f"{member_id} rejoined")
        return _park(ctx, coordinator, group, member, now_ms)
    return Respond(_current(group, member_id))


def _park(ctx, coordinator, group, member, now_ms, add=False):
    op = DelayedJoin(coordinator, group, member, now_ms + member.rebalance_timeout_ms + JOIN_GRACE_MS)
    if add:
        ctx.purgatory.wake(add_member_and_rebalance(coordinator, group, member, now_ms, f"{member.member_id} joined"))
    ctx.purgatory.wake(maybe_complete_join(coordinator, group, now_ms))
    answer = op.try_complete(now_ms)
    if answer is not None:
        return Respond(answer)
    return Park(ctx.purgatory.park(op))


def _static_rejoin(ctx, coordinator, group, new: Member, now_ms):
    """KIP-345: the instance's old member id is replaced; its parked requests are fenced."""
    old_id = group.static_members[new.instance_id]
    old = group.members[old_id]
    new.member_id = coordinator.new_member_id(new.instance_id)
    new.assignment = old.assignment
    was_leader = group.leader_id == old_id
    group.remove(old_id)
    ctx.purgatory.wake([group.key])  # the old id's parked join/sync now fail
    group.add(new)
    if was_leader:
        group.leader_id = new.member_id
    start_session(coordinator, group, new, now_ms)
    # Kafka's rule: only a change of the group's protocol rebalances. The metadata bytes may
    # differ (a restarted client's subscription no longer lists owned partitions or its old
    # generation), which is not a reason to move partitions.
    if group.is_(S.STABLE) and not was_leader and group.select_protocol() == group.protocol_name:
        coordinator.write_group(group, now_ms)
        return Respond(_current(group, new.member_id))
    if not group.is_(S.PREPARING_REBALANCE):
        prepare_rebalance(coordinator, group, now_ms, f"static member {new.instance_id} rejoined")
    return _park(ctx, coordinator, group, new, now_ms)


def _current(group, member_id):
    return join_response(group, member_id, [])


def _update(member: Member, new: Member) -> None:
    member.protocols = new.protocols
    member.session_timeout_ms = new.session_timeout_ms
    member.rebalance_timeout_ms = new.rebalance_timeout_ms
    member.client_id = new.client_id
    member.client_host = new.client_host


def _host(peer) -> str:
    """Kafka's client host as DescribeGroups shows it: "/127.0.0.1"."""
    return "/" + peer.host if peer.address else ""
