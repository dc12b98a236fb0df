"""Metadata: this node leads every partition; topic ids (v10+) and leader epochs (v7+); the
authorized-operations fields (v8+) when asked (everything: a lone node has no authorizer)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import MetadataResponse

from ..outcomes import Respond
from ..topics import TopicError, topic_name_problem
from .metadata_cluster import handle_clustered
from .metadata_topics import PartitionOut, TopicOut, cluster_operations, topic_error, topic_operations


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    if ctx.plane is not None:
        return handle_clustered(ctx, request, version, now_ms, peer)
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_describe(ctx, t) for t in ctx.topics]
    else:
        allow_create = ctx.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        topics = [_lookup(ctx, wanted, allow_create, version, now_ms) for wanted in request.topics]
    for out in topics:
        if out.error_code == 0:
            out.topic_authorized_operations = topic_operations(ctx, request, version, peer, out.name)
    return Respond(MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponse.MetadataResponseBroker(
            node_id=ctx.node_id, host=ctx.config.advertised_host, port=ctx.config.advertised_port, rack=None)],
        cluster_id=ctx.cluster_id,
        controller_id=ctx.node_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations(ctx, request, version, peer),
    ))


def _lookup(ctx, wanted, allow_create: bool, version: int, now_ms: int):
    if wanted.name is None and version < 12:
        # v10/v11 requests may carry ids, but their responses cannot name a topic by id alone.
        return topic_error("", ErrorCode.INVALID_REQUEST, topic_id=wanted.topic_id)
    if wanted.name is None:
        topic = ctx.topics.get_by_id(wanted.topic_id)
        if topic is None:
            return topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id=wanted.topic_id)
        return _describe(ctx, topic)
    topic = ctx.topics.get(wanted.name)
    if topic is not None:
        return _describe(ctx, topic)
    if topic_name_problem(wanted.name):
        return topic_error(wanted.name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if ctx.topics.pending(wanted.name) is not None:  # its logs are being opened (log_opening.py)
        return topic_error(wanted.name, ErrorCode.LEADER_NOT_AVAILABLE)
    if not allow_create:
        return topic_error(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    refused = ctx.admit_auto_create(wanted.name, now_ms)
    if refused:
        return topic_error(wanted.name, refused)
    try:
        return _describe(ctx, ctx.create_topic(wanted.name, ctx.config.default_partitions, {}, open_inline=True))
    except TopicError as exc:
        return topic_error(wanted.name, ErrorCode[exc.error_name])


def _describe(ctx, topic):
    return TopicOut(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=False,
        partitions=[PartitionOut(
            error_code=0, partition_index=p.index, leader_id=p.leader_id, leader_epoch=p.leader_epoch,
            replica_nodes=[ctx.node_id], isr_nodes=[ctx.node_id], offline_replicas=[])
            for p in topic.partitions],
    )
