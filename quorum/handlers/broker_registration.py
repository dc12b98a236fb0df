"""BrokerRegistration (controller side): a node announces its id and listener; the controller
records it (unfenced) as a RegisterBrokerRecord. The broker epoch is the record's offset."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import BrokerRegistrationResponse

from ..metadata.image import BrokerInfo, register_broker_record
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


def register(controller, request, now_ms: int):
    listener = request.listeners[0] if request.listeners else None
    epoch = controller.partition.log.log_end_offset
    broker = BrokerInfo(request.broker_id, listener.host if listener else "", listener.port if listener else 0,
                        request.incarnation_id, epoch, fenced=False, rack=request.rack)
    end = controller.append([register_broker_record(broker)], now_ms)
    response = BrokerRegistrationResponse(throttle_time_ms=0, error_code=0, broker_epoch=epoch)

    def fail(error):
        response.error_code = error

    return controller.park(response, end, fail, 5000, now_ms)
