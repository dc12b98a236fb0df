"""BeginQuorumEpoch (api 53, v0–1): a new leader tells the voters of its groups. A node follows
the leader of a newer epoch even when its own log's voter set does not hold it yet (KIP-853)."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import BeginQuorumEpochResponse as Response

from .quorum_common import answer_partitions


def handle(ctx, header, request, now_ms, peer):
    def decide(p, group):
        out = Response.PartitionData(partition_index=p.partition_index, error_code=0, leader_id=-1, leader_epoch=-1)
        if group is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            # (whether or not our log's voter set holds the leader yet: with dynamic voters the
            # leader's set may be newer than ours, which we learn by following it; KIP-853)
            out.error_code = group.on_begin_epoch(p.leader_id, p.leader_epoch, now_ms)
            out.leader_id, out.leader_epoch = group.leader_id, group.epoch
        return out
    return answer_partitions(ctx, request, Response, decide)
