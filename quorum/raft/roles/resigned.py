"""A leader that stepped down (shutdown or check-quorum): EndQuorumEpoch until acknowledged."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .base import Role, earliest

if TYPE_CHECKING:
    from ..group import RaftGroup


@dataclass(slots=True)
class Resigned(Role):
    """It no longer accepts writes, and names no leader."""

    epoch: int
    election_deadline_ms: int
    successors: list = field(default_factory=list)
    unacknowledged: set = field(default_factory=set)
    resend_ms: int = 0
    name = "Resigned"
    held_leadership = True
    names_leader = False

    def deadline_ms(self) -> int:
        return earliest(self.election_deadline_ms, self.resend_ms)

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        if self.election_deadline_ms <= now_ms:
            if group.may_stand:
                group.become_prospective(now_ms)
            else:  # removed from the voters (KIP-853): an observer now, looking for the leader
                group.become_unattached(group.epoch, now_ms)
            return True
        if 0 < self.resend_ms <= now_ms:
            for v in sorted(self.unacknowledged):
                group.env.send_end_epoch(v, group, self.successors)
            self.resend_ms = now_ms + group.env.config.request_timeout_ms if self.unacknowledged else 0
        return False

    def on_begin_epoch(self, group: RaftGroup, leader_id: int, epoch: int, now_ms: int) -> int:
        if epoch == group.epoch:
            return 0 if leader_id == group.node_id else 74  # cannot happen: one leader per epoch
        group.become_follower(epoch, leader_id, now_ms)
        return 0

    def on_end_epoch_acked(self, voter: int) -> None:
        self.unacknowledged.discard(voter)
