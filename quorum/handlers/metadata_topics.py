"""The topic entries of a Metadata answer, shared by the single-node and the cluster handler."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import MetadataResponse

TopicOut = MetadataResponse.MetadataResponseTopic
PartitionOut = MetadataResponse.MetadataResponsePartition
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def topic_error(name, code: ErrorCode, topic_id=None):
    out = TopicOut(error_code=code, name=name, is_internal=False, partitions=[],
                   topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    if topic_id is not None:
        out.topic_id = topic_id
    return out
