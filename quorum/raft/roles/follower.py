"""Following a known leader of this epoch: fetching from it until it goes quiet."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import Role

if TYPE_CHECKING:
    from ..group import RaftGroup

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Follower(Role):
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    since_ms: int = -1   # when this role began: a pre-vote is refused only after a fetch since then
    probing: bool = False  # an observer asking a voter who leads (it may not lead itself)
    name = "Follower"

    @property
    def followed_leader(self) -> int | None:
        return self.leader_id

    @property
    def names_leader(self) -> bool:  # a probe is a guess, not a leader to name to others
        return not self.probing

    def accepts_leader(self, leader_id: int) -> bool:
        # The voter we probed names the leader of our epoch: follow that one. (Refused, the
        # probe fell back to Unattached and asked the next voter, which named the same leader:
        # an observer whose old voter set lacked the leader never found it; sim seed 3561.)
        return self.probing and leader_id != self.leader_id

    def confirm(self, group: RaftGroup) -> None:
        """The voter we probed answered our fetch: it leads this epoch (one leader per epoch)."""
        self.probing = False
        s = group.state
        group.state = s.moved_to(s.epoch, self.leader_id, s.voted_id)
        group.env.persist(group)

    def deadline_ms(self) -> int:
        return self.fetch_deadline_ms

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        if self.fetch_deadline_ms > now_ms:
            return False
        env = group.env
        timeout = env.config.fetch_timeout_ms
        heard = env.last_heard_from(self.leader_id)
        # (a probe's answers do not count: a voter that does not host the partition any more
        # answers every fetch with an error, and a probe that stayed on it never asked the next
        # voter; sim seed 8905)
        if (not self.probing and heard >= 0 and now_ms - heard < timeout
                and not env.leader_unreachable(self.leader_id, now_ms)):
            self.fetch_deadline_ms = heard + timeout
        elif group.may_stand:
            log.debug("%s-%d: fetch timeout: heard %s now %s unreachable %s", *group.key, heard, now_ms,
                      env.leader_unreachable(self.leader_id, now_ms))
            group.become_prospective(now_ms)
            return True
        elif self.probing or not group.is_voter:
            group.become_unattached(group.epoch, now_ms)  # look for the leader again (the next voter)
            return True
        else:
            self.fetch_deadline_ms = now_ms + timeout
        return False

    def refuses_pre_vote(self, group: RaftGroup, now_ms: int) -> bool:
        # The leader is alive (we fetched from it since we began following it, within the
        # timeout): a flapping node cannot disrupt it. A follower that only came back from a
        # failed pre-vote has not fetched since, and grants: otherwise two followers of a dead
        # leader, timing out together, refuse each other forever (each failed pre-vote
        # restarting the other's fetch timer), as KIP-996's "has fetched from the leader" rule
        # avoids.
        if self.probing:
            return False  # a voter we asked who leads is no leader we have fetched from
        env = group.env
        heard = env.last_heard_from(self.leader_id)
        return (heard >= max(self.since_ms, 0) and now_ms - heard < env.config.fetch_timeout_ms
                and not env.leader_unreachable(self.leader_id, now_ms))

    def on_begin_epoch(self, group: RaftGroup, leader_id: int, epoch: int, now_ms: int) -> int:
        if self.probing and epoch == group.epoch and leader_id != self.leader_id:
            # The voter we asked is not the leader; the leader told us itself (an observer that
            # was a voter, or is on a replaced disk, still hears BeginQuorumEpoch).
            group.become_unattached(epoch, now_ms)
            group.become_follower(epoch, leader_id, now_ms)
        elif leader_id != self.leader_id or epoch != group.epoch:
            group.become_follower(epoch, leader_id, now_ms)
        return 0

    def on_end_epoch(self, group: RaftGroup, leader_id: int, successors: list[int], now_ms: int) -> None:
        if leader_id == self.leader_id:
            # The most caught-up successor stands first; the others wait their turn (KIP-595). A
            # replica that may not stand (an observer: a voter removed, a replica being added, a
            # replaced disk) looks for the next leader after the retry backoff: a leader that
            # does not count it among its voters sends it no BeginQuorumEpoch (sim seed 20774: a
            # removed metadata voter told of its leader's resignation waited for one for good).
            deadline = group.timing.successor_turn(successors, now_ms) if group.may_stand else None
            group.become_unattached(group.epoch, now_ms, deadline)

    def on_leader_unreachable(self, group: RaftGroup, deadline_ms: int, now_ms: int) -> None:
        if deadline_ms < self.fetch_deadline_ms:
            self.fetch_deadline_ms = deadline_ms
            group.arm(now_ms)

    def on_leader_gone(self, group: RaftGroup, now_ms: int) -> None:
        group.become_unattached(group.epoch, now_ms)
