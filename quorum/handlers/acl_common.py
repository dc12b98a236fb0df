"""What CreateAcls, DescribeAcls and DeleteAcls share: Kafka answers SECURITY_DISABLED when no
authorizer is configured, and the ACLs live in the metadata log (a node started without voters
has none)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

NO_AUTHORIZER = "No Authorizer is configured (authorizer = \"acl\" turns ACLs on)."


def unavailable(ctx) -> tuple[ErrorCode, str] | None:
    """(error, message) if this node keeps no ACLs, else None."""
    if not ctx.authorizer.enabled or ctx.plane is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    return None
