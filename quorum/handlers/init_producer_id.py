"""InitProducerId: ids for idempotent producers (transactions are not supported)."""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import InitProducerIdResponse

from ..outcomes import Park, Respond

MAX_PRODUCER_EPOCH = 32767


def handle(ctx, header, request, now_ms, peer):
    if request.transactional_id is not None:
        # Without a transaction coordinator the honest answer is a fatal authorization error.
        return Respond(InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1))
    if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_PRODUCER_EPOCH - 1:
        # KIP-360: an idempotent producer may bump its own epoch to reset sequences.
        return Respond(InitProducerIdResponse(
            error_code=0, producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1))
    if ctx.plane is not None:
        return _from_cluster_block(ctx, now_ms)
    return Respond(InitProducerIdResponse(error_code=0, producer_id=ctx.allocate_producer_id(), producer_epoch=0))


def _from_cluster_block(ctx, now_ms: int):
    """A cluster hands out ids from blocks the controller allocates (unique cluster-wide);
    when this node's block is used up the request waits for the next one."""
    pid = ctx.plane.allocate_producer_id()
    if pid is not None:
        return Respond(InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0))
    return Park(ctx.purgatory.park(_WaitForBlock(ctx.plane, now_ms + 5000)))


class _WaitForBlock:
    def __init__(self, plane, deadline_ms: int) -> None:
        self.plane = plane
        self.deadline_ms = deadline_ms

    def watch_keys(self):
        from ..metadata.plane import PID_KEY
        return [PID_KEY]

    def try_complete(self, now_ms: int):
        pid = self.plane.allocate_producer_id()
        if pid is None:
            return None
        return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)

    def expire(self, now_ms: int):
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1,
                                      producer_epoch=-1)
