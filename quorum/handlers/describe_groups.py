"""DescribeGroups (v0-5): state, protocol and members; a group not known here is Dead."""
from __future__ import annotations

from ...protocol.messages import DescribeGroupsResponse as R

from ..groups.state import GroupState as S
from ..outcomes import Respond
from .group_common import coordinator_of

AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def handle(ctx, header, request, now_ms, peer):
    coordinator = coordinator_of(ctx)
    return Respond(R(throttle_time_ms=0, groups=[_describe(coordinator, g, now_ms) for g in request.groups]))


def _describe(coordinator, group_id, now_ms):
    error = coordinator.check(group_id, now_ms)
    group = coordinator.group(group_id) if not error else None
    if group is None:
        return R.DescribedGroup(error_code=error, group_id=group_id, group_state=S.DEAD.value, protocol_type="",
                                protocol_data="", members=[], authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
    stable = group.is_(S.STABLE)  # metadata and assignments are only meaningful there
    members = [R.DescribedGroupMember(
        member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id, client_host=m.client_host,
        member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
        member_assignment=m.assignment if stable else b"") for m in group.members.values()]
    return R.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state.value,
                            protocol_type=group.protocol_type or "", protocol_data=group.protocol_name or "" if stable else "",
                            members=members, authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)
