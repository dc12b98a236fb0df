"""AlterPartition (controller side): the adapter; quorum/metadata/partition_reports.py decides."""
from __future__ import annotations

from ...protocol.messages import AlterPartitionResponse

from ..metadata.partition_reports import alter
from ..outcomes import Respond
from .controller_common import controller_or_error


def handle(ctx, header, request, now_ms, peer):
    controller, error = controller_or_error(ctx)
    if controller is None:
        return Respond(AlterPartitionResponse(throttle_time_ms=0, error_code=error, topics=[]))
    return alter(controller, request, header.request_api_version, now_ms)
