"""DeleteAcls v0–3: the controller removes every binding that matches any filter (one
RemoveAccessControlEntryRecord each) and answers once they commit, each filter with the
bindings it matched; another node forwards the request to it. Needs ALTER on the cluster. An
invalid filter is INVALID_REQUEST and matches nothing."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import DeleteAclsResponse, RemoveAccessControlEntryRecord

from ..metadata.acls import AclFilter
from .acl_common import at_controller

FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def handle(ctx, header, request, now_ms, peer):
    controller, outcome = at_controller(ctx, header, request, now_ms, peer, fail_all)
    if controller is None:
        return outcome
    acls = sorted(controller.image.acls.items(), key=lambda item: (item[1].resource_type, item[1].resource_name,
                                                                   item[1].pattern_type, item[1].principal,
                                                                   item[1].host, item[1].operation))
    removed: set = set()
    records, results = [], []
    for f in request.filters:
        flt = AclFilter.of(f)
        problem = flt.problem()
        if problem is not None:
            results.append(FilterResult(error_code=ErrorCode.INVALID_REQUEST, error_message=problem,
                                        matching_acls=[]))
            continue
        matching = []
        for acl_id, b in acls:
            if not flt.matches(b):
                continue
            matching.append(Matching(error_code=ErrorCode.NONE, error_message=None, resource_type=b.resource_type,
                                     resource_name=b.resource_name, pattern_type=b.pattern_type,
                                     principal=b.principal, host=b.host, operation=b.operation,
                                     permission_type=b.permission))
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(id=acl_id))
        results.append(FilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=matching))
    response = DeleteAclsResponse(throttle_time_ms=0, filter_results=results)
    return controller.commit_results(records, response, [r for r in results if r.error_code == 0],
                                     ctx.config.request_timeout_cap_ms, now_ms)


def fail_all(request, error: ErrorCode, message: str | None = None):
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        FilterResult(error_code=error, error_message=message, matching_acls=[]) for _ in request.filters])
