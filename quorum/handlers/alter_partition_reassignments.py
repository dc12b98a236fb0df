"""AlterPartitionReassignments (api 45, v0; KIP-455): move partitions to new replicas, or cancel
a move (a null target). ALTER on the cluster. A node that is not the controller forwards it; the
controller records each move (quorum/metadata/reassignments.py) and answers once that commits.
The move itself happens afterwards, in each partition's Raft group (quorum/metadata/replica_moves.py)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import AlterPartitionReassignmentsResponse as Response

from ..limits import capped_timeout
from ..metadata.acls import Operation, ResourceType
from ..metadata.names import METADATA_TOPIC
from ..metadata.reassignments import reassign
from ..outcomes import Respond

TopicOut = Response.ReassignableTopicResponse
PartitionOut = Response.ReassignablePartitionResponse


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is None:
        return Respond(fail_all(request, ErrorCode.INVALID_REQUEST, "No cluster: kraftd was started without voters"))
    if not ctx.authorizer.allows(peer, Operation.ALTER, ResourceType.CLUSTER):
        return Respond(fail_all(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    controller = ctx.plane.active_controller()
    timeout_ms = capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals)
    if controller is None:
        if peer.is_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail_all(request, ErrorCode.NOT_CONTROLLER))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, lambda r, e: fail_all(r, e))
    image = controller.image
    records, topics_out, results, seen = [], [], [], set()
    for topic in request.topics:
        info_topic = image.topic(topic.name) if topic.name != METADATA_TOPIC else None
        parts_out = []
        for p in topic.partitions:
            info = info_topic.partitions.get(p.partition_index) if info_topic is not None else None
            if (topic.name, p.partition_index) in seen:
                error, message, record = ErrorCode.INVALID_REQUEST, "The partition is named twice", None
            else:
                error, message, record = reassign(image, info, p.replicas)
            seen.add((topic.name, p.partition_index))
            if record is not None:
                records.append(record)
            result = PartitionOut(partition_index=p.partition_index, error_code=error, error_message=message)
            parts_out.append(result)
            results.append(result)
        topics_out.append(TopicOut(name=topic.name, partitions=parts_out))
    response = Response(throttle_time_ms=0, error_code=0, error_message=None, responses=topics_out)

    def fail(error):
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code = error

    return controller.answer_once_committed(records, response, fail, timeout_ms, now_ms)


def fail_all(request, error: ErrorCode, message: str | None = None):
    return Response(throttle_time_ms=0, error_code=error, error_message=message, responses=[
        TopicOut(name=t.name, partitions=[PartitionOut(partition_index=p.partition_index, error_code=error,
                                                       error_message=message) for p in t.partitions])
        for t in request.topics])
