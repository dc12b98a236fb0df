"""Vote (api 52, v0–2): KIP-595 votes and KIP-996 pre-votes, one request for many groups."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import VoteResponse

from .quorum_common import answer, answer_partitions


def handle(ctx, header, request, now_ms, peer):
    version = header.request_api_version
    if version >= 1 and request.voter_id >= 0 and request.voter_id != ctx.node_id:
        return answer(ctx, VoteResponse(error_code=ErrorCode.INVALID_VOTER_KEY, topics=[]))

    def decide(p, group):
        out = VoteResponse.PartitionData(partition_index=p.partition_index, error_code=0, leader_id=-1,
                                         leader_epoch=-1, vote_granted=False)
        if group is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return out
        pre_vote = version >= 2 and p.pre_vote  # (PreVote exists from v2 on)
        # v1+: the directory the candidate takes us for (nil: not said)
        voter_directory = p.voter_directory_id if version >= 1 and p.voter_directory_id.int else None
        out.error_code, out.vote_granted = group.on_vote_request(
            p.replica_id, p.replica_epoch, p.last_offset_epoch, p.last_offset, pre_vote, now_ms, voter_directory)
        out.leader_id, out.leader_epoch = group.leader_id, group.epoch
        return out
    return answer_partitions(ctx, request, VoteResponse, decide)
