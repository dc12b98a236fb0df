"""Leading this epoch: check-quorum, BeginQuorumEpoch until every voter fetches, the HW."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..progress import ReplicaProgress, caught_up_until
from .base import Role, earliest

if TYPE_CHECKING:
    from ..group import RaftGroup

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Leader(Role):
    epoch: int
    epoch_start_offset: int
    progress: ReplicaProgress
    check_quorum_deadline_ms: int
    # Voters that have not acknowledged BeginQuorumEpoch (nor fetched) yet: resent on a timer
    # (`resend_ms` stays armed while there are other voters).
    unacknowledged: set = field(default_factory=set)
    resend_ms: int = 0
    name = "Leader"
    leads = True
    held_leadership = True

    def deadline_ms(self) -> int:
        return earliest(self.check_quorum_deadline_ms, self.resend_ms)

    def on_timer(self, group: RaftGroup, now_ms: int) -> bool:
        env = group.env
        if self.check_quorum_deadline_ms <= now_ms:
            window = env.config.check_quorum_ms
            if self.progress.alive_majority(now_ms, window, group.session_fetch_ms):
                self.check_quorum_deadline_ms = now_ms + window // 3 or 1
            else:
                log.info("%s-%d: no fetch from a majority in %d ms, resigning", *group.key, window)
                group.resign(now_ms)
                return True
        if 0 < self.resend_ms <= now_ms:
            # Voters that never acknowledged, or stopped fetching (restarted on an empty
            # disk, partitioned away), hear BeginQuorumEpoch again until they fetch.
            quiet = self.progress.quiet_voters(now_ms, env.config.fetch_timeout_ms, group.session_fetch_ms)
            for v in sorted(self.unacknowledged | quiet):
                env.send_begin_epoch(v, group)
            self.resend_ms = now_ms + env.config.request_timeout_ms
        return False

    def on_begin_epoch(self, group: RaftGroup, leader_id: int, epoch: int, now_ms: int) -> int:
        if epoch == group.epoch:
            return 0 if leader_id == group.node_id else 74  # cannot happen: one leader per epoch
        group.become_follower(epoch, leader_id, now_ms)
        return 0

    def refuses_pre_vote(self, group: RaftGroup, now_ms: int) -> bool:
        return True

    def resign(self, group: RaftGroup, now_ms: int, successors: list[int] | None) -> None:
        group.become_resigned(successors if successors is not None else self.progress.successors(), now_ms)

    def on_begin_epoch_acked(self, voter: int) -> None:
        self.unacknowledged.discard(voter)

    def on_begin_epoch_unknown(self, group: RaftGroup, voter: int, now_ms: int) -> None:
        """The voter has not replayed this partition's creation yet: ask again after the retry
        backoff, not a request timeout (meanwhile it would not fetch, and the time it took to
        find us by its own election timeout could take it out of the ISR)."""
        if voter in self.unacknowledged:
            soon = now_ms + group.env.config.retry_backoff_ms
            if self.resend_ms <= 0 or soon < self.resend_ms:
                self.resend_ms = soon
                group.arm(now_ms)

    def note_contact(self, replica_id: int, now_ms: int) -> None:
        p = self.progress.by_voter.get(replica_id) or self.progress.observers.get(replica_id)
        if p is not None:
            p.last_fetch_ms = max(p.last_fetch_ms, now_ms)

    def on_follower_fetch(self, group: RaftGroup, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        log_ = group.partition.log
        voters = group.voter_set
        is_voter = voters.is_voter(replica_id, group.env.follower_directory(replica_id))
        if self.progress.record_fetch(replica_id, fetch_offset, log_.log_end_offset, now_ms,
                                      caught_up_until(log_, fetch_offset), is_voter):
            self.unacknowledged.discard(replica_id)
            group.maybe_advance_hw(now_ms)

    def advance_hw(self, group: RaftGroup, now_ms: int) -> bool:
        offset = self.progress.majority_offset(group.durable_offset())
        # Raft's commit rule: only an offset of our own epoch commits what comes before it.
        past_start = offset > self.epoch_start_offset or group.env.bugs.hw_before_epoch_start
        if past_start and offset > group.partition.high_watermark:
            group.partition.set_high_watermark(offset)
            group.env.hw_moved(group)
            if not group.is_voter and offset > group.log_voters.offset() >= 0:
                # Our own removal committed (KIP-853): hand over to the voters.
                log.info("%s-%d: removed from the voters; resigning", *group.key)
                group.resign(now_ms)
            return True
        return False

    def voters_changed(self, group: RaftGroup, now_ms: int) -> None:
        """We appended a VotersRecord: the new set counts for the HW at once."""
        self.progress.set_voters(group.voters)
        group.maybe_advance_hw(now_ms)
