"""UpdateRaftVoter (api 82, v0; KIP-853): a voter tells the metadata quorum's leader its listener,
and the leader records it in a VotersRecord (the same voters: no membership change, but one
change at a time all the same). Node-only: a node may send it for itself alone."""
from __future__ import annotations

from ...protocol.errors import ErrorCode
from ...protocol.messages import UpdateRaftVoterResponse as Response

from ..outcomes import Respond
from ..raft.membership import propose_update_voter
from ..raft.voter_set import Voter


def handle(ctx, header, request, now_ms, peer):
    plane = ctx.plane
    group = plane.partition.raft if plane is not None and plane.partition is not None else None

    def answer(error):
        out = Response(throttle_time_ms=0, error_code=error)
        if group is not None:
            out.current_leader = Response.CurrentLeader(leader_id=group.leader_id, leader_epoch=group.epoch,
                                                        host="", port=0)
            broker = plane.image.brokers.get(group.leader_id)
            if broker is not None:
                out.current_leader.host, out.current_leader.port = broker.host, broker.port
        return out

    if group is None:
        return Respond(answer(ErrorCode.INVALID_REQUEST))
    if request.cluster_id is not None and request.cluster_id != ctx.cluster_id:
        return Respond(answer(ErrorCode.INCONSISTENT_CLUSTER_ID))
    if not group.is_leader:
        return Respond(answer(ErrorCode.NOT_LEADER_OR_FOLLOWER))
    if request.current_leader_epoch != group.epoch:
        return Respond(answer(ErrorCode.FENCED_LEADER_EPOCH if request.current_leader_epoch < group.epoch
                              else ErrorCode.UNKNOWN_LEADER_EPOCH))
    controller = plane.active_controller()
    if controller is None:
        return Respond(answer(ErrorCode.REQUEST_TIMED_OUT))
    listener = request.listeners[0] if request.listeners else None
    directory = request.voter_directory_id if request.voter_directory_id.int else None
    voter = Voter(request.voter_id, directory, listener.host if listener else "", listener.port if listener else 0)
    error, offset = propose_update_voter(group, voter, now_ms)
    if error or offset < 0:
        return Respond(answer(error))
    response = answer(ErrorCode.NONE)

    def failed(code):
        response.error_code = code

    return controller.park(response, offset + 1, failed, ctx.config.request_timeout_cap_ms, now_ms)
