"""CreateTopics: validated against this single node (replication factor 1)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import CreateTopicsResponse

from ..limits import PARTITIONS, partitions_over
from ..outcomes import Respond
from ..topics import MAX_PARTITIONS, TopicError

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs
DEFAULT_CONFIG_SOURCE = 5  # Kafka's DEFAULT_CONFIG; 1 is a dynamic topic config


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is not None:
        from .create_topics_cluster import handle_clustered
        return handle_clustered(ctx, header, request, now_ms, from_node=peer.is_node)
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}
    budget = [ctx.partition_count()]  # partitions held, plus those this request adds
    results = [_create_one(ctx, topic, request.validate_only, duplicates, budget) for topic in request.topics]
    return Respond(CreateTopicsResponse(throttle_time_ms=0, topics=results))


def _create_one(ctx, topic, validate_only: bool, duplicates: set, budget: list) -> object:
    if topic.name in duplicates:
        return error_result(topic.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name in the request.")
    problem = _replication_problem(ctx, topic)
    if problem:
        return error_result(topic.name, *problem)
    count = topic.num_partitions if topic.num_partitions != -1 else ctx.config.default_partitions
    if topic.assignments:
        count = len(topic.assignments)
    configs = {c.name: c.value for c in topic.configs}
    over = partitions_over(budget[0], count, ctx.config.max_partitions) if 1 <= count <= MAX_PARTITIONS else None
    if over:
        ctx.refusals.refuse(PARTITIONS)
        return error_result(topic.name, ErrorCode.POLICY_VIOLATION, over)
    try:
        if validate_only:
            config = ctx.topics.validate(topic.name, count, configs)
            topic_id = None
        else:
            created = ctx.create_topic(topic.name, count, configs)
            config, topic_id = created.config, created.topic_id
            budget[0] += count
    except TopicError as exc:
        return error_result(topic.name, ErrorCode[exc.error_name], str(exc))
    return created_result(topic.name, count, 1, config, set(configs), topic_id)


def created_result(name: str, count: int, replication_factor: int, config, explicit: set, topic_id):
    result = Result(name=name, error_code=0, error_message=None, num_partitions=count,
                    replication_factor=replication_factor, configs=[
                        ConfigEntry(name=k, value=v, read_only=False, is_sensitive=False,
                                    config_source=1 if k in explicit else DEFAULT_CONFIG_SOURCE)
                        for k, v in sorted(config.to_kafka_configs().items())])
    if topic_id is not None:
        result.topic_id = topic_id
    return result


def _replication_problem(ctx, topic):
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return ErrorCode.INVALID_REQUEST, "Both assignments and numPartitions/replicationFactor were set."
        for assignment in topic.assignments:
            if list(assignment.broker_ids) != [ctx.node_id]:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Only broker {ctx.node_id} exists."
        return None
    if topic.replication_factor not in (-1, 1):
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {topic.replication_factor} larger than available brokers: 1.")
    return None


def error_result(name: str, code: ErrorCode, message: str | None):
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
                  configs=None)
