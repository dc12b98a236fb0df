"""OffsetDelete (v0): remove a group's committed offsets for some partitions. Refused with
GROUP_SUBSCRIBED_TO_TOPIC while the group has members subscribed to the topic."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetDeleteResponse as R

from ..groups.state import GroupState as S
from ..groups.subscriptions import subscribed_topics
from ..groups.writes import append_records
from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import OUTCOME_ERRORS, answer_after_write, checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    group_id = request.group_id
    error = checked_group(ctx, coordinator, peer, Operation.DELETE, group_id, now_ms)
    group = coordinator.group(group_id) if not error else None
    if not error and group is None and group_id not in coordinator.offsets:
        error = ErrorCode.GROUP_ID_NOT_FOUND
    if error:
        return Respond(R(error_code=error, throttle_time_ms=0, topics=[]))
    subscribed = subscribed_topics(group) if group is not None and not group.is_(S.EMPTY) else set()
    codes, keys = {}, []
    for t in request.topics:
        readable = ctx.authorizer.allows(peer, Operation.READ, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            if not readable:
                codes[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif t.name in subscribed:
                codes[(t.name, p.partition_index)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                keys.append((t.name, p.partition_index))

    def response(code=ErrorCode.NONE):
        return R(error_code=0, throttle_time_ms=0, topics=[R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            R.OffsetDeleteResponsePartition(partition_index=p.partition_index,
                                            error_code=codes.get((t.name, p.partition_index), code))
            for p in t.partitions]) for t in request.topics])
    records = coordinator.delete_offsets(group_id, keys)
    if not records:
        return Respond(response())
    partition = coordinator.partition_of(group_id)
    end = append_records(ctx, partition, records, now_ms)
    return answer_after_write(ctx, partition, end, coordinator.settings.offset_commit_timeout_ms, now_ms,
                              lambda outcome, done_ms: response(OUTCOME_ERRORS[outcome]))
