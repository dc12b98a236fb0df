"""FindCoordinator (v0-4; batched keys from v4): the node leading the `__consumer_offsets`
partition a group hashes to (Kafka's abs(hashCode) mod partitions). The first request creates
the topic, as Kafka does. Transactions are not supported: key type 1 gets
COORDINATOR_NOT_AVAILABLE. A group the caller may not DESCRIBE is GROUP_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import FindCoordinatorResponse

from ..metadata.acls import Operation, ResourceType
from ..outcomes import Respond
from .group_common import coordinator_of

GROUP_KEY_TYPE = 0
NO_TRANSACTIONS = "kraftd has no transaction coordinator"


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    keys = request.coordinator_keys if version >= 4 else [request.key]
    answers = [_find(ctx, key, request.key_type, peer) for key in keys]
    if version >= 4:
        return Respond(FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            FindCoordinatorResponse.Coordinator(key=key, node_id=node, host=host, port=port, error_code=code,
                                                error_message=message)
            for key, (code, message, node, host, port) in zip(keys, answers)]))
    code, message, node, host, port = answers[0]
    return Respond(FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                           node_id=node, host=host, port=port))


def _find(ctx, key: str, key_type: int, peer):
    """(error, message, node id, host, port)."""
    if key_type != GROUP_KEY_TYPE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, NO_TRANSACTIONS, -1, "", -1
    if not ctx.authorizer.allows(peer, Operation.DESCRIBE, ResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, -1, "", -1
    if not key:
        return ErrorCode.INVALID_REQUEST, "empty group id", -1, "", -1
    coordinator = coordinator_of(ctx)
    code = coordinator.ensure_offsets_topic()
    node = coordinator.coordinator_node(key) if code == ErrorCode.NONE else -1
    address = _address(ctx, node)
    if address is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, -1, "", -1
    return ErrorCode.NONE, None, node, address[0], address[1]


def _address(ctx, node: int):
    if node < 0:
        return None
    if node == ctx.node_id:
        return ctx.config.advertised_host, ctx.config.advertised_port
    plane = ctx.plane
    broker = plane.image.brokers.get(node) if plane is not None else None
    if broker is None or broker.fenced or broker.port <= 0:
        return None
    return broker.host, broker.port
