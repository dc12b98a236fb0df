"""FindCoordinator: kraftd has no group or transaction coordinator, and says so.

Served only so clients see it in ApiVersions: librdkafka enables LZ4 for brokers that list
FindCoordinator v0. COORDINATOR_NOT_AVAILABLE is retriable, so a client that asks (a
confluent-kafka consumer with a group.id) keeps consuming assigned partitions meanwhile.
"""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import FindCoordinatorResponse

from ..outcomes import Respond

MESSAGE = "kraftd has no group or transaction coordinator"


def handle(ctx, header, request, now_ms, peer):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if header.request_api_version >= 4:
        return Respond(FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code,
                                                error_message=MESSAGE)
            for key in request.coordinator_keys]))
    return Respond(FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=MESSAGE,
                                           node_id=-1, host="", port=-1))
