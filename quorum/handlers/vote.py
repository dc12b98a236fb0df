"""Vote (api 52, v0–2): KIP-595 votes and KIP-996 pre-votes, one request for many groups."""
from __future__ import annotations

from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.messages import VoteResponse

from .quorum_common import answer, cluster_id_error, groups_of


def handle(ctx, header, request, now_ms, peer):
    error = cluster_id_error(ctx, request.cluster_id)
    if error:
        return answer(ctx, VoteResponse(error_code=error, topics=[]))
    if header.request_api_version >= 1 and request.voter_id >= 0 and request.voter_id != ctx.node_id:
        return answer(ctx, VoteResponse(error_code=ErrorCode.INVALID_VOTER_KEY, topics=[]))
    topics: dict = {}
    for name, p, group in groups_of(ctx, request.topics):
        out = VoteResponse.PartitionData(partition_index=p.partition_index, error_code=0, leader_id=-1,
                                         leader_epoch=-1, vote_granted=False)
        if group is None:
            out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            pre_vote = header.request_api_version >= 2 and p.pre_vote
            out.error_code, out.vote_granted = group.on_vote_request(
                p.replica_id, p.replica_epoch, p.last_offset_epoch, p.last_offset, pre_vote, now_ms)
            out.leader_id, out.leader_epoch = group.leader_id, group.epoch
        topics.setdefault(name, []).append(out)
    return answer(ctx, VoteResponse(error_code=0, topics=[
        VoteResponse.TopicData(topic_name=n, partitions=ps) for n, ps in topics.items()]))
