"""AllocateProducerIds on the controller: a block of producer ids, unique across the cluster,
taken from the metadata log's counter (a ProducerIdsRecord moves it past the block)."""
from __future__ import annotations

from ...protocol.messages import AllocateProducerIdsResponse, ProducerIdsRecord

from .controller import PRODUCER_ID_BLOCK


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
