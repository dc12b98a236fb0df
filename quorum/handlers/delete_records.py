"""DeleteRecords: advance the log start offset (never past the high watermark), on the leader
only; followers follow the leader's log start from its Fetch answers. A partition of a topic
the caller may not DELETE is TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteRecordsResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .context import find_partition

TopicOut = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionOut = DeleteRecordsResponse.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


def handle(ctx, header, request, now_ms, peer):
    topics = []
    for t in request.topics:
        if ctx.authorizer.allows(peer, Operation.DELETE, ResourceType.TOPIC, t.name):
            partitions = [_delete(ctx, t.name, p) for p in t.partitions]
        else:
            partitions = [PartitionOut(partition_index=p.partition_index, low_watermark=-1,
                                       error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
        topics.append(TopicOut(name=t.name, partitions=partitions))
    return Respond(DeleteRecordsResponse(throttle_time_ms=0, topics=topics))


def _delete(ctx, topic: str, wanted):
    partition, error = find_partition(ctx, topic, wanted.partition_index)
    if error:
        return PartitionOut(partition_index=wanted.partition_index, low_watermark=-1, error_code=error)
    if not partition.config.deletes:
        # KIP-630 topics move their log start only behind snapshots; compact-only topics, as on
        # Kafka, never (compact,delete ones may).
        return PartitionOut(partition_index=wanted.partition_index, low_watermark=-1,
                            error_code=ErrorCode.POLICY_VIOLATION)
    offset = partition.high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
    if offset < 0 or offset > partition.high_watermark:
        return PartitionOut(partition_index=wanted.partition_index, low_watermark=-1,
                            error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    if offset > partition.log_start_offset:
        partition.log.advance_log_start(offset)
        partition.after_log_start_moved()
    return PartitionOut(partition_index=wanted.partition_index, low_watermark=partition.log_start_offset,
                        error_code=0)
