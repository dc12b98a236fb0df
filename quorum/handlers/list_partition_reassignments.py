"""ListPartitionReassignments (api 46, v0; KIP-455): the partitions moving now, with their
replicas, the replicas being added and those being removed. DESCRIBE on the cluster; answered by
the controller (a node that is not forwards it), from what it has recorded."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ListPartitionReassignmentsResponse as Response

from ..limits import capped_timeout
from ..metadata.acls import Operation, ResourceType
from ..metadata.reassignments import ongoing
from ..outcomes import Respond

TopicOut = Response.OngoingTopicReassignment
PartitionOut = Response.OngoingPartitionReassignment


def handle(ctx, header, request, now_ms, peer):
    if ctx.plane is None:
        return Respond(fail(ErrorCode.INVALID_REQUEST, "No cluster: kraftd was started without voters"))
    if not ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.CLUSTER):
        return Respond(fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    controller = ctx.plane.active_controller()
    if controller is None:
        if peer.is_node:
            return Respond(fail(ErrorCode.NOT_CONTROLLER))
        timeout_ms = capped_timeout(request.timeout_ms, ctx.config.request_timeout_cap_ms, ctx.refusals)
        return ctx.plane.forward(header, request, now_ms, timeout_ms, lambda _r, e: fail(e))
    wanted = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
    topics = [TopicOut(name=name, partitions=[
        PartitionOut(partition_index=p.index, replicas=list(p.replicas), adding_replicas=list(p.adding),
                     removing_replicas=list(p.removing)) for p in moving])
        for name, moving in ongoing(controller.image, wanted)]
    return Respond(Response(throttle_time_ms=0, error_code=0, error_message=None, topics=topics))


def fail(error: ErrorCode, message: str | None = None):
    return Response(throttle_time_ms=0, error_code=error, error_message=message, topics=[])
