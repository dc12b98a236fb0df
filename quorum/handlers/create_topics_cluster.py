"""CreateTopics in a cluster: the controller validates, places replicas and writes TopicRecord,
ConfigRecords and PartitionRecords; the answer waits until they commit. Any other node forwards
the request to the controller (a node never forwards a forwarded request: NOT_CONTROLLER)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ConfigRecord, CreateTopicsResponse, PartitionRecord, TopicRecord

from ..limits import PARTITIONS, capped_timeout, partitions_over
from ..metadata.controller import new_topic_id
from ..metadata.image import TOPIC_RESOURCE
from ..metadata.placement import PlacementError, check_assignment, place_replicas
from ..metadata.plane import METADATA_TOPIC
from ..outcomes import Respond
from ..topic_config import InvalidTopicConfig, TopicConfig
from ..topics import MAX_PARTITIONS, topic_name_problem
from .create_topics import created_result, error_result


def handle_clustered(ctx, header, request, now_ms, *, from_node: bool):
    controller = ctx.plane.active_controller()
    timeout_ms = capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals)
    if controller is None:
        if from_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail_all(request, ErrorCode.NOT_CONTROLLER))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, fail_all)
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}
    records: list = []
    budget = [sum(len(t.partitions) for t in controller.image.topics.values())]
    results = [_create(ctx, controller, t, request.validate_only, duplicates, records, budget) for t in request.topics]
    response = CreateTopicsResponse(throttle_time_ms=0, topics=results)
    return controller.commit_results(records, response, results, timeout_ms, now_ms)


def create_request_for(name: str, partitions: int, replication_factor: int = -1, configs: dict | None = None):
    """The CreateTopics a node forwards when a client's Metadata/Produce auto-creates a topic, or
    the group coordinator creates `__consumer_offsets` (with its snapshot-policy configs)."""
    from ...protocol.messages import CreateTopicsRequest
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
        assignments = _assignments(ctx, image, topic)
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
                                    leader_epoch=-1, partition_epoch=0)
                    for i, r in enumerate(assignments)]
    return created_result(name, len(assignments), len(assignments[0]), config, set(configs), topic_id)


def _assignments(ctx, image, topic) -> list[list[int]]:
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
    start = ctx.plane.controller.next_placement_start(len(live))
    return place_replicas(live, count, rf, start)


def fail_all(request, error: ErrorCode):
    return CreateTopicsResponse(throttle_time_ms=0, topics=[error_result(t.name, error, None) for t in request.topics])
