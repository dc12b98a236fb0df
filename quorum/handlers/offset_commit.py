"""OffsetCommit (v0-9): store offsets with their leader epoch (KIP-320), metadata and commit
time as records in the group's `__consumer_offsets` partition; answered once committed.

Members commit within their generation; a commit with generation -1 and no member id (a
consumer using assign(), or an admin tool) is accepted while the group has no members.
Authorization (Kafka's): READ on the group, else GROUP_AUTHORIZATION_FAILED for everything;
READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetCommitResponse

from ..groups.offsets_topic import OffsetEntry, offset_key, offset_value
from ..groups.retention import topic_exists
from ..groups.state import GroupState as S
from ..groups.writes import append_records
from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import OUTCOME_ERRORS, answer_after_write, checked_group, coordinator_of

TopicOut = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionOut = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    error = checked_group(ctx, coordinator, peer, Operation.READ, request.group_id, now_ms)
    if error == ErrorCode.NONE:
        error = _member_error(coordinator, request, now_ms)
    if error:
        return Respond(_response(request, lambda t, p: error))
    settings = coordinator.settings
    codes: dict[tuple[str, int], ErrorCode] = {}
    entries: dict[tuple[str, int], OffsetEntry] = {}
    for topic in request.topics:
        readable = ctx.authorizer.allows(peer, Operation.READ, ResourceType.TOPIC, topic.name)
        exists = readable and topic_exists(ctx, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not readable:
                codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not exists:
                codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif p.committed_metadata is not None and len(p.committed_metadata.encode()) > settings.offset_metadata_max_bytes:
                codes[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                stamp = p.commit_timestamp if header.request_api_version == 1 and p.commit_timestamp >= 0 \
                    else ctx.wall.at(now_ms)
                entries[key] = OffsetEntry(p.committed_offset, p.committed_leader_epoch,
                                           p.committed_metadata or "", stamp)
    if not entries:
        return Respond(_response(request, lambda t, p: codes[(t, p)]))
    group_id = request.group_id
    partition = coordinator.partition_of(group_id)
    records = [(offset_key(group_id, t, p), offset_value(e)) for (t, p), e in entries.items()]
    end = append_records(ctx, partition, records, now_ms)

    def finish(outcome, done_ms):
        if outcome == "committed":
            coordinator.apply_commits(group_id, entries)
        code = OUTCOME_ERRORS[outcome]
        return _response(request, lambda t, p: codes.get((t, p), code))
    return answer_after_write(ctx, partition, end, settings.offset_commit_timeout_ms, now_ms, finish)


def _member_error(coordinator, request, now_ms) -> ErrorCode:
    group = coordinator.group(request.group_id)
    generation = request.generation_id_or_member_epoch
    if group is None or group.is_(S.EMPTY):
        if generation < 0:
            if group is None and not coordinator.room_for(request.group_id):  # max_groups
                return ErrorCode.GROUP_MAX_SIZE_REACHED
            coordinator.get_or_create(request.group_id, now_ms)  # an offsets-only group
            return ErrorCode.NONE
        return ErrorCode.ILLEGAL_GENERATION if group is None or not request.member_id else ErrorCode.UNKNOWN_MEMBER_ID
    member = group.members.get(request.member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if request.group_instance_id is not None and group.static_members.get(request.group_instance_id) != member.member_id:
        return ErrorCode.FENCED_INSTANCE_ID
    if group.is_(S.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def _response(request, code_of):
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicOut(name=t.name, partitions=[PartitionOut(partition_index=p.partition_index,
                                                       error_code=code_of(t.name, p.partition_index))
                                          for p in t.partitions])
        for t in request.topics])
