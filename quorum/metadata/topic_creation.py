"""CreateTopics on the controller: it validates, places replicas and writes TopicRecord,
ConfigRecords and PartitionRecords; the answer waits until they commit."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import (ConfigRecord, CreateTopicsRequest, CreateTopicsResponse, PartitionRecord,
                                  TopicRecord)

from ..limits import PARTITIONS, partitions_over
from ..topic_config import InvalidTopicConfig, TopicConfig
from ..topics import MAX_PARTITIONS, topic_name_problem
from .controller import new_topic_id
from .image import TOPIC_RESOURCE
from .names import METADATA_TOPIC
from .placement import PlacementError, check_assignment, place_replicas

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs
DEFAULT_CONFIG_SOURCE = 5  # Kafka's DEFAULT_CONFIG; 1 is a dynamic topic config


def create_topics(ctx, controller, request, timeout_ms: int, now_ms: int, refused=()):
    """The controller's answer to a CreateTopics (a client's, a forwarded one, or this node's
    own auto-creation): a Respond, or a Park until the records commit. `refused`: results
    decided already (topics the caller may not create), answered with the rest."""
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}
    records: list = []
    budget = [sum(len(t.partitions) for t in controller.image.topics.values())]
    results = [_create(ctx, controller, t, request.validate_only, duplicates, records, budget) for t in request.topics]
    response = CreateTopicsResponse(throttle_time_ms=0, topics=results + list(refused))
    return controller.commit_results(records, response, results, timeout_ms, now_ms)


def create_request_for(name: str, partitions: int, replication_factor: int = -1, configs: dict | None = None):
    """The CreateTopics a node forwards when a client's Metadata/Produce auto-creates a topic, or
    the group coordinator creates `__consumer_offsets` (with its snapshot-policy configs)."""
    entries = [CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=entries)], timeout_ms=30_000, validate_only=False)


def _create(ctx, controller, topic, validate_only: bool, duplicates: set, records: list, budget: list):
    name = topic.name
    if name in duplicates:
        return error_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name in the request.")
    problem = topic_name_problem(name)
    if problem or name == METADATA_TOPIC:
        return error_result(name, ErrorCode.INVALID_TOPIC_EXCEPTION, problem or "Reserved topic name.")
    image = controller.image
    if name in image.ids_by_name:
        return error_result(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    configs = {c.name: c.value for c in topic.configs}
    try:
        config = TopicConfig.resolve(configs, ctx.config)
        assignments = _assignments(ctx, controller, topic)
    except InvalidTopicConfig as exc:
        return error_result(name, ErrorCode.INVALID_CONFIG, str(exc))
    except PlacementError as exc:
        return error_result(name, ErrorCode[exc.error_name], str(exc))
    if not 1 <= len(assignments) <= MAX_PARTITIONS:
        return error_result(name, ErrorCode.INVALID_PARTITIONS,
                            f"Number of partitions must be between 1 and {MAX_PARTITIONS}.")
    over = partitions_over(budget[0], len(assignments), ctx.config.max_partitions)
    if over:
        ctx.refusals.refuse(PARTITIONS)
        return error_result(name, ErrorCode.POLICY_VIOLATION, over)
    budget[0] += len(assignments)
    topic_id = None
    if not validate_only:
        topic_id = new_topic_id(ctx.replication.rng)
        records.append(TopicRecord(name=name, topic_id=topic_id))
        records += [ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=v)
                    for k, v in sorted(configs.items()) if v is not None]
        records += [PartitionRecord(partition_id=i, topic_id=topic_id, replicas=list(r), isr=list(r), leader=-1,
                                    leader_epoch=-1, partition_epoch=0, directories=image.directories_of(r))
                    for i, r in enumerate(assignments)]
    return created_result(name, len(assignments), len(assignments[0]), config, set(configs), topic_id)


def _assignments(ctx, controller, topic) -> list[list[int]]:
    image = controller.image
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise PlacementError("INVALID_REQUEST", "Both assignments and numPartitions/replicationFactor were set.")
        ordered = sorted(topic.assignments, key=lambda a: a.partition_index)
        if [a.partition_index for a in ordered] != list(range(len(ordered))):
            raise PlacementError("INVALID_REPLICA_ASSIGNMENT", "Partitions must be numbered 0..n-1.")
        assignments = [list(a.broker_ids) for a in ordered]
        check_assignment(assignments, set(image.brokers))
        return assignments
    live = [b.node_id for b in image.live_brokers()]
    count = topic.num_partitions if topic.num_partitions != -1 else ctx.config.default_partitions
    if not 1 <= count <= MAX_PARTITIONS:
        return [[]] * 0
    rf = topic.replication_factor
    if rf == -1:
        rf = ctx.config.default_replication_factor or min(3, len(live))
        rf = min(rf, len(live)) if ctx.config.default_replication_factor is None else rf
    if rf == 0:
        raise PlacementError("INVALID_REPLICATION_FACTOR", "No live brokers.")
    start = controller.next_placement_start(len(live))
    return place_replicas(live, count, rf, start)


def fail_all(request, error: ErrorCode):
    return CreateTopicsResponse(throttle_time_ms=0, topics=[error_result(t.name, error, None) for t in request.topics])


def created_result(name: str, count: int, replication_factor: int, config, explicit: set, topic_id):
    result = Result(name=name, error_code=0, error_message=None, num_partitions=count,
                    replication_factor=replication_factor, configs=[
                        ConfigEntry(name=k, value=v, read_only=False, is_sensitive=False,
                                    config_source=1 if k in explicit else DEFAULT_CONFIG_SOURCE)
                        for k, v in sorted(config.to_kafka_configs().items())])
    if topic_id is not None:
        result.topic_id = topic_id
    return result


def error_result(name: str, code: ErrorCode, message: str | None):
    return Result(name=name, error_code=code, error_message=message, num_partitions=-1, replication_factor=-1,
                  configs=None)
