"""BrokerRegistration on the controller: a node's id, listener and directory id (v2+ LogDirs)
become a RegisterBrokerRecord (unfenced); the broker epoch is the record's offset."""
from __future__ import annotations

from ...protocol.messages import BrokerRegistrationResponse

from .image import BrokerInfo, register_broker_record


def register(controller, request, now_ms: int):
    listener = request.listeners[0] if request.listeners else None
    epoch = controller.partition.log.log_end_offset
    broker = BrokerInfo(request.broker_id, listener.host if listener else "", listener.port if listener else 0,
                        request.incarnation_id, epoch, fenced=False, rack=request.rack,
                        directory_id=request.log_dirs[0] if request.log_dirs else None)
    end = controller.append([register_broker_record(broker)], now_ms)
    response = BrokerRegistrationResponse(throttle_time_ms=0, error_code=0, broker_epoch=epoch)

    def fail(error):
        response.error_code = error

    return controller.park(response, end, fail, 5000, now_ms)
