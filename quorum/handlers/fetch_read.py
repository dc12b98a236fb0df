"""Reading one partition for a Fetch: epoch fencing, divergence, offset range, KIP-74 sizes."""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from ...protocol.errors import ErrorCode
from ...protocol.messages import FetchResponse

from .context import leadership_error

PartitionData = FetchResponse.PartitionData
EMPTY = b""


@dataclass(slots=True)
class PartitionFetch:
    """One partition as asked for, resolved against our topics."""

    topic: str
    topic_id: uuid.UUID
    partition_index: int
    partition: object | None  # quorum.partition.Partition
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int
    fetcher_log_start_offset: int = -1
    resolve_error: ErrorCode = ErrorCode.NONE
    topic_key: object = None      # the name (< v13) or id (v13+) the fetcher uses
    session_key: object = None    # how a fetch session knows this partition
    slot: int = -1                # its slot in the fetch session, if any
    must_answer: bool = False     # set by the read: an error or divergence the fetcher must hear


@dataclass(slots=True)
class FetchLimits:
    version: int
    is_consumer: bool
    read_committed: bool
    response_max_bytes: int
    leader_id: int
    replica_id: int = -1
    now_ms: int = 0
    throttle: object = None  # quorum/move_throttle.MoveThrottle: replicas' fetches only


def read_partitions(fetches: list[PartitionFetch], limits: FetchLimits) -> tuple[list, int, bool]:
    """PartitionData per fetch, total record bytes, whether any partition had an error."""
    remaining = limits.response_max_bytes
    results, total, errors = [], 0, False
    for fetch in fetches:
        data, size, stop = _read_one(fetch, limits, remaining, min_one_batch=(total == 0))
        fetch.must_answer = stop
        results.append(data)
        total += size
        remaining = max(0, remaining - size)
        errors = errors or stop
    return results, total, errors


def _read_one(fetch: PartitionFetch, limits: FetchLimits, remaining: int, min_one_batch: bool):
    """(PartitionData, record bytes, whether the fetcher must hear about it at once)."""
    partition = fetch.partition
    if fetch.resolve_error:
        return _error(fetch, fetch.resolve_error), 0, True
    code = leadership_error(partition, fetch.current_leader_epoch)
    if code:
        # Error answers say who leads (KIP-595), so the fetcher can go there at once.
        leader = FetchResponse.LeaderIdAndEpoch(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)
        return _error(fetch, code, current_leader=leader), 0, True
    if fetch.fetch_offset < 0:
        return _error(fetch, ErrorCode.INVALID_REQUEST), 0, True
    if fetch.last_fetched_epoch >= 0 and fetch.current_leader_epoch >= 0 \
            and fetch.last_fetched_epoch > fetch.current_leader_epoch:
        if not limits.is_consumer:
            return _error(fetch, ErrorCode.INVALID_REQUEST), 0, True  # KIP-595's rule for replicas
        if fetch.last_fetched_epoch > partition.leader_epoch:
            # A consumer that read from a newer epoch than ours: we are a stale leader, and its
            # metadata named us. Retriable: it refreshes its metadata (not truncation).
            return _error(fetch, ErrorCode.UNKNOWN_LEADER_EPOCH), 0, True
    log = partition.log
    if partition.snapshots is not None:
        snapshot_id = partition.snapshots.snapshot_for_fetch(fetch.fetch_offset, fetch.last_fetched_epoch)
        if snapshot_id is not None:
            return _snapshot_needed(fetch, partition, limits, snapshot_id), 0, True
    if fetch.fetch_offset < log.log_start_offset:
        return _error(fetch, ErrorCode.OFFSET_OUT_OF_RANGE), 0, True
    if limits.version >= 12 and fetch.last_fetched_epoch >= 0:
        diverging = _diverging_epoch(log, fetch)
        if diverging is not None:
            if diverging.epoch < 0:
                # Nothing of ours is at or below that epoch: Kafka answers out of range.
                return _error(fetch, ErrorCode.OFFSET_OUT_OF_RANGE), 0, True
            return _data(fetch, partition, limits, EMPTY, diverging_epoch=diverging), 0, True
    if not limits.is_consumer:
        # The follower has durably reached its fetch offset: that counts toward the HW.
        partition.raft.on_follower_fetch(limits.replica_id, fetch.fetch_offset, limits.now_ms)
    upper = partition.high_watermark if limits.is_consumer else log.log_end_offset
    if fetch.fetch_offset > log.log_end_offset:
        return _error(fetch, ErrorCode.OFFSET_OUT_OF_RANGE), 0, True
    if fetch.fetch_offset > upper:
        # Between the HW and the log end (a new leader's HW has not caught up with the old
        # one's yet): nothing to read yet, as Kafka answers; out of range only past the log end.
        return _data(fetch, partition, limits, EMPTY), 0, False
    budget = min(fetch.max_bytes, remaining)
    if fetch.fetch_offset == upper or (budget <= 0 and not min_one_batch):
        return _data(fetch, partition, limits, EMPTY), 0, False
    throttle = limits.throttle
    if throttle is not None and throttle.applies(partition, limits.replica_id):
        budget = throttle.budget(limits.now_ms, budget)  # a replica a move adds: held to the throttle
        if budget <= 0:
            return _data(fetch, partition, limits, EMPTY), 0, False
    else:
        throttle = None
    result = log.read(fetch.fetch_offset, budget, max_offset=upper, min_one_batch=min_one_batch)
    # Like Kafka, one partition's data comes from a single segment.
    records = result.regions[0] if result.regions else EMPTY
    if throttle is not None:
        throttle.spend(len(records))
    return _data(fetch, partition, limits, records), len(records), False


def _snapshot_needed(fetch, partition, limits: FetchLimits, snapshot_id):
    """KIP-630: point the fetcher at the latest snapshot. Consumers also get OFFSET_OUT_OF_RANGE
    (they cannot load snapshots, and this makes them reset per their policy)."""
    if limits.is_consumer:
        data = _error(fetch, ErrorCode.OFFSET_OUT_OF_RANGE)
        data.log_start_offset = partition.log_start_offset
        data.high_watermark = partition.high_watermark
    else:
        data = _data(fetch, partition, limits, EMPTY)
    if limits.version >= 12:
        data.snapshot_id = FetchResponse.SnapshotId(end_offset=snapshot_id.end_offset, epoch=snapshot_id.epoch)
    return data


def _diverging_epoch(log, fetch: PartitionFetch):
    """KIP-595: (offset, last fetched epoch) must be on our log, else say where it ends."""
    epoch, end_offset = log.epoch_cache.end_offset_for(fetch.last_fetched_epoch, log.log_end_offset)
    if epoch < fetch.last_fetched_epoch or end_offset < fetch.fetch_offset:
        return FetchResponse.EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return None


def _data(fetch, partition, limits: FetchLimits, records, diverging_epoch=None):
    data = PartitionData(
        partition_index=fetch.partition_index, error_code=0,
        high_watermark=partition.high_watermark, last_stable_offset=partition.last_stable_offset,
        log_start_offset=partition.log_start_offset,
        aborted_transactions=[] if limits.read_committed else None,
        preferred_read_replica=-1, records=records)
    if diverging_epoch is not None:
        data.diverging_epoch = diverging_epoch
    return data


def _error(fetch: PartitionFetch, code: ErrorCode, current_leader=None):
    data = PartitionData(partition_index=fetch.partition_index, error_code=code, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                         preferred_read_replica=-1, records=EMPTY)
    if current_leader is not None:
        data.current_leader = current_leader
    return data
