"""What the group-protocol handlers share: the coordinator, and parking a write's answer."""
from __future__ import annotations

from ...protocol.errors import ErrorCode

from ..groups.coordinator import coordinator_of
from ..groups.writes import DelayedWrite
from ..outcomes import Park, Respond

__all__ = ["coordinator_of", "answer_after_write", "OUTCOME_ERRORS"]

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
