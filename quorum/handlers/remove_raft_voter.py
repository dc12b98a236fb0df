"""RemoveRaftVoter (api 81, v0; KIP-853): the metadata quorum's leader removes a voter, named by
its node id and directory id; a leader that removes itself resigns once the removal commits."""
from __future__ import annotations

from ...protocol.messages import RemoveRaftVoterResponse

from ..raft.membership import VOTER_NOT_FOUND, propose_remove_voter
from .raft_voters_common import change_voters


def handle(ctx, header, request, now_ms, peer):
    directory = request.voter_directory_id if request.voter_directory_id.int else None
    return change_voters(ctx, header, request, now_ms, peer, RemoveRaftVoterResponse,
                         lambda controller: (VOTER_NOT_FOUND, -1) if directory is None else
                         propose_remove_voter(controller.partition.raft, request.voter_id, directory, now_ms))
