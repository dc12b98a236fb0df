"""InitProducerId: ids for idempotent producers (transactions are not supported)."""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import InitProducerIdResponse

from ..outcomes import Respond

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
    return Respond(InitProducerIdResponse(error_code=0, producer_id=ctx.allocate_producer_id(), producer_epoch=0))
