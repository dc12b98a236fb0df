"""Vote rules shared by the voter and the candidate side, and the voter's answer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .election_state import NO_NODE

INVALID_VOTER_KEY = ErrorCode.INVALID_VOTER_KEY

if TYPE_CHECKING:
    from .group import RaftGroup


def log_is_at_least(candidate: tuple[int, int], ours: tuple[int, int]) -> bool:
    """KIP-595: grant only to a candidate whose (last epoch, end offset) is at least ours."""
    return candidate >= ours


@dataclass(frozen=True, slots=True)
class VoteAnswer:
    """One partition of a VoteResponse, with the epoch the request was for."""

    epoch_of_request: int
    error: int
    leader_id: int
    leader_epoch: int
    granted: bool


def answer_vote(group: RaftGroup, candidate: int, epoch: int, last_log_id: tuple[int, int], pre_vote: bool,
                now_ms: int, voter_directory=None) -> tuple[int, bool]:
    """(error code, granted). KIP-595 vote rules; KIP-996 pre-votes change nothing. KIP-853: a
    request for another directory of this node (we replaced the disk it voted from) is
    INVALID_VOTER_KEY. A request naming this directory is answered even if our own set does not
    hold us (Kafka's rule: the candidate's newer set does, and we have not fetched it yet;
    refusing left a metadata quorum whose newest voter had not fetched its VotersRecord
    leaderless, sim seed 2181); one that names no directory (a static set) only by a voter of
    our own set. The candidate need not be in our set either: a newer set we have not fetched
    may hold it (the log check keeps a candidate without our committed records out, a replaced
    disk's empty log included). Refusing it left a quorum that had re-keyed a replaced disk
    leaderless (sim seed 4251). A copy with no vote yet (a lost disk until caught up, a move
    here until it follows a leader: ElectionState) refuses in any case."""
    if voter_directory is not None and voter_directory != group.env.directory_id:
        return INVALID_VOTER_KEY, False
    if voter_directory is None and not group.voter_set.is_voter(group.node_id, group.env.directory_id):
        return 0, False
    if epoch < group.epoch:
        return 74, False  # FENCED_LEADER_EPOCH: the answer carries our epoch and leader
    log_ok = group.env.bugs.skip_log_check_in_vote or log_is_at_least(last_log_id, group.last_log_id())
    if not group.state.may_vote:
        return 0, False
    if pre_vote:
        return (0, False) if group.role.refuses_pre_vote(group, now_ms) else (0, log_ok)
    if epoch > group.epoch:
        group.become_unattached(epoch, now_ms)
    s = group.state
    if s.voted_id == candidate:
        return 0, True
    if s.voted_id != NO_NODE or s.leader_id != NO_NODE or not log_ok:
        return 0, False
    group.become_voted(candidate, epoch, now_ms)
    if group.env.bugs.vote_not_persisted:
        group.env.forget_persist(group)
    return 0, True
