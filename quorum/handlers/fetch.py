"""Fetch (v4–17): resolve partitions, read, answer at once or long-poll until min_bytes."""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import FetchResponse

from ..outcomes import Park, Respond
from .fetch_read import FetchLimits, PartitionFetch, read_partitions

TopicOut = FetchResponse.FetchableTopicResponse
NO_LIMIT = 0x7FFFFFFF
READ_COMMITTED = 1


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    if request.max_wait_ms < 0:
        return Respond(FetchResponse(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                     session_id=0, responses=[]))
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    limits = FetchLimits(
        version=version, is_consumer=replica_id < 0,
        read_committed=request.isolation_level == READ_COMMITTED,
        response_max_bytes=request.max_bytes if request.max_bytes > 0 else NO_LIMIT,
        leader_id=ctx.node_id,
    )
    fetches = resolve(ctx, request, version)
    results, total, errors = read_partitions(fetches, limits)
    if request.max_wait_ms == 0 or total >= request.min_bytes or errors or not fetches:
        return Respond(build_response(fetches, results, version))
    wait = min(request.max_wait_ms, ctx.config.fetch_max_wait_cap_ms)
    return Park(ctx.purgatory.park(DelayedFetch(fetches, limits, request.min_bytes, now_ms + wait)))


def resolve(ctx, request, version: int) -> list[PartitionFetch]:
    fetches = []
    for topic in request.topics:
        if version >= 13:
            found = ctx.topics.get_by_id(topic.topic_id)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            found = ctx.topics.get(topic.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for p in topic.partitions:
            partition = None
            if found is not None and 0 <= p.partition < len(found.partitions):
                partition = found.partitions[p.partition]
            fetches.append(PartitionFetch(
                topic=found.name if found else topic.topic, topic_id=topic.topic_id,
                partition_index=p.partition, partition=partition, fetch_offset=p.fetch_offset,
                current_leader_epoch=p.current_leader_epoch, last_fetched_epoch=p.last_fetched_epoch,
                max_bytes=p.partition_max_bytes, fetcher_log_start_offset=p.log_start_offset,
                resolve_error=ErrorCode.NONE if partition is not None else missing,
            ))
    return fetches


def build_response(fetches: list[PartitionFetch], results: list, version: int, session_id: int = 0):
    """Group consecutive partitions of one topic, as Kafka does."""
    topics: list = []
    for fetch, data in zip(fetches, results):
        last = topics[-1] if topics else None
        same = last is not None and (last.topic_id == fetch.topic_id if version >= 13 else last.topic == fetch.topic)
        if not same:
            last = TopicOut(topic=fetch.topic if version < 13 else "", topic_id=fetch.topic_id, partitions=[])
            topics.append(last)
        last.partitions.append(data)
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics)


class DelayedFetch:
    """A fetch below min_bytes, woken when a watched partition's high watermark moves."""

    def __init__(self, fetches, limits, min_bytes: int, deadline_ms: int) -> None:
        self.fetches = fetches
        self.limits = limits
        self.min_bytes = min_bytes
        self.deadline_ms = deadline_ms

    def watch_keys(self):
        return [f.partition.key for f in self.fetches if f.partition is not None]

    def try_complete(self, now_ms: int):
        results, total, errors = read_partitions(self.fetches, self.limits)
        if total >= self.min_bytes or errors:
            return build_response(self.fetches, results, self.limits.version)
        return None

    def expire(self, now_ms: int):
        results, _, _ = read_partitions(self.fetches, self.limits)
        return build_response(self.fetches, results, self.limits.version)
