"""Heartbeat (v0-4): a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import HeartbeatResponse

from ..groups.rebalance import touch
from ..groups.state import GroupState as S
from ..metadata.acls import Operation
from ..outcomes import Respond
from .group_common import checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    return Respond(HeartbeatResponse(throttle_time_ms=0, error_code=_check(ctx, request, now_ms, peer)))


def _check(ctx, request, now_ms, peer) -> ErrorCode:
    coordinator = coordinator_of(ctx)
    error = checked_group(ctx, coordinator, peer, Operation.READ, request.group_id, now_ms)
    if error:
        return error
    group = coordinator.group(request.group_id)
    member = group.members.get(request.member_id) if group is not None else None
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if request.group_instance_id is not None and group.static_members.get(request.group_instance_id) != member.member_id:
        return ErrorCode.FENCED_INSTANCE_ID
    touch(member, now_ms)
    if group.is_(S.PREPARING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    if request.generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE
