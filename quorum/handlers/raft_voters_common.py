"""What AddRaftVoter and RemoveRaftVoter share (KIP-853): ALTER on the cluster, a node that is
not the controller forwards the request to it, and the controller answers once the new voter
set has committed."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond

MESSAGES = {
    ErrorCode.REQUEST_TIMED_OUT: "The leader cannot take the change yet: the last change, or its own epoch, has not "
                                 "committed, or the new voter has not caught up (its fetches reach the HW); retry",
    ErrorCode.DUPLICATE_VOTER: "The node is a voter already",
    ErrorCode.VOTER_NOT_FOUND: "No such voter (node id and directory id)",
    ErrorCode.INVALID_REQUEST: "The change is not possible (a new voter needs a directory id; the last voter "
                               "cannot be removed)",
}


def change_voters(ctx, header, request, now_ms, peer, response_cls, propose):
    """`propose(controller) -> (error, offset)` appends the VotersRecord on the controller."""
    def fail(error, message=None):
        return response_cls(throttle_time_ms=0, error_code=error, error_message=message)

    if ctx.plane is None:
        return Respond(fail(ErrorCode.INVALID_REQUEST, "No metadata quorum: kraftd was started without voters"))
    if not ctx.authorizer.allows(peer, Operation.ALTER, ResourceType.CLUSTER):
        return Respond(fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    if request.cluster_id is not None and request.cluster_id != ctx.cluster_id:
        return Respond(fail(ErrorCode.INCONSISTENT_CLUSTER_ID))
    controller = ctx.plane.active_controller()
    timeout_ms = ctx.config.request_timeout_cap_ms
    if controller is None:
        if peer.is_node:  # forwarded to us as the controller: never forward it on
            return Respond(fail(ErrorCode.NOT_CONTROLLER))
        return ctx.plane.forward(header, request, now_ms, timeout_ms, lambda _r, error: fail(error))
    error, offset = propose(controller)
    if error:
        return Respond(fail(error, MESSAGES.get(error)))
    response = fail(ErrorCode.NONE)

    def failed(code):
        response.error_code = code

    return controller.park(response, offset + 1, failed, timeout_ms, now_ms)
