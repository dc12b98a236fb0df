"""What CreateAcls, DescribeAcls and DeleteAcls share: Kafka answers SECURITY_DISABLED when no
authorizer is configured (the ACLs live in the metadata log: a node started without voters has
none), CLUSTER_AUTHORIZATION_FAILED to a caller without the cluster operation the API needs,
and alterations are made by the controller (another node forwards them)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond

NO_AUTHORIZER = "No Authorizer is configured (authorizer = \"acl\" turns ACLs on)."


def refusal(ctx, peer, operation: int) -> tuple[ErrorCode, str | None] | None:
    """(error, message) if this request is refused before it is looked at, else None."""
    if not ctx.authorizer.enabled or ctx.plane is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not ctx.authorizer.allows(peer, operation, ResourceType.CLUSTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return None


def at_controller(ctx, header, request, now_ms: int, peer, fail_all):
    """(the active controller, None) when this node makes the alteration, else (None, the
    outcome that answers it: a refusal, NOT_CONTROLLER to a forwarding node, or a forward)."""
    refused = refusal(ctx, peer, Operation.ALTER)
    if refused is not None:
        return None, Respond(fail_all(request, *refused))
    controller = ctx.plane.active_controller()
    if controller is not None:
        return controller, None
    if peer.is_node:  # forwarded to us as the controller: never forward it on
        return None, Respond(fail_all(request, ErrorCode.NOT_CONTROLLER))
    return None, ctx.plane.forward(header, request, now_ms, ctx.config.request_timeout_cap_ms, fail_all)
