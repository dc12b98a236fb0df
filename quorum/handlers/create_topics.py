"""CreateTopics: on a single node, validated against it (replication factor 1); in a cluster the
controller creates (quorum/metadata/topic_creation.py) and any other node forwards the request to
it (a node never forwards a forwarded request: NOT_CONTROLLER). A topic the caller may not
create (CREATE on the cluster or the topic) is TOPIC_AUTHORIZATION_FAILED, decided where the
request arrives; the rest go on."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import CreateTopicsResponse

from ..limits import PARTITIONS, capped_timeout, partitions_over
from ..metadata.topic_creation import create_topics, created_result, error_result, fail_all
from ..log_opening import opened_key
from ..outcomes import Park, Respond
from .metadata_topics import may_create
from ..topics import MAX_PARTITIONS, TopicCreating, TopicError


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is not None:
        refused = [error_result(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                   for t in request.topics if not may_create(ctx, peer, t.name)]
        if refused:
            names = {r.name for r in refused}
            request.topics = [t for t in request.topics if t.name not in names]
            if not request.topics:
                return Respond(CreateTopicsResponse(throttle_time_ms=0, topics=refused))
        return _clustered(ctx, header, request, now_ms, from_node=peer.is_node, refused=refused)
    seen: set[str] = set()
    duplicates = {t.name for t in request.topics if t.name in seen or seen.add(t.name)}
    budget = [ctx.partition_count()]  # partitions held, plus those this request adds
    opening: list = []  # the results of topics whose logs are being opened off the loop
    results = [_create_one(ctx, topic, request.validate_only, duplicates, budget, opening) for topic in request.topics]
    response = CreateTopicsResponse(throttle_time_ms=0, topics=results)
    if not opening or request.timeout_ms <= 0:  # (timeout 0: started, not waited for, as in Kafka)
        return Respond(response)
    wait = _UntilServed(ctx.topics, response, opening, now_ms + capped_timeout(
        request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals))
    return Respond(response) if wait.try_complete(now_ms) is not None else Park(ctx.purgatory.park(wait))


def _create_one(ctx, topic, validate_only: bool, duplicates: set, budget: list, opening: list) -> object:
    if topic.name in duplicates:
        return error_result(topic.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name in the request.")
    if ctx.topics.pending(topic.name) is not None:
        return error_result(topic.name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
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
            try:
                created = ctx.create_topic(topic.name, count, configs)
            except TopicCreating as creating:
                created = creating.pending
                opening.append(created)
            config, topic_id = created.config, created.topic_id
            budget[0] += count
    except TopicError as exc:
        return error_result(topic.name, ErrorCode[exc.error_name], str(exc))
    return created_result(topic.name, count, 1, config, set(configs), topic_id)


class _UntilServed:
    """A CreateTopics answered once each topic it created is served here (its logs opened off
    the loop, quorum/log_opening.py). One deleted meanwhile, or whose logs failed to open, gets
    UNKNOWN_SERVER_ERROR; at the timeout the others get REQUEST_TIMED_OUT (the creation goes on)."""

    def __init__(self, topics, response, opening: list, deadline_ms: int) -> None:
        self.topics = topics
        self.response = response
        self.opening = opening
        self.deadline_ms = deadline_ms
        self._served = 0  # opening[:_served] are no longer pending (a topic never is again)

    def watch_keys(self):
        return [opened_key(p.name) for p in self.opening]

    def try_complete(self, now_ms: int):
        # (woken once per topic served: scanning on from the first still pending keeps a
        # CreateTopics of N topics O(N), not O(N²), on the loop)
        opening, n = self.opening, self._served
        while n < len(opening) and self.topics.pending(opening[n].name) is not opening[n]:
            n += 1
        self._served = n
        if n < len(opening):
            return None
        for pending in self.opening:
            served = self.topics.get(pending.name)
            if served is None or served.topic_id != pending.topic_id:
                self._fail(pending.name, ErrorCode.UNKNOWN_SERVER_ERROR,
                           f"Topic '{pending.name}' was deleted, or its logs failed to open, before it was served.")
        return self.response

    def expire(self, now_ms: int):
        for pending in self.opening:
            if self.topics.pending(pending.name) is pending:
                self._fail(pending.name, ErrorCode.REQUEST_TIMED_OUT, None)
        return self.response

    def _fail(self, name: str, code: ErrorCode, message: str | None) -> None:
        for result in self.response.topics:
            if result.name == name:
                result.error_code, result.error_message = code, message


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


def _clustered(ctx, header, request, now_ms, *, from_node: bool, refused: list):
    controller = ctx.plane.active_controller()
    timeout_ms = capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals)
    if controller is None:
        if from_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail_all(request, ErrorCode.NOT_CONTROLLER))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, fail_all,
                                 amend=lambda response: response.topics.extend(refused))
    return create_topics(ctx, controller, request, timeout_ms, now_ms, refused)
