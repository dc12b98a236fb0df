"""DescribeQuorum (api 55, v0–2): leader, epoch, HW and each replica's progress, as the leader
sees it (kafka-metadata-quorum describe --status/--replication). Needs DESCRIBE on the cluster."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeQuorumResponse as Response

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .quorum_common import groups_of


def handle(ctx, header, request, now_ms, peer):
    if not ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.CLUSTER):
        return Respond(Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[], nodes=[]))
    topics: dict = {}
    for name, p, group in groups_of(ctx, request.topics):
        topics.setdefault(name, []).append(_describe(ctx, p.partition_index, group, now_ms))
    return Respond(Response(error_code=0, topics=[
        Response.TopicData(topic_name=n, partitions=ps) for n, ps in topics.items()], nodes=[]))


def _describe(ctx, index: int, group, now_ms: int):
    out = Response.PartitionData(partition_index=index, error_code=0, leader_id=-1, leader_epoch=-1,
                                 high_watermark=-1, current_voters=[], observers=[])
    if group is None:
        out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return out
    if not group.is_leader:
        out.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        out.leader_id, out.leader_epoch = group.leader_id, group.epoch
        return out
    progress = group.role.progress
    out.leader_id, out.leader_epoch = group.leader_id, group.epoch
    out.high_watermark = group.partition.high_watermark
    leader_end = group.partition.log.log_end_offset

    wall_now = ctx.wall.at(now_ms)  # Kafka reports these as wall-clock times

    def state(replica_id, p):
        if replica_id == ctx.node_id:
            return Response.ReplicaState(replica_id=replica_id, log_end_offset=leader_end,
                                         last_fetch_timestamp=wall_now, last_caught_up_timestamp=wall_now)
        # A session fetch that does not name this partition still fetched it (its position has
        # not moved): it counts, and it was caught up then if that position is our log end.
        last_fetch = max(p.last_fetch_ms, group.session_fetch_ms(replica_id))
        caught_up = last_fetch if last_fetch >= 0 and p.end_offset >= leader_end else p.last_caught_up_ms
        return Response.ReplicaState(replica_id=replica_id, log_end_offset=p.end_offset,
                                     last_fetch_timestamp=ctx.wall.of(last_fetch, now_ms),
                                     last_caught_up_timestamp=ctx.wall.of(caught_up, now_ms))

    out.current_voters = [state(v, p) for v, p in sorted(progress.by_voter.items())]
    out.observers = [state(v, p) for v, p in sorted(progress.observers.items())]
    return out
