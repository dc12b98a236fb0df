"""Metadata in a cluster, answered from the metadata image on any node: live brokers, the
controller (metadata leader), and per partition its leader, epoch, replicas, ISR and offline
replicas. Leaders are what partitions' Raft leaders reported to the controller; where this node
hosts the partition and knows a newer epoch, its own view wins. No live leader:
LEADER_NOT_AVAILABLE. An unknown topic is auto-created through the controller (allowed by the
request and `auto_create_topics`) and reported LEADER_NOT_AVAILABLE meanwhile.

Authorization (Kafka's): a listing of every topic leaves out those the caller may not
DESCRIBE; a topic named in the request that it may not DESCRIBE, or may not create (CREATE on
the cluster or the topic) when it would be auto-created, is TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import MetadataResponse

from ..outcomes import Respond
from ..topics import topic_name_problem
from ..metadata.leaders import partition_leader
from .metadata_topics import (PartitionOut, TopicOut, cluster_operations, may_create, may_describe, topic_error,
                              topic_operations)

BrokerOut = MetadataResponse.MetadataResponseBroker


def handle_clustered(ctx, request, version: int, now_ms: int, peer):
    plane = ctx.plane
    image = plane.image
    if request.topics is None or (version == 0 and not request.topics):
        topics = [_describe(ctx, image, t) for t in image.topics.values() if may_describe(ctx, peer, t.name)]
    else:
        allow_create = ctx.config.auto_create_topics and (version < 4 or request.allow_auto_topic_creation)
        topics = [_lookup(ctx, image, wanted, allow_create, version, now_ms, peer) for wanted in request.topics]
    for out in topics:
        if out.error_code == 0:
            out.topic_authorized_operations = topic_operations(ctx, request, version, peer, out.name)
    brokers = [BrokerOut(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack) for b in image.live_brokers()]
    if not any(b.node_id == ctx.node_id for b in brokers):
        # Not registered yet (or fenced): still name ourselves, clients are talking to us.
        brokers.append(BrokerOut(node_id=ctx.node_id, host=ctx.config.advertised_host,
                                 port=ctx.config.advertised_port, rack=None))
    # ControllerId is the metadata leader; while it is not a registered live broker (just
    # elected, not registered yet) clients could not reach it, so name this node, which
    # forwards CreateTopics/DeleteTopics to it anyway.
    controller = plane.leader_id
    if not any(b.node_id == controller for b in brokers):
        controller = ctx.node_id
    return Respond(MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=ctx.cluster_id, controller_id=controller,
        topics=topics, cluster_authorized_operations=cluster_operations(ctx, request, version, peer)))


def _lookup(ctx, image, wanted, allow_create: bool, version: int, now_ms: int, peer):
    if wanted.name is None and version < 12:
        return topic_error("", ErrorCode.INVALID_REQUEST, topic_id=wanted.topic_id)
    if wanted.name is None:
        topic = image.topics.get(wanted.topic_id)
        if topic is None or not may_describe(ctx, peer, topic.name):
            return topic_error(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id=wanted.topic_id)
        return _describe(ctx, image, topic)
    if not may_describe(ctx, peer, wanted.name):
        return topic_error(wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    topic = image.topic(wanted.name)
    if topic is not None:
        return _describe(ctx, image, topic)
    if topic_name_problem(wanted.name):
        return topic_error(wanted.name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if not allow_create:
        return topic_error(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not may_create(ctx, peer, wanted.name):
        return topic_error(wanted.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    refused = ctx.admit_auto_create(wanted.name, now_ms)
    if refused:
        return topic_error(wanted.name, refused)
    ctx.plane.auto_create(wanted.name, ctx.config.default_partitions, now_ms)
    return topic_error(wanted.name, ErrorCode.LEADER_NOT_AVAILABLE)


def _describe(ctx, image, topic):
    partitions = []
    for index in sorted(topic.partitions):
        info = topic.partitions[index]
        leader, epoch = partition_leader(ctx, image, topic.name, info)
        partitions.append(PartitionOut(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE if leader < 0 else 0, partition_index=index,
            leader_id=leader, leader_epoch=epoch, replica_nodes=list(info.replicas),
            isr_nodes=[r for r in info.isr if image.is_live(r)],
            offline_replicas=[r for r in info.replicas if not image.is_live(r)]))
    return TopicOut(error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=False,
                    partitions=partitions)
