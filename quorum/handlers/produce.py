"""Produce: validate batches, check idempotent sequences, append, answer per the acks level.
A topic the caller may not WRITE is TOPIC_AUTHORIZATION_FAILED (auto-creating one needs CREATE
too, on the cluster or the topic)."""
from __future__ import annotations

from ...protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError
from ...protocol.messages import ProduceResponse
from ...protocol.records import KeylessRecordError, check_records, validate_batches
from ...storage.producer_state import ProducerStatus, last_sequence_of

from ..limits import capped_timeout
from ..metadata.acls import Operation, ResourceType
from ..outcomes import NoResponse, Park, Respond
from ..topics import TopicError
from .context import leadership_error, missing_partition_error
from .metadata_topics import may_create

TopicOut = ProduceResponse.TopicProduceResponse
PartitionOut = ProduceResponse.PartitionProduceResponse


def handle(ctx, header, request, now_ms, peer):
    if request.acks not in (-1, 0, 1):
        return _respond_all(request, ErrorCode.INVALID_REQUIRED_ACKS)
    if request.transactional_id is not None:
        return _respond_all(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics_out, waiting = [], []
    for topic_data in request.topic_data:
        partitions_out = []
        writable = ctx.authorizer.allows(peer, Operation.WRITE, ResourceType.TOPIC, topic_data.name)
        for data in topic_data.partition_data:
            if not writable:
                partitions_out.append(_error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            out, partition, end_offset = _append(ctx, topic_data.name, data, now_ms, peer)
            partitions_out.append(out)
            if partition is not None:
                waiting.append((partition, end_offset, out))
        topics_out.append(TopicOut(name=topic_data.name, partition_responses=partitions_out))
    response = ProduceResponse(responses=topics_out, throttle_time_ms=0,
                               node_endpoints=_leader_hints(ctx, topics_out))
    if request.acks == 0:
        return NoResponse()
    if _waits_for_fsync(ctx.config.fsync_policy, request.acks) or request.acks == -1:
        # acks=all waits for the HW (a majority has it durably); a lone node under
        # fsync_policy=never moves its HW with the append, so nothing waits there.
        pending = [(p, end, out, p.leader_epoch) for p, end, out in waiting
                   if p.high_watermark < end and (len(p.raft.voters) > 1
                                                  or _waits_for_fsync(ctx.config.fsync_policy, request.acks))]
        if pending:
            deadline = now_ms + max(0, capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms,
                                                      ctx.refusals))
            return Park(ctx.purgatory.park(DelayedProduce(response, pending, deadline, now_ms,
                                                          ctx.commit_latencies)))
    return Respond(response)


def _leader_hints(ctx, topics_out) -> list:
    """KIP-951 (v10+): the endpoints of the leaders named in CurrentLeader. A leader whose
    address this node does not know is not named at all (clients trust a hint only with its
    endpoint), so the producer falls back to a metadata refresh."""
    brokers = ctx.plane.image.brokers if ctx.plane is not None else {}
    named = {}
    for topic in topics_out:
        for out in topic.partition_responses:
            leader_id = out.current_leader.leader_id
            if leader_id < 0:
                continue
            broker = brokers.get(leader_id)
            if broker is None:
                out.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            else:
                named[broker.node_id] = ProduceResponse.NodeEndpoint(node_id=broker.node_id, host=broker.host,
                                                                     port=broker.port, rack=broker.rack)
    return list(named.values())


def _waits_for_fsync(policy: str, acks: int) -> bool:
    return policy == "always" or (policy == "acks_all" and acks == -1)


def _append(ctx, topic: str, data, now_ms: int, peer):
    """Returns (partition response, partition if appended, offset to wait for)."""
    partition = ctx.topics.partition(topic, data.index)
    if partition is None and ctx.topics.get(topic) is None and ctx.config.auto_create_topics:
        if not may_create(ctx, peer, topic):
            return _error(data.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED), None, 0
        refused = ctx.admit_auto_create(topic, now_ms)
        if refused:
            return _error(data.index, refused, f"Topic '{topic}' was not auto-created (auto_create_topics_rate, "
                                               "auto_create_topics_max or max_partitions)."), None, 0
        try:
            ctx.create_topic(topic, ctx.config.default_partitions, {}, open_inline=True)
        except TopicError as exc:
            return _error(data.index, ErrorCode[exc.error_name], str(exc)), None, 0
        partition = ctx.topics.partition(topic, data.index)
    if partition is None:
        return _error(data.index, missing_partition_error(ctx, topic, data.index)), None, 0
    code = leadership_error(partition)
    if code:
        out = _error(data.index, code)
        # KIP-951 (v10+): say who leads, so the producer need not wait for a metadata refresh.
        out.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                              leader_epoch=partition.leader_epoch)
        return out, None, 0
    if data.records is None or len(data.records) == 0:
        return _error(data.index, ErrorCode.INVALID_RECORD, "No record batch in the request."), None, 0
    try:
        headers = validate_records(data.records, require_keys=partition.config.is_compacted)
    except CorruptRecordError as exc:
        return _error(data.index, ErrorCode.CORRUPT_MESSAGE, str(exc)), None, 0
    except KeylessRecordError:
        # A compacted topic keeps the latest record per key: Kafka refuses a record without one.
        return _error(data.index, ErrorCode.INVALID_RECORD, "Compacted topic cannot accept message without key "
                      f"in topic partition {partition.topic}-{partition.index}."), None, 0
    except InvalidRecordError as exc:
        return _error(data.index, ErrorCode.INVALID_RECORD, str(exc)), None, 0
    problem = _batch_problem(partition, headers)
    if problem:
        return _error(data.index, *problem), None, 0
    duplicate = _sequence_check(partition.log.producer_state, headers)
    if isinstance(duplicate, tuple):
        return _error(data.index, *duplicate), None, 0
    if duplicate is not None:
        # Already appended: acknowledge with the original offsets, append nothing.
        return PartitionOut(index=data.index, error_code=0, base_offset=duplicate, log_append_time_ms=-1,
                            log_start_offset=partition.log_start_offset), partition, duplicate + 1
    result = partition.log.append_as_leader(
        data.records, partition.leader_epoch, now_ms=now_ms,
        log_append_time=partition.config.log_append_time, wall_ms=ctx.wall.at(now_ms))
    ctx.appended[partition.key] = partition
    return PartitionOut(
        index=data.index, error_code=0, base_offset=result.first_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=partition.log_start_offset,
    ), partition, result.last_offset + 1


