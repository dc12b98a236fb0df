"""SyncGroup (v0-5): the leader hands in the assignment, every member gets its own.

The leader's assignment is stored (a GroupMetadata record) before anyone is answered, so a
coordinator that takes over after a crash hands out the same assignment."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..groups.rebalance import DelayedSync, sync_answer, sync_error
from ..groups.rebalance import touch
from ..groups.state import GroupState as S
from ..metadata.acls import Operation
from ..outcomes import Park, Respond
from .group_common import checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    error = checked_group(ctx, coordinator, peer, Operation.READ, request.group_id, now_ms)
    if error:
        return Respond(sync_error(error))
    group = coordinator.group(request.group_id)
    member = group.members.get(request.member_id) if group is not None else None
    if member is None:
        return Respond(sync_error(ErrorCode.UNKNOWN_MEMBER_ID))
    if request.group_instance_id is not None and group.static_members.get(request.group_instance_id) != member.member_id:
        return Respond(sync_error(ErrorCode.FENCED_INSTANCE_ID))
    if request.generation_id != group.generation:
        return Respond(sync_error(ErrorCode.ILLEGAL_GENERATION))
    if ((request.protocol_type is not None and request.protocol_type != group.protocol_type)
            or (request.protocol_name is not None and request.protocol_name != group.protocol_name)):
        return Respond(sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    touch(member, now_ms)
    partition = coordinator.partition_of(group.group_id)
    if (group.is_(S.COMPLETING_REBALANCE) and member.member_id == group.leader_id
            and group.sync_write_end is None):
        assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
        group.pending_assignments = {m: assignments.get(m, b"") for m in group.members}
        for member_id, m in group.members.items():
            m.assignment = group.pending_assignments[member_id]  # the record carries them
        group.sync_write_end = coordinator.write_group(group, now_ms)
    op = DelayedSync(coordinator, group, member, request.generation_id, partition,
                     now_ms + max(member.rebalance_timeout_ms, member.session_timeout_ms))
    answer = sync_answer(coordinator, group, member, request.generation_id, partition)
    if answer is not None:
        member.awaiting_sync = False
        if group.is_(S.STABLE):
            ctx.purgatory.wake([group.key])
        return Respond(answer)
    return Park(ctx.purgatory.park(op))
