"""CreateAcls v0–3: the controller turns each valid creation into an AccessControlEntryRecord
(a new id each) and answers once they commit; another node forwards the request to it. The
caller needs ALTER on the cluster (checked where the request arrives: a forwarded request comes
from a node). One result per creation, in request order; an invalid one is INVALID_REQUEST and
does not stop the others. Creating a binding that exists already adds nothing (Kafka's
controller keeps one copy of an ACL)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import AccessControlEntryRecord, CreateAclsResponse

from ..metadata.acls import AclBinding, creation_problem
from ..metadata.controller import new_topic_id
from .acl_common import at_controller

Result = CreateAclsResponse.AclCreationResult


def handle(ctx, header, request, now_ms, peer):
    controller, outcome = at_controller(ctx, header, request, now_ms, peer, fail_all)
    if controller is None:
        return outcome
    existing = set(controller.image.acls.values())
    records, results = [], []
    for c in request.creations:
        binding = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                             c.operation, c.permission_type)
        problem = creation_problem(binding)
        if problem is not None:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=problem))
            continue
        results.append(Result(error_code=ErrorCode.NONE, error_message=None))
        if binding not in existing:
            existing.add(binding)
            records.append(AccessControlEntryRecord(
                id=new_topic_id(ctx.replication.rng), resource_type=binding.resource_type,
                resource_name=binding.resource_name, pattern_type=binding.pattern_type,
                principal_name=binding.principal, host=binding.host, operation=binding.operation,
                permission_type=binding.permission))
    response = CreateAclsResponse(throttle_time_ms=0, results=results)
    return controller.commit_results(records, response, [r for r in results if r.error_code == 0],
                                     ctx.config.request_timeout_cap_ms, now_ms)


def fail_all(request, error: ErrorCode, message: str | None = None):
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=error, error_message=message) for _ in request.creations])