def validate_records(records, *, require_keys: bool = False) -> list:
    """Headers and CRCs, then every record's framing (Kafka's LogValidator walks them too):
    a CRC-valid batch of garbage must not reach the log, where every reader would trip on it.
    `require_keys` (a compacted topic): a record without a key raises KeylessRecordError."""
    headers = validate_batches(records)
    view = records if isinstance(records, memoryview) else memoryview(records)
    pos = 0
    for header in headers:
        check_records(view[pos:pos + header.size], header, require_keys=require_keys)
        pos += header.size
    return headers


def _batch_problem(partition, headers):
    for header in headers:
        if header.size > partition.config.max_message_bytes:
            return (ErrorCode.MESSAGE_TOO_LARGE,
                    f"Batch of {header.size} bytes exceeds max.message.bytes {partition.config.max_message_bytes}.")
        if header.is_control:
            return ErrorCode.INVALID_RECORD, "Clients may not append control batches."
        if header.is_transactional:
            return ErrorCode.INVALID_RECORD, "Transactions are not supported."
    return None


def _sequence_check(state, headers):
    """None to append, an offset for a duplicate, or an (error, message) tuple."""
    duplicate_of = None
    for header in headers:
        if header.producer_id < 0:
            continue
        last_sequence = last_sequence_of(header.base_sequence, header.last_offset_delta)
        status, batch = state.check(header.producer_id, header.producer_epoch, header.base_sequence,
                                    last_sequence)
        if status is ProducerStatus.DUPLICATE:
            duplicate_of = batch.first_offset
        elif status is not ProducerStatus.OK:
            code = _SEQUENCE_ERRORS[status]
            return code, f"{code.name} for producer {header.producer_id} at sequence {header.base_sequence}"
    return duplicate_of


_SEQUENCE_ERRORS = {
    ProducerStatus.OUT_OF_ORDER_SEQUENCE: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ProducerStatus.INVALID_PRODUCER_EPOCH: ErrorCode.INVALID_PRODUCER_EPOCH,
    ProducerStatus.UNKNOWN_PRODUCER_ID: ErrorCode.UNKNOWN_PRODUCER_ID,
}


def _error(index: int, code: ErrorCode, message: str | None = None):
    return PartitionOut(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                        log_start_offset=-1, error_message=message)


def _respond_all(request, code: ErrorCode):
    return Respond(ProduceResponse(throttle_time_ms=0, responses=[
        TopicOut(name=t.name, partition_responses=[_error(p.index, code) for p in t.partition_data])
        for t in request.topic_data]))


class DelayedProduce:
    """An acks=-1 produce waiting until its data is under the high watermark (durable)."""

    cancel_on_disconnect = True  # the data is appended either way; only the answer is dropped

    def __init__(self, response, pending: list, deadline_ms: int, parked_ms: int = 0, latencies=None) -> None:
        self.response = response
        self.pending = pending
        self.deadline_ms = deadline_ms
        self.parked_ms = parked_ms
        self.latencies = latencies

    def watch_keys(self):
        return [partition.key for partition, _, _, _ in self.pending]

    def try_complete(self, now_ms: int):
        done = True
        for partition, end, out, epoch in self.pending:
            if partition.leader_epoch != epoch or not partition.is_leader:
                # Leadership moved: the new leader may have truncated what we appended, so the
                # HW passing `end` no longer means *our* batch is committed. Retriable.
                out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif partition.high_watermark < end:
                done = False
        if done and self.latencies is not None:
            self.latencies.append(now_ms - self.parked_ms)
        return self.response if done else None

    def expire(self, now_ms: int):
        for partition, end, out, epoch in self.pending:
            if out.error_code == 0 and (partition.leader_epoch != epoch or partition.high_watermark < end):
                out.error_code = ErrorCode.REQUEST_TIMED_OUT
        return self.response
