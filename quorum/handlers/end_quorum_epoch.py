"""EndQuorumEpoch (api 54, v0–1): a leader resigns and names successors, most caught-up first."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import EndQuorumEpochResponse as Response

from .quorum_common import answer_partitions


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version

    def decide(p, group):
        out = Response.PartitionData(partition_index=p.partition_index, error_code=0, leader_id=-1, leader_epoch=-1)
        if group is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        successors = ([c.candidate_id for c in p.preferred_candidates] if version >= 1
                      else list(p.preferred_successors))
        out.error_code = group.on_end_epoch(p.leader_id, p.leader_epoch, successors, now_ms)
        out.leader_id, out.leader_epoch = group.leader_id, group.epoch
        return out
    return answer_partitions(ctx, request, Response, decide)
