"""The topic entries of a Metadata answer, shared by the single-node and the cluster handler."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import MetadataResponse

from ..authorizer import NOT_REQUESTED
from ..metadata.acls import CLUSTER_NAME, Operation, ResourceType

TopicOut = MetadataResponse.MetadataResponseTopic
PartitionOut = MetadataResponse.MetadataResponsePartition


def topic_error(name, code: ErrorCode, topic_id=None):
    out = TopicOut(error_code=code, name=name, is_internal=False, partitions=[],
                   topic_authorized_operations=NOT_REQUESTED)
    if topic_id is not None:
        out.topic_id = topic_id
    return out


def topic_operations(ctx, request, version: int, peer, name: str) -> int:
    """TopicAuthorizedOperations (v8+): what the caller may do with the topic, when asked."""
    if version >= 8 and request.include_topic_authorized_operations:
        return ctx.authorizer.authorized_operations(peer, ResourceType.TOPIC, name)
    return NOT_REQUESTED


def cluster_operations(ctx, request, version: int, peer) -> int:
    """ClusterAuthorizedOperations (v8-10): what the caller may do with the cluster, when asked."""
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        return ctx.authorizer.authorized_operations(peer, ResourceType.CLUSTER, CLUSTER_NAME)
    return NOT_REQUESTED


def may_describe(ctx, peer, name: str) -> bool:
    return ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.TOPIC, name)


def may_create(ctx, peer, name: str) -> bool:
    """Kafka: CREATE on the cluster, or on the topic."""
    return (ctx.authorizer.allows(peer, Operation.CREATE, ResourceType.CLUSTER)
            or ctx.authorizer.allows(peer, Operation.CREATE, ResourceType.TOPIC, name))
