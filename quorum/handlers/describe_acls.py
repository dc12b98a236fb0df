"""DescribeAcls v0–3: the bindings of this node's committed image that match the filter,
grouped by resource pattern. Needs DESCRIBE on the cluster. (v0, without pattern types, is
not served: Kafka 4 dropped it too.)"""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DescribeAclsResponse

from ..metadata.acls import AclFilter, Operation
from ..outcomes import Respond
from .acl_common import refusal

Resource = DescribeAclsResponse.DescribeAclsResource
Description = DescribeAclsResponse.AclDescription


def handle(ctx, header, request, now_ms, peer):
    refused = refusal(ctx, peer, Operation.DESCRIBE)
    flt = AclFilter.of(request)
    if refused is None and flt.problem() is not None:
        refused = ErrorCode.INVALID_REQUEST, flt.problem()
    if refused is not None:
        return Respond(DescribeAclsResponse(throttle_time_ms=0, error_code=refused[0], error_message=refused[1],
                                            resources=[]))
    grouped: dict = {}
    for b in ctx.plane.image.acls.values():
        if flt.matches(b):
            grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                (b.principal, b.host, b.operation, b.permission))
    resources = [Resource(resource_type=t, resource_name=n, pattern_type=p,
                          acls=[Description(principal=a, host=h, operation=o, permission_type=x)
                                for a, h, o, x in sorted(entries)])
                 for (t, n, p), entries in sorted(grouped.items())]
    return Respond(DescribeAclsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                        resources=resources))
