"""What the quorum RPC handlers share: the cluster-id check and answering after persistence."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..outcomes import Park, Respond


def cluster_id_error(ctx, cluster_id) -> ErrorCode:
    """A request from another cluster is refused (a null id is accepted, as Kafka does)."""
    if cluster_id is not None and cluster_id != ctx.cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    return ErrorCode.NONE


def answer(ctx, response):
    """Answer at once, unless a state change is waiting to be persisted: then the answer goes
    out with the shell's next sends, after the write (a vote is never answered before it is
    durable)."""
    replication = ctx.replication
    if not replication.persist_pending():
        return Respond(response)
    token = ctx.purgatory.reserve_token()
    replication.complete(token, response)
    return Park(token)


def answer_partitions(ctx, request, response_cls, decide):
    """The shape Vote, BeginQuorumEpoch and EndQuorumEpoch share: the cluster-id check, then
    `decide(partition request, group or None)` -> one answer per partition, grouped by topic."""
    error = cluster_id_error(ctx, request.cluster_id)
    if error:
        return answer(ctx, response_cls(error_code=error, topics=[]))
    topics: dict = {}
    for name, p, group in groups_of(ctx, request.topics):
        topics.setdefault(name, []).append(decide(p, group))
    return answer(ctx, response_cls(error_code=0, topics=[
        response_cls.TopicData(topic_name=n, partitions=ps) for n, ps in topics.items()]))


def groups_of(ctx, topics, topic_name_of=lambda t: t.topic_name):
    """(topic, partition request, group or None) for every partition named."""
    for topic in topics:
        name = topic_name_of(topic)
        for p in topic.partitions:
            yield name, p, ctx.replication.groups.get((name, p.partition_index))
