"""A follower's high watermark, and the disk-loss rule: a replica that lost its disk may vote
again only once it has *durably* reached a leader's HW (the simulation found that counting
unflushed records here lets a crash undo it)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .group import RaftGroup

log = logging.getLogger(__name__)


class FollowerCatchUp:
    def __init__(self, group: RaftGroup) -> None:
        self.group = group
        self.leader_hw_seen = -1  # the highest HW a leader told us (disk-loss catch-up target)

    def follower_hw(self, leader_hw: int, now_ms: int) -> None:
        """HW = min(LEO, leader's HW); it never moves back (a truncation below it is a violation)."""
        group = self.group
        hw = min(leader_hw, group.partition.log.log_end_offset)
        if hw > group.partition.high_watermark:
            group.partition.set_high_watermark(hw)
            group.env.hw_moved(group)

    def caught_up_once(self, leader_hw: int, now_ms: int) -> None:
        """A leader told us its HW (-1: no news, but our log or snapshot may have moved)."""
        group = self.group
        if leader_hw >= 0:
            self.leader_hw_seen = max(self.leader_hw_seen, leader_hw)
        if group.state.may_vote or self.leader_hw_seen < 0:
            return
        # A new leader's HW starts low; it covers everything committed before only once it
        # passes the start of the leader's epoch (its LeaderChange batch, now in our log too,
        # or inside a snapshot of that epoch we installed: the epoch began at or before its end).
        latest = group.partition.log.epoch_cache.latest_entry
        snapshots = group.partition.snapshots
        snapshot = snapshots.latest if snapshots is not None else None
        starts = []
        if latest is not None and latest.epoch == group.epoch:
            starts.append(latest.start_offset)  # after an install, the snapshot's end: too late
        if snapshot is not None and snapshot.epoch == group.epoch:
            starts.append(snapshot.end_offset - 1)
        if not starts or self.leader_hw_seen <= min(starts):
            return
        if group.durable_offset() >= self.leader_hw_seen:
            group.regain_vote()
            log.info("%s-%d: caught up with the leader after a disk loss; may vote again", *group.key)
