"""One partition's Raft replica: its durable election state, its role, and the role changes.

The group dispatches timers and messages to its role object (roles/); every role change goes
through `_become`, which checks the transition table and marks the group's ElectionState for
the next persist batch when it changed. Messages go out through the environment (`env`, a
GroupEnv), which batches them per destination.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .catch_up import FollowerCatchUp
from .election_state import NO_NODE, ElectionState
from .election_timing import ElectionTiming
from .progress import ReplicaProgress
from .roles import Candidate, Deleted, Follower, Leader, Prospective, Resigned, Role, Unattached, Voted
from .transitions import check
from .voter_set import LogVoters, VoterSet
from .votes import VoteAnswer, answer_vote

if TYPE_CHECKING:
    from .env import GroupEnv

log = logging.getLogger(__name__)


class SafetyViolation(RuntimeError):
    """Something that Raft promises can never happen did: the node must stop."""


class RaftGroup:
    def __init__(self, env: GroupEnv, partition, voters: tuple[int, ...], state: ElectionState) -> None:
        self.env = env
        self.partition = partition
        self.key = partition.key
        # The configured voters (--voters, or the partition's assignment) until the log holds a
        # VotersRecord (KIP-853).
        self.log_voters = LogVoters(partition.log, VoterSet.static(voters))
        self.node_id = env.node_id
        self.state = state
        self.role: Role | None = None  # set by start()
        self.timing = ElectionTiming(self)
        self.timer_ms = -1
        self.downloading = None  # a SnapshotDownload while fetching is paused for one
        self.truncating = None   # a TruncationJob while fetching is paused for one
        self.installing = None   # an InstallJob (a downloaded snapshot) while fetching is paused
        self.catch_up = FollowerCatchUp(self)
        self.election_started_ms = -1  # when this group began looking for a leader (metrics)
        self.discovery_probe = -1      # an observer's next voter to ask for the leader

    # -- reading -------------------------------------------------------------------------
    @property
    def voter_set(self) -> VoterSet:
        return self.log_voters.current()

    @property
    def voters(self) -> tuple[int, ...]:
        return self.log_voters.current().ids

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        """The leader of this epoch as far as we know; none once we resigned ourselves."""
        return self.state.leader_id if self.role.names_leader else NO_NODE

    @property
    def fetch_paused(self) -> bool:
        """Not fetching for now: downloading or installing a snapshot, or truncating."""
        return self.downloading is not None or self.truncating is not None or self.installing is not None

    @property
    def is_leader(self) -> bool:
        return self.role.leads

    @property
    def is_voter(self) -> bool:
        """This node, on this directory, is a voter (a node on a replaced disk is not)."""
        return self.voter_set.is_voter(self.node_id, self.env.directory_id)

    @property
    def may_stand(self) -> bool:
        return self.is_voter and self.state.may_vote

    def last_log_id(self) -> tuple[int, int]:
        """(epoch, end offset) of the newer of the log end and the latest snapshot (KIP-630)."""
        log_ = self.partition.log
        epoch = log_.epoch_cache.latest_epoch
        end = log_.log_end_offset
        snapshots = self.partition.snapshots
        latest = snapshots.latest if snapshots is not None else None
        if latest is not None and (epoch is None or latest.end_offset >= end):
            return latest.epoch, max(end, latest.end_offset)
        return (epoch if epoch is not None else 0), end

    def session_fetch_ms(self, replica_id: int) -> int:
        return self.env.follower_fetch_ms(replica_id, self.key)

    def durable_offset(self) -> int:
        log_ = self.partition.log
        if self.env.fsync_never or self.env.bugs.count_unflushed_offset:
            return log_.log_end_offset
        return min(log_.flushed_offset, log_.log_end_offset)

    # -- starting, stopping, timers ----------------------------------------------------------
    def start(self, now_ms: int) -> None:
        """The role after a restart, from the durable state (Kafka's QuorumState.initialize)."""
        s = self.state
        if s.leader_id == self.node_id:
            # We led before the restart: resign, so another voter (or we, alone) starts a new epoch.
            self.role = Resigned(s.epoch, now_ms, successors=[])
        elif s.leader_id != NO_NODE:
            self.role = Follower(s.epoch, s.leader_id, now_ms + self.env.config.fetch_timeout_ms, now_ms)
            self.env.follow(self, s.leader_id)
        elif s.voted_id != NO_NODE:
            self.role = Voted(s.epoch, s.voted_id, self.timing.election_deadline(now_ms))
        else:
            self.role = Unattached(s.epoch, self.timing.election_deadline(now_ms))
        self.arm(now_ms)

    def delete(self) -> None:
        """The partition is deleted here (its group already left every table)."""
        self.role = Deleted(self.epoch)
        self.timer_ms = -2  # a timer still in the heap finds no group (or not this deadline)

    def arm(self, now_ms: int) -> None:
        deadline = self.role.deadline_ms()
        self.timer_ms = deadline
        if deadline >= 0:
            self.env.schedule(self, deadline)

    def poll(self, now_ms: int) -> None:
        """The group's timer fired."""
        if not self.role.on_timer(self, now_ms):
            self.arm(now_ms)

    def stand_now(self, now_ms: int) -> None:
        """A new partition's preferred leader: stand at once instead of after a timeout."""
        self.role.stand_now(self, now_ms)

    def leader_unreachable(self, deadline_ms: int, now_ms: int) -> None:
        """Our leader's node cannot be reached: time out at `deadline_ms` unless it answers."""
        self.role.on_leader_unreachable(self, deadline_ms, now_ms)

    # -- transitions -------------------------------------------------------------------------
    def _become(self, role: Role, state: ElectionState, now_ms: int) -> None:
        old = self.role
        check(old.name, old.epoch, role.name, role.epoch)
        log.debug("%s-%d: %s(%d) -> %s(%d)", *self.key, old.name, old.epoch, role.name, role.epoch)
        old_leader = old.followed_leader
        self.role = role
        if state != self.state:
            self.state = state
            self.env.persist(self)
        if old_leader is not None and role.followed_leader != old_leader:
            self.env.unfollow(self, old_leader)
        if role.followed_leader is not None:
            self.env.follow(self, role.followed_leader)  # (again when only the epoch changed: it is in the fetch)
        if old.held_leadership:
            self.env.leadership_lost(self)
        self.arm(now_ms)

    def become_unattached(self, epoch: int, now_ms: int, deadline_ms: int | None = None) -> None:
        s = self.state
        voted = s.voted_id if epoch == s.epoch else NO_NODE
        deadline = self.timing.election_deadline(now_ms) if deadline_ms is None else deadline_ms
        if voted != NO_NODE:
            self._become(Voted(epoch, voted, deadline), s.moved_to(epoch, NO_NODE, voted), now_ms)
        else:
            self._become(Unattached(epoch, deadline), s.moved_to(epoch, NO_NODE, NO_NODE), now_ms)

    def become_follower(self, epoch: int, leader_id: int, now_ms: int, probing: bool = False) -> None:
        s = self.state
        voted = s.voted_id if epoch == s.epoch else NO_NODE
        role = Follower(epoch, leader_id, now_ms + self.env.config.fetch_timeout_ms, now_ms, probing)
        self.election_started_ms = -1
        # (a probe is a guess: never recorded, nor named to others, as the leader)
        self._become(role, s.moved_to(epoch, NO_NODE if probing else leader_id, voted), now_ms)

    def become_voted(self, candidate: int, epoch: int, now_ms: int) -> None:
        s = self.state
        self._become(Voted(epoch, candidate, self.timing.election_deadline(now_ms)),
                     s.moved_to(epoch, NO_NODE, candidate), now_ms)

    def discover_leader(self, now_ms: int) -> None:
        """A replica that may not stand (an observer, or a voter catching up) asks the other
        voters in turn: one that does not lead answers NOT_LEADER_OR_FOLLOWER naming the leader."""
        others = [v for v in self.voters if v != self.node_id]
        if others:
            self.discovery_probe += 1
            self.become_follower(self.epoch, others[self.discovery_probe % len(others)], now_ms, probing=True)

    def become_prospective(self, now_ms: int) -> None:
        lost = self.role.followed_leader
        role = Prospective(self.epoch, self.timing.round_deadline(now_ms), leader_id=NO_NODE if lost is None else lost)
        role.granted.add(self.node_id)
        if self.election_started_ms < 0:
            self.election_started_ms = now_ms
        self._become(role, self.state, now_ms)
        role.request_votes(self, now_ms)
        role.tally(self, now_ms)

    def become_candidate(self, now_ms: int) -> None:
        epoch = self.epoch + 1
        role = Candidate(epoch, self.timing.round_deadline(now_ms))
        role.granted.add(self.node_id)
        self._become(role, self.state.moved_to(epoch, NO_NODE, self.node_id), now_ms)
        role.request_votes(self, now_ms)
        role.tally(self, now_ms)

    def become_leader(self, granted: list[int], now_ms: int) -> None:
        epoch = self.epoch
        start = self.partition.log.log_end_offset
        progress = ReplicaProgress(self.node_id, self.voters, now_ms)
        others = {v for v in self.voters if v != self.node_id}
        role = Leader(epoch, start, progress, now_ms + self.env.config.check_quorum_ms, unacknowledged=set(others))
        self._become(role, self.state.moved_to(epoch, self.node_id, self.state.voted_id), now_ms)
        self.timing.retries = 0
        if self.election_started_ms >= 0 and len(self.voters) > 1:
            self.env.record_election_latency(now_ms - self.election_started_ms)
        self.election_started_ms = -1
        self.env.begin_epoch(self, now_ms, granted)  # the LeaderChange batch: this epoch's start offset
        for v in sorted(others):
            self.env.send_begin_epoch(v, self)
        role.resend_ms = now_ms + self.env.config.retry_backoff_ms if others else 0
        self.arm(now_ms)
        self.maybe_advance_hw(now_ms)

    def resign(self, now_ms: int, successors: list[int] | None = None) -> None:
        """Graceful (shutdown) or check-quorum resignation of a leader: EndQuorumEpoch to the
        other voters, naming `successors` (default: most caught-up first)."""
        self.role.resign(self, now_ms, successors)

    def become_resigned(self, successors: list[int], now_ms: int) -> None:
        others = {v for v in self.voters if v != self.node_id}
        role = Resigned(self.epoch, now_ms + self.env.config.election_timeout_ms, successors=successors,
                        unacknowledged=set(others))
        self._become(role, self.state, now_ms)
        for v in sorted(others):
            self.env.send_end_epoch(v, self, successors)
        role.resend_ms = now_ms + self.env.config.retry_backoff_ms if others else 0
        self.arm(now_ms)

    def lost_election(self, now_ms: int) -> None:
        self.become_unattached(self.epoch, now_ms, self.timing.backoff_deadline(now_ms))

    # -- votes -------------------------------------------------------------------------------
    def on_vote_response(self, voter: int, answer: VoteAnswer, pre_vote: bool, now_ms: int) -> None:
        if self.observe_leader(answer.leader_id, answer.leader_epoch, now_ms):
            return
        if self.role.count_vote(voter, answer.granted, pre_vote, answer.epoch_of_request):
            self.role.tally(self, now_ms)

    def on_vote_unanswered(self, voter: int, pre_vote: bool, epoch_of_request: int, now_ms: int) -> None:
        if self.role.count_vote(voter, False, pre_vote, epoch_of_request):
            self.role.tally(self, now_ms)

    def on_vote_request(self, candidate: int, epoch: int, last_epoch: int, last_offset: int,
                        pre_vote: bool, now_ms: int, voter_directory=None) -> tuple[int, bool]:
        """(error code, granted) for a candidate's (pre-)vote request; `voter_directory`: the
        directory the candidate takes us for (Vote v1+, KIP-853)."""
        return answer_vote(self, candidate, epoch, (last_epoch, last_offset), pre_vote, now_ms, voter_directory)

    # -- learning about leaders (the shared path of every response and request) -------------
    def observe_leader(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """A message told us (epoch, leader). True when it moved us to another role."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self.become_follower(epoch, leader_id, now_ms)
            else:
                self.become_unattached(epoch, now_ms)
            return True
        if (epoch == self.epoch and leader_id >= 0 and leader_id != self.node_id
                and self.role.accepts_leader(leader_id)):
            if getattr(self.role, "probing", False):
                self.become_unattached(epoch, now_ms)  # (a probe was a guess, not this epoch's leader)
            self.become_follower(epoch, leader_id, now_ms)
            return True
        return False

    def leader_gone(self, now_ms: int) -> None:
        """Our leader told us it no longer leads this epoch: wait for an election."""
        self.role.on_leader_gone(self, now_ms)

    def on_begin_epoch(self, leader_id: int, epoch: int, now_ms: int) -> int:
        if epoch < self.epoch:
            return 74
        return self.role.on_begin_epoch(self, leader_id, epoch, now_ms)

    def on_end_epoch(self, leader_id: int, epoch: int, successors: list[int], now_ms: int) -> int:
        if epoch < self.epoch:
            return 74
        if epoch > self.epoch:
            self.become_unattached(epoch, now_ms)
        else:
            self.role.on_end_epoch(self, leader_id, successors, now_ms)
        return 0

    def on_begin_epoch_acked(self, voter: int) -> None:
        self.role.on_begin_epoch_acked(voter)

    def on_begin_epoch_unknown(self, voter: int, now_ms: int) -> None:
        self.role.on_begin_epoch_unknown(self, voter, now_ms)

    def on_end_epoch_acked(self, voter: int) -> None:
        self.role.on_end_epoch_acked(voter)

    # -- the high watermark ------------------------------------------------------------------
    def note_contact(self, replica_id: int, now_ms: int) -> None:
        """A follower fetched a snapshot chunk from us: it is alive (check-quorum)."""
        self.role.note_contact(replica_id, now_ms)

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        self.role.on_follower_fetch(self, replica_id, fetch_offset, now_ms)

    def maybe_advance_hw(self, now_ms: int) -> bool:
        return self.role.advance_hw(self, now_ms)

    def regain_vote(self) -> None:
        """Caught up with a leader after a disk loss (catch_up.py): it may vote and stand again."""
        s = self.state
        self.state = ElectionState(s.epoch, s.leader_id, s.voted_id)
        self.env.persist(self)

    def check_truncation(self, offset: int) -> None:
        if offset < self.partition.high_watermark:
            raise SafetyViolation(f"{self.key[0]}-{self.key[1]}: truncation to {offset} below the high "
                                  f"watermark {self.partition.high_watermark} on node {self.node_id}")
