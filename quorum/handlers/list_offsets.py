"""ListOffsets (v1–9): latest/earliest/max-timestamp/by-time, with leader epochs (v4+).

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere), except a debugging consumer's request
(replica id -2), which any replica answers from its own log, up to its log end, as on Kafka.
A partition of a topic the caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ListOffsetsResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .context import find_partition

TopicOut = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionOut = ListOffsetsResponse.ListOffsetsPartitionResponse
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2


def handle(ctx, header, request, now_ms, peer):
    seen: set = set()
    topics = []
    for topic in request.topics:
        partitions = []
        described = ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.TOPIC, topic.name)
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition_index)
            if key in seen:
                partitions.append(_error(wanted, ErrorCode.INVALID_REQUEST))
                continue
            if not described:
                partitions.append(_error(wanted, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            seen.add(key)
            partitions.append(_list_one(ctx, topic.name, wanted, request.replica_id))
        topics.append(TopicOut(name=topic.name, partitions=partitions))
    return Respond(ListOffsetsResponse(throttle_time_ms=0, topics=topics))


def _list_one(ctx, topic: str, wanted, replica_id: int):
    partition, error = find_partition(ctx, topic, wanted.partition_index, wanted.current_leader_epoch,
                                      require_leader=replica_id != DEBUGGING_REPLICA_ID)
    if error:
        return _error(wanted, error)
    log = partition.log
    # Consumers never learn of offsets at or past the high watermark; others see the whole log
    # (Kafka's isolation level None for non-consumer requests).
    upper = partition.high_watermark if replica_id == CONSUMER_REPLICA_ID else log.log_end_offset
    ts = wanted.timestamp
    if ts == LATEST:
        found = (upper, -1, partition.leader_epoch)
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        start = log.log_start_offset
        found = (start, -1, _epoch_at(log, start))
    elif ts == MAX_TIMESTAMP:
        found = log.max_timestamp_entry()
        if found is not None and found[0] >= upper:
            found = None
    elif ts == EARLIEST_PENDING_UPLOAD:
        found = None  # no tiered storage: nothing is pending upload
    elif ts < 0:
        return _error(wanted, ErrorCode.INVALID_REQUEST)
    else:
        found = log.offset_for_timestamp(ts)
        if found is not None and found[0] >= upper:
            found = None
    if found is None:
        return PartitionOut(partition_index=wanted.partition_index, error_code=0, timestamp=-1, offset=-1,
                            leader_epoch=-1)
    offset, timestamp, epoch = found
    return PartitionOut(partition_index=wanted.partition_index, error_code=0, timestamp=timestamp,
                        offset=offset, leader_epoch=epoch)


def _epoch_at(log, offset: int) -> int:
    epoch = log.epoch_cache.epoch_for_offset(offset)
    return -1 if epoch is None else epoch


def _error(wanted, code: ErrorCode):
    return PartitionOut(partition_index=wanted.partition_index, error_code=code, timestamp=-1, offset=-1,
                        leader_epoch=-1)
