"""What the group-protocol handlers share: the coordinator, the authorization check, and
parking a write's answer."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..groups.coordinator import coordinator_of
from ..groups.writes import DelayedWrite
from ..metadata.acls import ResourceType
from ..outcomes import Park, Respond

__all__ = ["coordinator_of", "answer_after_write", "checked_group", "OUTCOME_ERRORS"]

# A write's outcome, as the error a client retries on.
OUTCOME_ERRORS = {"committed": ErrorCode.NONE, "moved": ErrorCode.NOT_COORDINATOR,
                  "timeout": ErrorCode.REQUEST_TIMED_OUT}


def answer_after_write(ctx, partition, end_offset: int, timeout_ms: int, now_ms: int, finish):
    """Respond once the records before `end_offset` are committed; `finish(outcome, now_ms)`."""
    op = DelayedWrite(partition, end_offset, now_ms + timeout_ms, finish)
    response = op.try_complete(now_ms)
    if response is not None:
        return Respond(response)
    return Park(ctx.purgatory.park(op))


def checked_group(ctx, coordinator, peer, operation: int, group_id: str, now_ms: int) -> ErrorCode:
    """The first error of a group request: GROUP_AUTHORIZATION_FAILED if the caller may not do
    `operation` on the group (Kafka checks that first), else the coordinator's check."""
    if not ctx.authorizer.allows(peer, operation, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return coordinator.check(group_id, now_ms)
