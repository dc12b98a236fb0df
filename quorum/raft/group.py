"""One partition's Raft replica: its durable election state, its role, elections and the HW.

Every role change goes through `_become`, which checks the transition table and marks the
group's ElectionState for the next persist batch when it changed. Messages go out through
the `Replication` driver (`env`), which batches them per destination.
"""
from __future__ import annotations

import logging

from .election_state import NO_NODE, ElectionState
from .progress import ReplicaProgress
from .roles import Candidate, Follower, Leader, Prospective, Resigned, Unattached, Voted
from .transitions import check
from .votes import VoteAnswer, log_is_at_least

log = logging.getLogger(__name__)


class SafetyViolation(RuntimeError):
    """Something that Raft promises can never happen did: the node must stop."""


class RaftGroup:
    def __init__(self, env, partition, voters: tuple[int, ...], state: ElectionState) -> None:
        self.env = env
        self.partition = partition
        self.key = partition.key
        self.voters = tuple(sorted(voters))
        self.node_id = env.node_id
        self.state = state
        self.role = None
        self.election_retries = 0
        self.timer_ms = -1
        self.downloading = None  # a SnapshotDownload while fetching is paused for one
        self.leader_hw_seen = -1  # the highest HW a leader told us (disk-loss catch-up target)
        self.election_started_ms = -1  # when this group began looking for a leader (metrics)
        self.discovery_probe = -1      # an observer's next voter to ask for the leader

    # -- reading -------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        """The leader of this epoch as far as we know; none once we resigned ourselves: an
        answer naming us would turn the successor standing in our place back into a follower
        of ours (seen on real processes: hand-overs to a preferred replica failed so)."""
        if isinstance(self.role, Resigned):
            return NO_NODE
        return self.state.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

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

    # -- starting --------------------------------------------------------------------------
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
            self.role = Voted(s.epoch, s.voted_id, self._election_deadline(now_ms))
        else:
            self.role = Unattached(s.epoch, self._election_deadline(now_ms))
        self._arm(now_ms)

    def leader_unreachable(self, deadline_ms: int, now_ms: int) -> None:
        """Our leader's node cannot be reached: time out at `deadline_ms` unless it answers."""
        r = self.role
        if isinstance(r, Follower) and deadline_ms < r.fetch_deadline_ms:
            r.fetch_deadline_ms = deadline_ms
            self._arm(now_ms)

    def _discover_leader(self, now_ms: int) -> None:
        """An observer (not a voter: a broker outside the metadata quorum) finds the leader by
        fetching from the voters in turn: a voter that does not lead answers
        NOT_LEADER_OR_FOLLOWER naming the leader it knows, and we follow that one."""
        self.discovery_probe += 1
        guess = self.voters[self.discovery_probe % len(self.voters)]
        self.become_follower(self.epoch, guess, now_ms)

    def stand_now(self, now_ms: int) -> None:
        """A new partition's preferred leader: stand at once instead of after a timeout."""
        if isinstance(self.role, Unattached) and self.may_stand and self.role.election_deadline_ms >= 0:
            self.role.election_deadline_ms = now_ms
            self._arm(now_ms)

    # -- transitions -------------------------------------------------------------------------
    def _become(self, role, state: ElectionState, now_ms: int) -> None:
        old = self.role
        check(old.name, old.epoch, role.name, role.epoch)
        log.debug("%s-%d: %s(%d) -> %s(%d)", *self.key, old.name, old.epoch, role.name, role.epoch)
        was_leader = isinstance(old, Leader)
        old_leader = old.leader_id if isinstance(old, Follower) else None
        self.role = role
        if state != self.state:
            self.state = state
            self.env.persist(self)
        if old_leader is not None and not (isinstance(role, Follower) and role.leader_id == old_leader):
            self.env.unfollow(self, old_leader)
        if isinstance(role, Follower):
            self.env.follow(self, role.leader_id)  # (again when only the epoch changed: it is in the fetch)
        if was_leader or isinstance(old, Resigned):
            self.env.leadership_lost(self)
        self._arm(now_ms)

    def _arm(self, now_ms: int) -> None:
        r = self.role
        if isinstance(r, (Unattached, Voted, Prospective, Candidate, Resigned)):
            deadline = r.election_deadline_ms
            resend = r.retry_ms if isinstance(r, (Prospective, Candidate)) else (
                r.resend_ms if isinstance(r, Resigned) else 0)
            if resend > 0:
                deadline = min(deadline, resend) if deadline >= 0 else resend
        elif isinstance(r, Follower):
            deadline = r.fetch_deadline_ms
        else:
            deadline = min(r.check_quorum_deadline_ms, r.resend_ms) if r.resend_ms > 0 else r.check_quorum_deadline_ms
        self.timer_ms = deadline
        if deadline >= 0:
            self.env.schedule(self, deadline)

    def _election_deadline(self, now_ms: int) -> int:
        if not self.is_voter:
            # An observer never stands; this deadline is when it next looks for the leader.
            return now_ms + self.env.config.retry_backoff_ms
        if not self.may_stand:
            return -1
        if self.voters == (self.node_id,):
            return now_ms  # a group of one: nobody to wait for
        base = self.env.config.election_timeout_ms
        return now_ms + base + self.env.rng.randrange(base + 1)

    def _backoff_deadline(self, now_ms: int) -> int:
        """After a lost election: exponential backoff with jitter (Kafka's election backoff).
        Two followers of a dead leader that stood within a vote's round trip of each other
        split the vote; the first of them to stand again wins, so the wait is the retry backoff
        plus jitter much wider than a round trip (it used to start at half an election timeout,
        which made such a failover ~0.5 s slower than it needs to be)."""
        if not self.may_stand:
            return -1
        self.election_retries += 1
        cap = self.env.config.election_backoff_max_ms
        upper = min(cap, 200 * (1 << min(self.election_retries, 10)))
        return now_ms + self.env.config.retry_backoff_ms + self.env.rng.randrange(upper + 1)

    def become_unattached(self, epoch: int, now_ms: int, deadline_ms: int | None = None) -> None:
        s = self.state
        voted = s.voted_id if epoch == s.epoch else NO_NODE
        deadline = self._election_deadline(now_ms) if deadline_ms is None else deadline_ms
        if voted != NO_NODE:
            self._become(Voted(epoch, voted, deadline), ElectionState(epoch, NO_NODE, voted, s.may_vote), now_ms)
        else:
            self._become(Unattached(epoch, deadline), ElectionState(epoch, NO_NODE, NO_NODE, s.may_vote), now_ms)

    def become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        s = self.state
        voted = s.voted_id if epoch == s.epoch else NO_NODE
        role = Follower(epoch, leader_id, now_ms + self.env.config.fetch_timeout_ms, now_ms)
        self.election_started_ms = -1
        self._become(role, ElectionState(epoch, leader_id, voted, s.may_vote), now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        leader = self.role.leader_id if isinstance(self.role, Follower) else NO_NODE
        role = Prospective(self.epoch, now_ms + self.env.config.election_timeout_ms
                           + self.env.rng.randrange(self.env.config.election_timeout_ms + 1), leader_id=leader)
        role.granted.add(self.node_id)
        if self.election_started_ms < 0:
            self.election_started_ms = now_ms
        self._become(role, self.state, now_ms)
        self._request_votes(pre_vote=True, now_ms=now_ms)
        self._maybe_won(now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        epoch = self.epoch + 1
        role = Candidate(epoch, now_ms + self.env.config.election_timeout_ms
                         + self.env.rng.randrange(self.env.config.election_timeout_ms + 1))
        role.granted.add(self.node_id)
        self._become(role, ElectionState(epoch, NO_NODE, self.node_id, self.state.may_vote), now_ms)
        self._request_votes(pre_vote=False, now_ms=now_ms)
        self._maybe_won(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        granted = sorted(self.role.granted)
        epoch = self.epoch
        start = self.partition.log.log_end_offset
        progress = ReplicaProgress(self.node_id, self.voters, now_ms)
        others = {v for v in self.voters if v != self.node_id}
        role = Leader(epoch, start, progress, now_ms + self.env.config.check_quorum_ms, unacknowledged=set(others))
        self._become(role, ElectionState(epoch, self.node_id, self.state.voted_id, self.state.may_vote), now_ms)
        self.election_retries = 0
        if self.election_started_ms >= 0 and len(self.voters) > 1:
            self.env.hooks.election_latencies.append(now_ms - self.election_started_ms)
        self.election_started_ms = -1
        self.env.begin_epoch(self, now_ms, granted)  # the LeaderChange batch: this epoch's start offset
        for v in sorted(others):
            self.env.send_begin_epoch(v, self)
        role.resend_ms = now_ms + self.env.config.retry_backoff_ms if others else 0
        self._arm(now_ms)
        self.maybe_advance_hw(now_ms)

    # (Leader.resend_ms stays armed while there are other voters: see poll.)

    def resign(self, now_ms: int, successors: list[int] | None = None) -> None:
        """Graceful (shutdown) or check-quorum resignation: EndQuorumEpoch to the other voters."""
        if not isinstance(self.role, Leader):
            return
        order = successors if successors is not None else self.role.progress.successors()
        others = {v for v in self.voters if v != self.node_id}
        role = Resigned(self.epoch, now_ms + self.env.config.election_timeout_ms, successors=order,
                        unacknowledged=set(others))
        self._become(role, self.state, now_ms)
        for v in sorted(others):
            self.env.send_end_epoch(v, self, order)
        role.resend_ms = now_ms + self.env.config.retry_backoff_ms if others else 0
        self._arm(now_ms)

    # -- timers ------------------------------------------------------------------------------
    def poll(self, now_ms: int) -> None:
        r = self.role
        if isinstance(r, (Unattached, Voted)):
            if 0 <= r.election_deadline_ms <= now_ms:
                if self.may_stand:
                    self._become_prospective(now_ms)
                    return
                if not self.is_voter:
                    self._discover_leader(now_ms)
                    return
        elif isinstance(r, Follower):
            if r.fetch_deadline_ms <= now_ms:
                heard = self.env.last_heard_from(r.leader_id)
                if (heard >= 0 and now_ms - heard < self.env.config.fetch_timeout_ms
                        and not self.env.leader_unreachable(r.leader_id, now_ms)):
                    r.fetch_deadline_ms = heard + self.env.config.fetch_timeout_ms
                elif self.may_stand:
                    log.debug("%s-%d: fetch timeout: heard %s now %s unreachable %s", *self.key, heard, now_ms,
                              self.env.leader_unreachable(r.leader_id, now_ms))
                    self._become_prospective(now_ms)
                    return
                elif not self.is_voter:
                    self.become_unattached(self.epoch, now_ms)  # look for the leader again
                    return
                else:
                    r.fetch_deadline_ms = now_ms + self.env.config.fetch_timeout_ms
        elif isinstance(r, Prospective):
            if r.election_deadline_ms <= now_ms:
                self._lost_election(now_ms)
                return
            if 0 < r.retry_ms <= now_ms:
                self._request_votes(pre_vote=True, now_ms=now_ms, only_missing=True)
        elif isinstance(r, Candidate):
            if r.election_deadline_ms <= now_ms:
                self._lost_election(now_ms)
                return
            if 0 < r.retry_ms <= now_ms:
                self._request_votes(pre_vote=False, now_ms=now_ms, only_missing=True)
        elif isinstance(r, Leader):
            if r.check_quorum_deadline_ms <= now_ms:
                window = self.env.config.check_quorum_ms
                if r.progress.alive_majority(now_ms, window, self.session_fetch_ms):
                    r.check_quorum_deadline_ms = now_ms + window // 3 or 1
                else:
                    log.info("%s-%d: no fetch from a majority in %d ms, resigning", *self.key, window)
                    self.resign(now_ms)
                    return
            if 0 < r.resend_ms <= now_ms:
                # Voters that never acknowledged, or stopped fetching (restarted on an empty
                # disk, partitioned away), hear BeginQuorumEpoch again until they fetch.
                quiet = r.progress.quiet_voters(now_ms, self.env.config.fetch_timeout_ms,
                                               self.session_fetch_ms)
                for v in sorted(r.unacknowledged | quiet):
                    self.env.send_begin_epoch(v, self)
                r.resend_ms = now_ms + self.env.config.request_timeout_ms
        elif isinstance(r, Resigned):
            if r.election_deadline_ms <= now_ms and self.may_stand:
                self._become_prospective(now_ms)
                return
            if 0 < r.resend_ms <= now_ms:
                for v in sorted(r.unacknowledged):
                    self.env.send_end_epoch(v, self, r.successors)
                r.resend_ms = now_ms + self.env.config.request_timeout_ms if r.unacknowledged else 0
        self._arm(now_ms)

    def _lost_election(self, now_ms: int) -> None:
        self.become_unattached(self.epoch, now_ms, self._backoff_deadline(now_ms))

    # -- votes, as a candidate ---------------------------------------------------------------
    def _request_votes(self, *, pre_vote: bool, now_ms: int, only_missing: bool = False) -> None:
        r = self.role
        epoch = self.epoch + 1 if pre_vote else self.epoch
        last_epoch, last_offset = self.last_log_id()
        for v in self.voters:
            if v == self.node_id or (only_missing and (v in r.granted or v in r.rejected)):
                continue
            self.env.send_vote(v, self, pre_vote, epoch, last_epoch, last_offset)
        r.retry_ms = now_ms + self.env.config.request_timeout_ms

    def on_vote_response(self, voter: int, answer: VoteAnswer, pre_vote: bool, now_ms: int) -> None:
        if self.observe_leader(answer.leader_id, answer.leader_epoch, now_ms):
            return
        r = self.role
        if pre_vote and isinstance(r, Prospective) and answer.epoch_of_request == r.epoch + 1:
            (r.granted if answer.granted else r.rejected).add(voter)
        elif not pre_vote and isinstance(r, Candidate) and answer.epoch_of_request == r.epoch:
            (r.granted if answer.granted else r.rejected).add(voter)
        else:
            return
        self._maybe_won(now_ms)

    def on_vote_unanswered(self, voter: int, pre_vote: bool, epoch_of_request: int, now_ms: int) -> None:
        r = self.role
        if pre_vote and isinstance(r, Prospective) and epoch_of_request == r.epoch + 1:
            r.rejected.add(voter)
        elif not pre_vote and isinstance(r, Candidate) and epoch_of_request == r.epoch:
            r.rejected.add(voter)
        else:
            return
        self._maybe_won(now_ms)

    def _maybe_won(self, now_ms: int) -> None:
        r = self.role
        majority = len(self.voters) // 2 + 1
        if len(r.granted) >= majority:
            if isinstance(r, Prospective):
                self._become_candidate(now_ms)
            else:
                self._become_leader(now_ms)
        elif len(r.rejected) >= len(self.voters) - majority + 1:
            self._lost_election(now_ms)

    # -- votes, as a voter -------------------------------------------------------------------
    def on_vote_request(self, candidate: int, epoch: int, last_epoch: int, last_offset: int,
                        pre_vote: bool, now_ms: int) -> tuple[int, bool]:
        """(error code, granted). KIP-595 vote rules; KIP-996 pre-votes change nothing."""
        if candidate not in self.voters or not self.is_voter:
            return 0, False
        if epoch < self.epoch:
            return 74, False  # FENCED_LEADER_EPOCH: the answer carries our epoch and leader
        log_ok = self.env.bugs.skip_log_check_in_vote or log_is_at_least(
            (last_epoch, last_offset), self.last_log_id())
        if not self.state.may_vote:
            return 0, False
        if pre_vote:
            r = self.role
            if isinstance(r, Leader):
                return 0, False
            if isinstance(r, Follower):
                # The leader is alive (we fetched from it since we began following it, within
                # the timeout): a flapping node cannot disrupt it. A follower that only came
                # back from a failed pre-vote has not fetched since, and grants: otherwise two
                # followers of a dead leader, timing out together, refuse each other forever
                # (each failed pre-vote restarting the other's fetch timer), as KIP-996's
                # "has fetched from the leader" rule avoids.
                heard = self.env.last_heard_from(r.leader_id)
                if (heard >= max(r.since_ms, 0) and now_ms - heard < self.env.config.fetch_timeout_ms
                        and not self.env.leader_unreachable(r.leader_id, now_ms)):
                    return 0, False
            return 0, log_ok
        if epoch > self.epoch:
            self.become_unattached(epoch, now_ms)
        s = self.state
        if s.voted_id == candidate:
            return 0, True
        if s.voted_id != NO_NODE or s.leader_id != NO_NODE or not log_ok:
            return 0, False
        r = self.role
        self._become(Voted(epoch, candidate, self._election_deadline(now_ms)),
                     ElectionState(epoch, NO_NODE, candidate, s.may_vote), now_ms)
        if self.env.bugs.vote_not_persisted:
            self.env.forget_persist(self)
        return 0, True

    # -- learning about leaders (the shared path of every response and request) -------------
    def observe_leader(self, leader_id: int, epoch: int, now_ms: int) -> bool:
        """A message told us (epoch, leader). True when it moved us to another role."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self.become_follower(epoch, leader_id, now_ms)
            else:
                self.become_unattached(epoch, now_ms)
            return True
        if epoch == self.epoch and leader_id >= 0 and leader_id != self.node_id:
            if isinstance(self.role, Prospective) and self.role.leader_id == leader_id:
                # The leader we lost touch with, named by a voter that has not noticed yet:
                # nothing new (Kafka's hasLeader check). Going back to following it would
                # restart our fetch timer on every failed pre-vote, and two followers of a
                # dead leader, timing out together, would keep each other from standing.
                return False
            if isinstance(self.role, (Unattached, Voted, Prospective, Candidate)):
                self.become_follower(epoch, leader_id, now_ms)
                return True
        return False

    def leader_gone(self, now_ms: int) -> None:
        """Our leader told us it no longer leads this epoch: wait for an election."""
        if isinstance(self.role, Follower):
            self.become_unattached(self.epoch, now_ms)

    def on_begin_epoch(self, leader_id: int, epoch: int, now_ms: int) -> int:
        if epoch < self.epoch:
            return 74
        if isinstance(self.role, Follower) and self.role.leader_id == leader_id and epoch == self.epoch:
            return 0
        if epoch == self.epoch and isinstance(self.role, (Leader, Resigned)):
            return 0 if leader_id == self.node_id else 74  # cannot happen: one leader per epoch
        self.become_follower(epoch, leader_id, now_ms)
        return 0

    def on_end_epoch(self, leader_id: int, epoch: int, successors: list[int], now_ms: int) -> int:
        if epoch < self.epoch:
            return 74
        if epoch > self.epoch:
            self.become_unattached(epoch, now_ms)
            return 0
        r = self.role
        if isinstance(r, Follower) and r.leader_id == leader_id:
            # The most caught-up successor stands first; the others wait their turn (KIP-595).
            deadline = self._successor_turn(successors, now_ms) if self.may_stand else -1
            self.become_unattached(epoch, now_ms, deadline)
        elif isinstance(r, (Unattached, Voted)) and self.may_stand and r.election_deadline_ms >= 0:
            # The resigned leader's answer to a fetch came first: no leader in this epoch, and a
            # full election timeout to wait. The turn still counts, or the first successor
            # stands after the others (seen on real processes: every hand-over to a preferred
            # replica under load failed so).
            turn = self._successor_turn(successors, now_ms)
            if turn < r.election_deadline_ms:
                r.election_deadline_ms = turn
                self._arm(now_ms)
        return 0

    def _successor_turn(self, successors: list[int], now_ms: int) -> int:
        position = successors.index(self.node_id) if self.node_id in successors else len(self.voters)
        step = self.env.config.election_timeout_ms // 4
        return now_ms + position * step + self.env.rng.randrange(step // 2 + 1)

    def on_begin_epoch_acked(self, voter: int) -> None:
        if isinstance(self.role, Leader):
            self.role.unacknowledged.discard(voter)

    def on_begin_epoch_unknown(self, voter: int, now_ms: int) -> None:
        """The voter has not replayed this partition's creation yet: ask again after the retry
        backoff, not a request timeout (meanwhile it would not fetch, and the time it took to
        find us by its own election timeout could take it out of the ISR)."""
        r = self.role
        if isinstance(r, Leader) and voter in r.unacknowledged:
            soon = now_ms + self.env.config.retry_backoff_ms
            if r.resend_ms <= 0 or soon < r.resend_ms:
                r.resend_ms = soon
                self._arm(now_ms)

    def on_end_epoch_acked(self, voter: int) -> None:
        if isinstance(self.role, Resigned):
            self.role.unacknowledged.discard(voter)

    # -- the leader's high watermark --------------------------------------------------------
    def note_contact(self, replica_id: int, now_ms: int) -> None:
        """A follower fetched a snapshot chunk from us: it is alive (check-quorum)."""
        if isinstance(self.role, Leader):
            progress = self.role.progress
            p = progress.by_voter.get(replica_id) or progress.observers.get(replica_id)
            if p is not None:
                p.last_fetch_ms = max(p.last_fetch_ms, now_ms)

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        r = self.role
        if not isinstance(r, Leader):
            return
        log_ = self.partition.log
        if r.progress.record_fetch(replica_id, fetch_offset, log_.log_end_offset, now_ms,
                                   caught_up_until(log_, fetch_offset)):
            r.unacknowledged.discard(replica_id)
            self.maybe_advance_hw(now_ms)

    def maybe_advance_hw(self, now_ms: int) -> bool:
        r = self.role
        if not isinstance(r, Leader):
            return False
        offset = r.progress.majority_offset(self.durable_offset())
        # Raft's commit rule: only an offset of our own epoch commits what comes before it.
        past_start = offset > r.epoch_start_offset or self.env.bugs.hw_before_epoch_start
        if past_start and offset > self.partition.high_watermark:
            self.partition.set_high_watermark(offset)
            self.env.hw_moved(self)
            return True
        return False

    def follower_hw(self, leader_hw: int, now_ms: int) -> None:
        """HW = min(LEO, leader's HW); it never moves back (a truncation below it is a violation)."""
        hw = min(leader_hw, self.partition.log.log_end_offset)
        if hw > self.partition.high_watermark:
            self.partition.set_high_watermark(hw)
            self.env.hw_moved(self)

    def caught_up_once(self, leader_hw: int, now_ms: int) -> None:
        """Disk-loss rule: having *durably* reached a leader's HW, the replica may vote again
        (the simulation found that counting unflushed records here lets a crash undo it)."""
        if leader_hw >= 0:
            self.leader_hw_seen = max(self.leader_hw_seen, leader_hw)
        if self.state.may_vote or self.leader_hw_seen < 0:
            return
        # A new leader's HW starts low; it covers everything committed before only once it
        # passes the start of the leader's epoch (its LeaderChange batch, now in our log too,
        # or inside a snapshot of that epoch we installed: the epoch began at or before its end).
        latest = self.partition.log.epoch_cache.latest_entry
        snapshots = self.partition.snapshots
        snapshot = snapshots.latest if snapshots is not None else None
        starts = []
        if latest is not None and latest.epoch == self.epoch:
            starts.append(latest.start_offset)  # after an install, the snapshot's end: too late
        if snapshot is not None and snapshot.epoch == self.epoch:
            starts.append(snapshot.end_offset - 1)
        if not starts:
            return
        epoch_start = min(starts)
        if self.leader_hw_seen <= epoch_start:
            return
        if self.durable_offset() >= self.leader_hw_seen:
            s = self.state
            self.state = ElectionState(s.epoch, s.leader_id, s.voted_id, True)
            self.env.persist(self)
            log.info("%s-%d: caught up with the leader after a disk loss; may vote again", *self.key)

    def check_truncation(self, offset: int) -> None:
        if offset < self.partition.high_watermark:
            raise SafetyViolation(f"{self.key[0]}-{self.key[1]}: truncation to {offset} below the high "
                                  f"watermark {self.partition.high_watermark} on node {self.node_id}")


def caught_up_until(log_, offset: int) -> int:
    """When the leader's log last ended at or before `offset`: a follower whose log ends there
    had everything we had until that moment (-1: not in the recent append history)."""
    appends = getattr(log_, "leader_appends", None)
    if not appends or appends[0][0] > offset:
        return -1
    for before, at_ms in reversed(appends):
        if before <= offset:
            # The append at or after `offset` follows this one (or none has happened since).
            return at_ms
    return -1
