"""LeaveGroup (v0-5; batched members from v3): members leave at once, without waiting out
their session; the group rebalances."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import LeaveGroupResponse

from ..groups.rebalance import maybe_complete_join, remove_member
from ..metadata.acls import Operation
from ..outcomes import Respond
from .group_common import checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    version = header.request_api_version
    leaving = ([(request.member_id, None)] if version < 3
               else [(m.member_id, m.group_instance_id) for m in request.members])
    error = checked_group(ctx, coordinator, peer, Operation.READ, request.group_id, now_ms)
    if error:
        return Respond(_response(version, error, leaving, [error] * len(leaving)))
    group = coordinator.group(request.group_id)
    codes = []
    for member_id, instance_id in leaving:
        codes.append(_leave(ctx, coordinator, group, member_id, instance_id, now_ms))
    top = codes[0] if version < 3 and codes else ErrorCode.NONE
    return Respond(_response(version, top, leaving, codes))


def _leave(ctx, coordinator, group, member_id, instance_id, now_ms) -> ErrorCode:
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if instance_id is not None:
        known = group.static_members.get(instance_id)
        if known is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_id and member_id != known:
            return ErrorCode.FENCED_INSTANCE_ID
        member_id = known
    timer = group.pending_members.pop(member_id, None)
    if timer is not None:
        timer.cancel()
        ctx.purgatory.wake(maybe_complete_join(coordinator, group, now_ms))
        return ErrorCode.NONE
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    ctx.purgatory.wake(remove_member(coordinator, group, member_id, now_ms, "left the group"))
    return ErrorCode.NONE


def _response(version, top, leaving, codes):
    if version < 3:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=[
        LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=c)
        for (m, i), c in zip(leaving, codes)])
