"""DescribeQuorum (api 55, v0–2): leader, epoch, HW and each replica's progress, as the leader
sees it (kafka-metadata-quorum describe --status/--replication). Needs DESCRIBE on the cluster.
v2 adds each replica's directory id (what its fetches say: KIP-853) and the listeners of every
node it names (from their registrations in the metadata image)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeQuorumResponse as Response
from ...protocol.primitives import ZERO_UUID

from ..metadata.acls import Operation, ResourceType
from ..metadata.names import METADATA_TOPIC
from ..outcomes import Respond
from .quorum_common import groups_of



def handle(ctx, header, request, now_ms, peer):
    if not ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.CLUSTER):
        return Respond(Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[], nodes=[]))
    if _metadata_quorum_elsewhere(ctx, request) and not peer.is_node:
        # As a Kafka broker does: the metadata quorum is described by its leader (the Java
        # Admin asks any broker and waits for an answer that names no other leader).
        return ctx.plane.forward(header, request, now_ms, ctx.config.request_timeout_cap_ms,
                                 lambda _request, error: Response(error_code=error, topics=[], nodes=[]))
    topics: dict = {}
    for name, p, group in groups_of(ctx, request.topics):
        topics.setdefault(name, []).append(_describe(ctx, p.partition_index, group, now_ms))
    named = {r.replica_id for ps in topics.values() for p in ps for r in p.current_voters + p.observers}
    return Respond(Response(error_code=0, topics=[
        Response.TopicData(topic_name=n, partitions=ps) for n, ps in topics.items()], nodes=_nodes(ctx, named)))


def _metadata_quorum_elsewhere(ctx, request) -> bool:
    """Only the metadata partition is asked for, and another node leads it."""
    plane = ctx.plane
    if plane is None or plane.partition is None or plane.partition.raft.is_leader:
        return False
    asked = {(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions}
    return asked == {(METADATA_TOPIC, 0)}


def _nodes(ctx, node_ids) -> list:
    """The listener of each node named (v2's Nodes): a metadata voter's as the VotersRecord holds
    it (UpdateRaftVoter keeps it current), anyone else's as it registered."""
    plane = ctx.plane
    if plane is None:
        host, port = ctx.config.advertised_host, ctx.config.advertised_port
        return [_node(ctx.node_id, host, port)] if ctx.node_id in node_ids else []
    where = {n: (b.host, b.port) for n, b in plane.image.brokers.items()}
    if plane.partition is not None:
        where.update({v.node_id: (v.host, v.port) for v in plane.partition.raft.voter_set.voters if v.host})
    return [_node(n, *where[n]) for n in sorted(node_ids) if n in where]


def _node(node_id: int, host: str, port: int):
    return Response.Node(node_id=node_id, listeners=[Response.Listener(name="PLAINTEXT", host=host, port=port)])


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
    directories = ctx.replication.sessions.directories
    voter_set = group.voter_set

    def state(replica_id, p, voter: bool):
        directory = directories.get(replica_id) or ZERO_UUID
        if voter:  # the voter's key, where the quorum records it (KIP-853)
            known = voter_set.get(replica_id)
            directory = known.directory_id if known is not None and known.directory_id else directory
        if replica_id == ctx.node_id and voter:
            return Response.ReplicaState(replica_id=replica_id, replica_directory_id=ctx.replication.directory_id,
                                         log_end_offset=leader_end, last_fetch_timestamp=wall_now,
                                         last_caught_up_timestamp=wall_now)
        # A session fetch that does not name this partition still fetched it (its position has
        # not moved): it counts, and it was caught up then if that position is our log end.
        last_fetch = max(p.last_fetch_ms, group.session_fetch_ms(replica_id))
        caught_up = last_fetch if last_fetch >= 0 and p.end_offset >= leader_end else p.last_caught_up_ms
        return Response.ReplicaState(replica_id=replica_id, replica_directory_id=directory,
                                     log_end_offset=p.end_offset,
                                     last_fetch_timestamp=ctx.wall.of(last_fetch, now_ms),
                                     last_caught_up_timestamp=ctx.wall.of(caught_up, now_ms))

    out.current_voters = [state(v, p, True) for v, p in sorted(progress.by_voter.items())]
    out.observers = [state(v, p, False) for v, p in sorted(progress.observers.items())]
    return out
