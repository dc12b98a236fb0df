"""AllocateProducerIds (controller side): a block of producer ids, unique across the cluster,
taken from the metadata log's counter (a ProducerIdsRecord moves it past the block)."""
from __future__ import annotations

from ...protocol.messages import AllocateProducerIdsResponse, ProducerIdsRecord

from ..metadata.controller import PRODUCER_ID_BLOCK
from ..outcomes import Respond
from .controller_common import controller_or_error


def handle(ctx, header, request, now_ms, peer):
    controller, error = controller_or_error(ctx)
    if controller is None:
        return Respond(AllocateProducerIdsResponse(throttle_time_ms=0, error_code=error, producer_id_start=-1,
                                                   producer_id_len=0))
    return allocate(controller, request, now_ms)


def allocate(controller, request, now_ms: int, on_done=None):
    start = controller.image.next_producer_id
    record = ProducerIdsRecord(broker_id=request.broker_id, broker_epoch=request.broker_epoch,
                               next_producer_id=start + PRODUCER_ID_BLOCK)
    end = controller.append([record], now_ms)
    response = AllocateProducerIdsResponse(throttle_time_ms=0, error_code=0, producer_id_start=start,
                                           producer_id_len=PRODUCER_ID_BLOCK)

    def fail(error):
        response.error_code = error
        response.producer_id_start, response.producer_id_len = -1, 0

    return controller.park(response, end, fail, 5000, now_ms, on_done)
