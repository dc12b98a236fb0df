"""FetchSnapshot (api 59, v0–1): serve chunks of snapshot files, zero-copy, fairly split. A
partition of a topic the caller may not READ is TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import FetchSnapshotResponse
from ...storage.snapshots import SnapshotId

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .context import find_partition

TopicOut = FetchSnapshotResponse.TopicSnapshot
PartitionOut = FetchSnapshotResponse.PartitionSnapshot


def handle(ctx, header, request, now_ms, peer):
    if request.cluster_id is not None and request.cluster_id != ctx.cluster_id:
        return Respond(FetchSnapshotResponse(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                                             topics=[]))
    wanted, outs = [], []
    topics_out = []
    for topic in request.topics:
        partitions_out = []
        readable = ctx.authorizer.allows(peer, Operation.READ, ResourceType.TOPIC, topic.name)
        for p in topic.partitions:
            out, chunk_source = _lookup(ctx, topic.name, p, request.replica_id, now_ms, readable)
            partitions_out.append(out)
            if chunk_source is not None:
                wanted.append(chunk_source)
                outs.append(out)
        topics_out.append(TopicOut(name=topic.name, partitions=partitions_out))
    budget = max(0, min(request.max_bytes, ctx.config.replica_fetch_response_max_bytes))
    for (store, sid, position, size), out, share in zip(wanted, outs, fair_shares(
            budget, [size - position for _, _, position, size in wanted])):
        out.unaligned_records = store.region(sid, position, share)
    return Respond(FetchSnapshotResponse(throttle_time_ms=0, error_code=0, topics=topics_out))


def _lookup(ctx, topic: str, p, replica_id: int, now_ms: int, readable: bool = True):
    """(the partition's answer without bytes, (store, id, position, size) to read or None)."""
    sid = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    out = PartitionOut(index=p.partition, error_code=0, snapshot_id=FetchSnapshotResponse.SnapshotId(
        end_offset=sid.end_offset, epoch=sid.epoch), size=-1, position=p.position, unaligned_records=b"")
    if not readable:
        out.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return out, None
    partition, error = find_partition(ctx, topic, p.partition, p.current_leader_epoch)
    if error:
        out.error_code = error
        if partition is not None:
            # Error responses say who leads (KIP-595), so the fetcher can go there at once.
            out.current_leader = FetchSnapshotResponse.LeaderIdAndEpoch(leader_id=partition.leader_id,
                                                                       leader_epoch=partition.leader_epoch)
        return out, None
    if ctx.replication is not None and replica_id >= 0:
        partition.raft.note_contact(replica_id, now_ms)  # check-quorum: a download is contact too
    snapshots = partition.snapshots
    if snapshots is None or sid not in snapshots.store:
        out.error_code = ErrorCode.SNAPSHOT_NOT_FOUND
        return out, None
    size = snapshots.store.size(sid)
    out.size = size
    if p.position < 0 or p.position >= size:
        out.error_code = ErrorCode.POSITION_OUT_OF_RANGE
        return out, None
    return out, (snapshots.store, sid, p.position, size)


def fair_shares(budget: int, wants: list[int]) -> list[int]:
    """Split the budget evenly; what a partition cannot use goes to the others (water-filling)."""
    shares = [0] * len(wants)
    pending = sorted(range(len(wants)), key=wants.__getitem__)
    left = budget
    while pending:
        each = left // len(pending)
        i = pending[0]
        if wants[i] <= each:
            shares[i] = wants[i]
            left -= wants[i]
            pending.pop(0)
            continue
        # Nobody left wants less than an even share: split what remains evenly.
        extra = left - each * len(pending)
        for n, j in enumerate(pending):
            shares[j] = each + (1 if n < extra else 0)
        break
    return shares
