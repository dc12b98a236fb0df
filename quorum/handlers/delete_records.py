"""DeleteRecords: advance the log start offset (never past the high watermark)."""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import DeleteRecordsResponse

from ..outcomes import Respond
from .context import missing_partition_error

TopicOut = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionOut = DeleteRecordsResponse.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


def handle(ctx, header, request, now_ms, peer):
    return Respond(DeleteRecordsResponse(throttle_time_ms=0, topics=[
        TopicOut(name=t.name, partitions=[_delete(ctx, t.name, p) for p in t.partitions])
        for t in request.topics]))


def _delete(ctx, topic: str, wanted):
    partition = ctx.topics.partition(topic, wanted.partition_index)
    if partition is None:
        return PartitionOut(partition_index=wanted.partition_index, low_watermark=-1,
                            error_code=missing_partition_error(ctx, topic, wanted.partition_index))
    if partition.config.is_snapshot_policy:
        # KIP-630 topics move their log start only behind snapshots.
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
