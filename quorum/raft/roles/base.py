"""What every role answers when the group dispatches to it: by default, nothing happens.

A role method that changes the group's role does so through the group's `become_*` methods
(which check the transition table); `on_timer` then returns True, and the new role has already
armed the group's timer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ..group import RaftGroup


def earliest(deadline_ms: int, resend_ms: int) -> int:
    """The sooner of a deadline (-1: none) and a resend time (0 or less: none)."""
    if resend_ms > 0:
        return min(deadline_ms, resend_ms) if deadline_ms >= 0 else resend_ms
    return deadline_ms


class Role:
    __slots__ = ()
    name: ClassVar[str]
    epoch: int
    leads: ClassVar[bool] = False             # accepts writes and answers fetches
    held_leadership: ClassVar[bool] = False   # leaving it changes what the partition serves
    # False once we resigned: an answer naming us would turn the successor standing in our
    # place back into a follower of ours (seen on real processes: hand-overs failed so).
    names_leader: ClassVar[bool] = True

    @property
    def followed_leader(self) -> int | None:
        """The leader whose Fetch stream carries this group (a follower's only)."""
        return None

    def deadline_ms(self) -> int:
        """When the group's timer fires next (-1: never)."""
        raise NotImplementedError

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        return False

    # -- what a message can change ---------------------------------------------------------
    def accepts_leader(self, leader_id: int) -> bool:
        """A message names `leader_id` as the leader of our epoch: do we follow it?"""
        return False

    def refuses_pre_vote(self, group: RaftGroup, now_ms: int) -> bool:
        return False

    def count_vote(self, voter: int, granted: bool, pre_vote: bool, epoch_of_request: int) -> bool:
        """A vote (or a voter that could not be asked) for this election round: True if counted."""
        return False

    def on_begin_epoch(self, group: RaftGroup, leader_id: int, epoch: int, now_ms: int) -> int:
        group.become_follower(epoch, leader_id, now_ms)
        return 0

    def on_end_epoch(self, group: RaftGroup, leader_id: int, successors: list[int], now_ms: int) -> None:
        pass

    def on_leader_unreachable(self, group: RaftGroup, deadline_ms: int, now_ms: int) -> None:
        pass

    def on_leader_gone(self, group: RaftGroup, now_ms: int) -> None:
        pass

    def stand_now(self, group: RaftGroup, now_ms: int) -> None:
        pass

    # -- a leader's (and a resigned leader's) -------------------------------------------------
    def resign(self, group: RaftGroup, now_ms: int, successors: list[int] | None) -> None:
        pass

    def on_begin_epoch_acked(self, voter: int) -> None:
        pass

    def on_begin_epoch_unknown(self, group: RaftGroup, voter: int, now_ms: int) -> None:
        pass

    def on_end_epoch_acked(self, voter: int) -> None:
        pass

    def note_contact(self, replica_id: int, now_ms: int) -> None:
        pass

    def on_follower_fetch(self, group: RaftGroup, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        pass

    def advance_hw(self, group: RaftGroup, now_ms: int) -> bool:
        return False
