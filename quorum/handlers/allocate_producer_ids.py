"""AllocateProducerIds (controller side): the adapter; quorum/metadata/producer_id_blocks.py allocates."""
from __future__ import annotations

from ...protocol.messages import AllocateProducerIdsResponse

from ..metadata.producer_id_blocks import allocate
from ..outcomes import Respond
from .controller_common import controller_or_error


def handle(ctx, header, request, now_ms, peer):
    controller, error = controller_or_error(ctx)
    if controller is None:
        return Respond(AllocateProducerIdsResponse(throttle_time_ms=0, error_code=error, producer_id_start=-1,
                                                   producer_id_len=0))
    return allocate(controller, request, now_ms)

