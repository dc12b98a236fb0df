"""An election round: KIP-996's pre-vote (Prospective), then the vote itself (Candidate)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ..election_state import NO_NODE
from .base import Role, earliest

if TYPE_CHECKING:
    from ..group import RaftGroup


class ElectionRound(Role):
    """Asks every other voter, counts the answers, and resends to those that have not answered."""

    __slots__ = ()
    pre_vote: ClassVar[bool]
    election_deadline_ms: int
    granted: set
    rejected: set
    retry_ms: int

    @property
    def epoch_asked(self) -> int:
        return self.epoch + 1 if self.pre_vote else self.epoch

    def deadline_ms(self) -> int:
        return earliest(self.election_deadline_ms, self.retry_ms)

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        if self.election_deadline_ms <= now_ms:
            group.lost_election(now_ms)
            return True
        if 0 < self.retry_ms <= now_ms:
            self.request_votes(group, now_ms, only_missing=True)
        return False

    def request_votes(self, group: RaftGroup, now_ms: int, only_missing: bool = False) -> None:
        last_epoch, last_offset = group.last_log_id()
        for v in group.voters:
            if v == group.node_id or (only_missing and (v in self.granted or v in self.rejected)):
                continue
            group.env.send_vote(v, group, self.pre_vote, self.epoch_asked, last_epoch, last_offset)
        self.retry_ms = now_ms + group.env.config.request_timeout_ms

    def count_vote(self, voter: int, granted: bool, pre_vote: bool, epoch_of_request: int) -> bool:
        if pre_vote != self.pre_vote or epoch_of_request != self.epoch_asked:
            return False
        (self.granted if granted else self.rejected).add(voter)
        return True

    def tally(self, group: RaftGroup, now_ms: int) -> None:
        majority = len(group.voters) // 2 + 1
        if len(self.granted) >= majority:
            self.won(group, now_ms)
        elif len(self.rejected) >= len(group.voters) - majority + 1:
            group.lost_election(now_ms)

    def won(self, group: RaftGroup, now_ms: int) -> None:
        raise NotImplementedError


@dataclass(slots=True)
class Prospective(ElectionRound):
    """KIP-996 pre-vote: asks whether it could win at epoch + 1 without bumping the epoch."""

    epoch: int
    election_deadline_ms: int
    leader_id: int = NO_NODE  # the leader it lost touch with, if any
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    retry_ms: int = 0
    name = "Prospective"
    pre_vote = True

    def accepts_leader(self, leader_id: int) -> bool:
        # The leader we lost touch with, named by a voter that has not noticed yet: nothing
        # new (Kafka's hasLeader check). Going back to following it would restart our fetch
        # timer on every failed pre-vote, and two followers of a dead leader, timing out
        # together, would keep each other from standing.
        return leader_id != self.leader_id

    def won(self, group: RaftGroup, now_ms: int) -> None:
        group.become_candidate(now_ms)


@dataclass(slots=True)
class Candidate(ElectionRound):
    epoch: int
    election_deadline_ms: int
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    retry_ms: int = 0
    name = "Candidate"
    pre_vote = False

    def accepts_leader(self, leader_id: int) -> bool:
        return True

    def won(self, group: RaftGroup, now_ms: int) -> None:
        group.become_leader(sorted(self.granted), now_ms)
