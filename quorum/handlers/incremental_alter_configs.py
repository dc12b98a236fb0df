"""IncrementalAlterConfigs v0–1 (KIP-339): SET, DELETE, APPEND and SUBTRACT on a topic's
configs, validated as CreateTopics validates them (and cleanup.policy never to or from
snapshot). On a single node the catalog and the live topic take them at once; in a cluster
the controller writes ConfigRecords (another node forwards the request) and every node
applies them as the metadata image moves (Hosting.reconcile). ALTER_CONFIGS on the topic.
Broker configs are static (kraftd.toml): INVALID_REQUEST."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import ConfigRecord, IncrementalAlterConfigsResponse

from ..metadata.acls import Operation
from ..metadata.image import TOPIC_RESOURCE
from ..outcomes import Respond
from .config_common import TOPIC, ConfigProblem, altered, topic_configs

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def handle(ctx, header, request, now_ms, peer):
    controller = None
    if ctx.plane is not None:
        controller = ctx.plane.active_controller()
        if controller is None:
            if peer.is_node:  # forwarded to us as the controller: never forward it on
                return Respond(_fail_all(request, ErrorCode.NOT_CONTROLLER))
            return ctx.plane.forward(header, request, now_ms, ctx.config.request_timeout_cap_ms, _fail_all)
    results, changes = [], []
    seen: set = set()
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        try:
            if key in seen:
                raise ConfigProblem(ErrorCode.INVALID_REQUEST, "The resource appears more than once in the request.")
            seen.add(key)
            if resource.resource_type != TOPIC:
                raise ConfigProblem(ErrorCode.INVALID_REQUEST, "Only topic configs can be altered: broker configs "
                                                               "come from the node's settings (kraftd.toml).")
            current = topic_configs(ctx, resource.resource_name, peer, Operation.ALTER_CONFIGS,
                                    controller.image if controller is not None else None)
            new, _ = altered(current, resource.configs, ctx.config)
            changes.append((resource.resource_name, current, new))
            results.append(_result(resource, ErrorCode.NONE, None))
        except ConfigProblem as problem:
            results.append(_result(resource, problem.code, problem.message))
    response = IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)
    if request.validate_only:
        return Respond(response)
    if ctx.plane is None:
        for name, _, new in changes:
            ctx.topics.reconfigure(name, new)
        return Respond(response)
    records = [ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name=k, value=new.get(k))
               for name, current, new in changes for k in sorted(set(current) | set(new)) if current.get(k) != new.get(k)]
    ok = [r for r in results if r.error_code == ErrorCode.NONE]
    return controller.commit_results(records, response, ok, ctx.config.request_timeout_cap_ms, now_ms)


def _result(resource, code, message) -> Result:
    return Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name)


def _fail_all(request, error, message=None):
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[_result(r, error, message)
                                                                           for r in request.resources])
