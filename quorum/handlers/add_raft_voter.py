"""AddRaftVoter (api 80, v0; KIP-853): the metadata quorum's leader adds a caught-up observer as
a voter, keyed by its node id and directory id (quorum/raft/membership.py)."""
from __future__ import annotations

from ...protocol.messages import AddRaftVoterResponse

from ..raft.membership import propose_add_voter
from ..raft.voter_set import Voter
from .raft_voters_common import change_voters


def handle(ctx, header, request, now_ms, peer):
    listener = request.listeners[0] if request.listeners else None
    directory = request.voter_directory_id if request.voter_directory_id.int else None
    voter = Voter(request.voter_id, directory, listener.host if listener else "", listener.port if listener else 0)
    return change_voters(ctx, header, request, now_ms, peer, AddRaftVoterResponse,
                         lambda controller: propose_add_voter(controller.partition.raft, voter, now_ms))
