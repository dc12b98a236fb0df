"""ListGroups (v0-5): the groups this node coordinates, with states (v4+) and types (v5+). As on
Kafka, a caller that may not DESCRIBE the cluster sees only the groups it may DESCRIBE."""
from __future__ import annotations

from ...protocol.messages import ListGroupsResponse

from ..groups.state import GroupState as S
from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import coordinator_of

GROUP_TYPE = "classic"


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    led = set(coordinator.led_partitions(now_ms))
    states = {s.lower() for s in request.states_filter}
    types = {t.lower() for t in request.types_filter}
    authorizer = ctx.authorizer
    every_group = authorizer.allows(peer, Operation.DESCRIBE, ResourceType.CLUSTER)
    out = []
    for group in sorted(coordinator.groups.values(), key=lambda g: g.group_id):
        if group.partition not in led or group.state is S.DEAD:
            continue
        if (states and group.state.value.lower() not in states) or (types and GROUP_TYPE not in types):
            continue
        if not every_group and not authorizer.allows(peer, Operation.DESCRIBE, ResourceType.GROUP, group.group_id):
            continue
        out.append(ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                                                  group_state=group.state.value, group_type=GROUP_TYPE))
    return Respond(ListGroupsResponse(throttle_time_ms=0, error_code=0, groups=out))
