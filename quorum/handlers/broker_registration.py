"""BrokerRegistration (controller side): the adapter; quorum/metadata/registration.py writes the record."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import BrokerRegistrationResponse

from ..metadata.registration import register
from ..outcomes import Respond
from .controller_common import controller_or_error


def handle(ctx, header, request, now_ms, peer):
    controller, error = controller_or_error(ctx)
    if controller is None:
        return Respond(BrokerRegistrationResponse(throttle_time_ms=0, error_code=error, broker_epoch=-1))
    if request.cluster_id != ctx.cluster_id:
        return Respond(BrokerRegistrationResponse(throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                                                  broker_epoch=-1))
    return register(controller, request, now_ms)

