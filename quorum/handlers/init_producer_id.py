"""InitProducerId: ids for idempotent producers (transactions are not supported). Kafka's rule:
the caller needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic, else
CLUSTER_AUTHORIZATION_FAILED."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import InitProducerIdResponse

from ..metadata.acls import Operation, ResourceType
from ..metadata.plane import PID_KEY
from ..outcomes import Park, Respond

MAX_PRODUCER_EPOCH = 32767


def handle(ctx, header, request, now_ms, peer):
    if request.transactional_id is not None:
        # Without a transaction coordinator the honest answer is a fatal authorization error.
        return Respond(InitProducerIdResponse(
            error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1))
    authorizer = ctx.authorizer
    if not (authorizer.allows(peer, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
            or authorizer.allows_any(peer, Operation.WRITE, ResourceType.TOPIC)):
        return Respond(InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                              producer_epoch=-1))
    if request.producer_id >= 0 and request.producer_epoch >= 0:
        # KIP-360: an idempotent producer bumps its own epoch to reset its sequences. Only the
        # epoch it holds may be bumped: an older one is a fenced (zombie) producer; an id this
        # node has no state for, or an epoch at its limit, gets a new id (as Kafka does).
        current = _current_epoch(ctx, request.producer_id)
        if current is not None and request.producer_epoch < current:
            return Respond(InitProducerIdResponse(error_code=ErrorCode.PRODUCER_FENCED, producer_id=-1,
                                                  producer_epoch=-1))
        if current == request.producer_epoch and current < MAX_PRODUCER_EPOCH - 1:
            return Respond(InitProducerIdResponse(
                error_code=0, producer_id=request.producer_id, producer_epoch=current + 1))
    if ctx.plane is not None:
        return _from_cluster_block(ctx, now_ms)
    return Respond(InitProducerIdResponse(error_code=0, producer_id=ctx.allocate_producer_id(), producer_epoch=0))


def _current_epoch(ctx, producer_id: int) -> int | None:
    """The newest epoch of `producer_id` in any partition this node holds (None: unknown)."""
    epochs = [entry.producer_epoch for p in ctx.topics.partitions()
              if (entry := p.log.producer_state.get(producer_id)) is not None]
    return max(epochs) if epochs else None


def _from_cluster_block(ctx, now_ms: int):
    """A cluster hands out ids from blocks the controller allocates (unique cluster-wide);
    when this node's block is used up the request waits for the next one."""
    pid = ctx.plane.allocate_producer_id()
    if pid is not None:
        return Respond(InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0))
    return Park(ctx.purgatory.park(_WaitForBlock(ctx.plane, now_ms + 5000)))


class _WaitForBlock:
    def __init__(self, plane, deadline_ms: int) -> None:
        self.plane = plane
        self.deadline_ms = deadline_ms

    def watch_keys(self):
        return [PID_KEY]

    def try_complete(self, now_ms: int):
        pid = self.plane.allocate_producer_id()
        if pid is None:
            return None
        return InitProducerIdResponse(error_code=0, producer_id=pid, producer_epoch=0)

    def expire(self, now_ms: int):
        # Retriable without a coordinator lookup (clients retry InitProducerId as is), as Kafka
        # answers while a producer-id block is on its way.
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, producer_id=-1,
                                      producer_epoch=-1)
