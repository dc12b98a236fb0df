"""Waiting for a leader in this epoch: Unattached, or Voted once it granted its vote."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .base import Role

if TYPE_CHECKING:
    from ..group import RaftGroup


class Waiting(Role):
    """What Unattached and Voted share: a timer that starts a (pre-)election, or, for an
    observer, asks the next voter who leads."""

    __slots__ = ()
    election_deadline_ms: int  # -1 for a replica that may not stand

    def deadline_ms(self) -> int:
        return self.election_deadline_ms

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        if 0 <= self.election_deadline_ms <= now_ms:
            if group.may_stand:
                group.become_prospective(now_ms)
            else:
                group.discover_leader(now_ms)
            return True
        return False

    def accepts_leader(self, leader_id: int) -> bool:
        return True

    def on_end_epoch(self, group: RaftGroup, leader_id: int, successors: list[int], now_ms: int) -> None:
        # The resigned leader's answer to a fetch came first: no leader in this epoch, and a
        # full election timeout to wait. The turn still counts, or the first successor stands
        # after the others (seen on real processes: every hand-over to a preferred replica
        # under load failed so).
        if group.may_stand and self.election_deadline_ms >= 0:
            turn = group.timing.successor_turn(successors, now_ms)
            if turn < self.election_deadline_ms:
                self.election_deadline_ms = turn
                group.arm(now_ms)


@dataclass(slots=True)
class Unattached(Waiting):
    """No leader known in this epoch (it may have voted: see the group's ElectionState)."""

    epoch: int
    election_deadline_ms: int  # -1 for an observer or a replica that may not vote
    name = "Unattached"

    def stand_now(self, group: RaftGroup, now_ms: int) -> None:
        if group.may_stand and self.election_deadline_ms >= 0:
            self.election_deadline_ms = now_ms
            group.arm(now_ms)


@dataclass(slots=True)
class Voted(Waiting):
    epoch: int
    voted_id: int
    election_deadline_ms: int
    name = "Voted"
