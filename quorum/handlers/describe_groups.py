"""DescribeGroups (v0-5): state, protocol and members; a group not known here is Dead. A group
the caller may not DESCRIBE is GROUP_AUTHORIZATION_FAILED; what it may do with a group is in
AuthorizedOperations when asked (v3+)."""
from __future__ import annotations

from ...protocol.messages import DescribeGroupsResponse as R

from ..groups.state import GroupState as S
from ..authorizer import NOT_REQUESTED
from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import checked_group, coordinator_of


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    asked = header.request_api_version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        out = _describe(ctx, coordinator, peer, group_id, now_ms)
        if asked and out.error_code == 0:
            out.authorized_operations = ctx.authorizer.authorized_operations(peer, ResourceType.GROUP, group_id)
        groups.append(out)
    return Respond(R(throttle_time_ms=0, groups=groups))


def _describe(ctx, coordinator, peer, group_id, now_ms):
    error = checked_group(ctx, coordinator, peer, Operation.DESCRIBE, group_id, now_ms)
    group = coordinator.group(group_id) if not error else None
    if group is None:
        return R.DescribedGroup(error_code=error, group_id=group_id, group_state=S.DEAD.value, protocol_type="",
                                protocol_data="", members=[], authorized_operations=NOT_REQUESTED)
    stable = group.is_(S.STABLE)  # metadata and assignments are only meaningful there
    members = [R.DescribedGroupMember(
        member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
        member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
        member_assignment=m.assignment if stable else b"") for m in group.members.values()]
    return R.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state.value,
                            protocol_type=group.protocol_type or "", protocol_data=group.protocol_name or "" if stable else "",
                            members=members, authorized_operations=NOT_REQUESTED)
