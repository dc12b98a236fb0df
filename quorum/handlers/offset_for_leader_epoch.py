"""OffsetForLeaderEpoch (v2–4): the end offset of a leader epoch, from the epoch cache. A
partition of a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import OffsetForLeaderEpochResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .context import find_partition

TopicOut = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
PartitionOut = OffsetForLeaderEpochResponse.EpochEndOffset


def handle(ctx, header, request, now_ms, peer):
    topics = []
    for t in request.topics:
        if ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.TOPIC, t.topic):
            partitions = [_end_offset(ctx, t.topic, p) for p in t.partitions]
        else:
            partitions = [_error(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
        topics.append(TopicOut(topic=t.topic, partitions=partitions))
    return Respond(OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics))


def _end_offset(ctx, topic: str, wanted):
    partition, error = find_partition(ctx, topic, wanted.partition, wanted.current_leader_epoch)
    if error:
        return _error(wanted, error)
    log = partition.log
    epoch, end_offset = log.epoch_cache.end_offset_for(wanted.leader_epoch, log.log_end_offset)
    return PartitionOut(error_code=0, partition=wanted.partition, leader_epoch=epoch, end_offset=end_offset)


def _error(wanted, code: ErrorCode):
    return PartitionOut(error_code=code, partition=wanted.partition, leader_epoch=-1, end_offset=-1)
