"""DeleteTopics v0–6: by name (v0–5) or by name or id (v6). In a cluster the controller writes a
RemoveTopicRecord per topic and answers once it commits; each replica then deletes its files as
it replays the record. On a single node the topic and its files go at once. A topic the caller
may not DELETE is TOPIC_AUTHORIZATION_FAILED (by id: when this node's image knows the id),
decided where the request arrives."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteTopicsResponse, RemoveTopicRecord

from ..limits import capped_timeout
from ..metadata.acls import Operation, ResourceType
from ..metadata.names import METADATA_TOPIC
from ..outcomes import Respond

Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = None


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    wanted = ([(t.name, t.topic_id) for t in request.topics] if version >= 6
              else [(name, None) for name in request.topic_names])
    if ctx.plane is None:
        return Respond(DeleteTopicsResponse(throttle_time_ms=0, responses=[
            _delete_local(ctx, name, topic_id) for name, topic_id in wanted]))
    refused = _refused(ctx, peer, wanted)
    if refused:
        wanted = [w for w in wanted if w not in refused]
        if version >= 6:
            request.topics = [t for t in request.topics if (t.name, t.topic_id) not in refused]
        else:
            request.topic_names = [name for name, _ in wanted]
        if not wanted:
            return Respond(DeleteTopicsResponse(throttle_time_ms=0, responses=list(refused.values())))
    controller = ctx.plane.active_controller()
    timeout_ms = capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals)
    if controller is None:
        if peer.is_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail_all(request, ErrorCode.NOT_CONTROLLER, version))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, lambda r, e: fail_all(r, e, version),
                                 amend=lambda response: response.responses.extend(refused.values()))
    records: list = []
    results = []
    for name, topic_id in wanted:
        topic = _find(controller.image, name, topic_id)
        if topic is None:
            results.append(_result(name, topic_id, _unknown(name, topic_id)))
            continue
        records.append(RemoveTopicRecord(topic_id=topic.topic_id))
        results.append(_result(topic.name, topic.topic_id, ErrorCode.NONE))
    response = DeleteTopicsResponse(throttle_time_ms=0, responses=results + list(refused.values()))
    return controller.commit_results(records, response, results, timeout_ms, now_ms)


def _refused(ctx, peer, wanted) -> dict:
    """{(name, id) as asked: its TOPIC_AUTHORIZATION_FAILED result} for what the caller may not delete."""
    out = {}
    for asked in wanted:
        name, topic_id = asked
        if name is None:
            topic = ctx.plane.image.topics.get(topic_id)
            if topic is None:
                continue  # (the controller answers UNKNOWN_TOPIC_ID)
            name = topic.name
        if not ctx.authorizer.allows(peer, Operation.DELETE, ResourceType.TOPIC, name):
            out[asked] = _result(name, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return out


def _find(image, name, topic_id):
    if name is not None:
        if name == METADATA_TOPIC:
            return None
        topic = image.topic(name)
        return topic if topic is not None and (topic_id is None or _is_zero(topic_id) or topic.topic_id == topic_id) else None
    return image.topics.get(topic_id)


def _delete_local(ctx, name, topic_id):
    topics = ctx.topics
    if name is not None:
        topic = topics.get(name) or topics.pending(name)  # (pending: its logs are being opened)
    else:
        topic = topics.get_by_id(topic_id) or topics.pending_by_id(topic_id)
    if topic is None or topic.name == METADATA_TOPIC:
        return _result(name, topic_id, _unknown(name, topic_id))
    ctx.delete_topic(topic.name)
    return _result(topic.name, topic.topic_id, ErrorCode.NONE)


def _unknown(name, topic_id) -> ErrorCode:
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else ErrorCode.UNKNOWN_TOPIC_ID


def _is_zero(topic_id) -> bool:
    return topic_id is None or topic_id.int == 0


def _result(name, topic_id, error: ErrorCode):
    out = Result(name=name, error_code=error, error_message=None)
    if topic_id is not None:
        out.topic_id = topic_id
    return out


def fail_all(request, error: ErrorCode, version: int):
    wanted = ([(t.name, t.topic_id) for t in request.topics] if version >= 6
              else [(name, None) for name in request.topic_names])
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[_result(n, i, error) for n, i in wanted])
