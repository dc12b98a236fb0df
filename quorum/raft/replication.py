"""Drives every Raft group of a node: timers, batched RPCs, follower fetch streams, snapshot
downloads, and the persist-then-send rule.

Inputs: `handle_*` for quorum requests (called by the RPC handler modules), `on_response`,
`on_unreachable`, `poll(now_ms)`. Outputs: `take_outbox()` → an Outbox whose `persist` (if any)
the shell must make durable (one write, one fsync) *before* it sends `sends`; it then calls
`on_persisted()`, which releases what was held back for it.
"""
from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass, field

from ...protocol import api
from ...protocol.errors import ErrorCode

from . import rpc
from .config import BugSwitches, RaftConfig
from .election_state import ElectionState
from .fetcher import FETCH_VERSION, FetchStream
from .group import RaftGroup
from .rpc import Send, VoteAsk
from .snapshot_download import SnapshotDownload, SnapshotDownloads
from .votes import VoteAnswer

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Outbox:
    persist: dict | None = None                    # GroupKey -> ElectionState, write first
    sends: list = field(default_factory=list)      # Send
    completions: list = field(default_factory=list)  # answers to parked quorum requests


@dataclass(slots=True)
class _InFlight:
    destination: int
    api_key: int
    sent_ms: int
    context: object
    timeout_ms: int = -1   # -1: the configured request timeout


@dataclass(slots=True)
class Call:
    on_done: object  # (response | None, now_ms) -> None


class Replication:
    def __init__(self, node_id: int, *, config: RaftConfig, rng, hooks, cluster_id: str,
                 fsync_never: bool = False, bugs: BugSwitches | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.rng = rng
        self.hooks = hooks                     # the Node: log appends, purgatory wake-ups
        self.cluster_id = cluster_id
        self.fsync_never = fsync_never
        self.bugs = bugs or BugSwitches()
        self.groups: dict = {}
        self.peer_fetch_ms: dict[int, int] = {}  # leader side: when each node last fetched from us
        self.fetched_by: dict[int, set] = {}     # leader side: the groups each follower's session holds
        self._timers: list = []
        self._seq = 0
        self._dirty: dict = {}
        self._persisting: dict | None = None
        self._pending = Outbox()
        self._held = Outbox()
        self._votes: dict[int, list] = {}
        self._begins: dict[int, list] = {}
        self._ends: dict[int, list] = {}
        self.streams: dict[int, FetchStream] = {}
        self.downloads = SnapshotDownloads()
        self._in_flight: dict[int, _InFlight] = {}
        # Random start: answers meant for a previous incarnation of this node never match.
        self._next_correlation = rng.randrange(1, 1 << 30)
        self._topic_ids: dict = {}
        self._topic_names: dict = {}

    # -- hosting groups ------------------------------------------------------------------------
    def add_group(self, partition, voters, state: ElectionState, now_ms: int, *, persist_now: bool = False) -> RaftGroup:
        group = RaftGroup(self, partition, tuple(voters), state)
        self.groups[partition.key] = group
        self._topic_ids[partition.topic] = partition.topic_id
        self._topic_names[partition.topic_id] = partition.topic
        group.start(now_ms)
        if persist_now:
            self.persist(group)
        return group

    def remove_group(self, key) -> None:
        """The partition is deleted here: forget its group (its topic's files go next)."""
        group = self.groups.pop(key, None)
        if group is None:
            return
        self._dirty.pop(key, None)
        for stream in self.streams.values():
            stream.remove(group)
        self.downloads.cancel(key)
        group.role = None
        group.timer_ms = -2  # a timer still in the heap finds no group (or not this deadline)

    # -- what groups call (env) --------------------------------------------------------------------
    def schedule(self, group, deadline_ms: int) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (deadline_ms, self._seq, group.key))

    def persist(self, group) -> None:
        self._dirty[group.key] = group.state

    def forget_persist(self, group) -> None:
        self._dirty.pop(group.key, None)  # test-only bug: the vote is never made durable

    def follow(self, group, leader_id: int) -> None:
        if leader_id == self.node_id or leader_id < 0:
            return
        self.streams.setdefault(leader_id, FetchStream(leader_id)).add(group)

    def unfollow(self, group, leader_id: int) -> None:
        stream = self.streams.get(leader_id)
        if stream is not None:
            stream.remove(group)
        self.downloads.cancel(group.key)

    def last_heard_from(self, leader_id: int) -> int:
        stream = self.streams.get(leader_id)
        return stream.last_success_ms if stream is not None else -1

    def send_vote(self, voter: int, group, pre_vote: bool, epoch: int, last_epoch: int, last_offset: int) -> None:
        self._votes.setdefault(voter, []).append(VoteAsk(group.key, pre_vote, epoch, self.node_id, last_epoch,
                                                         last_offset))

    def send_begin_epoch(self, voter: int, group) -> None:
        self._begins.setdefault(voter, []).append((group.key, self.node_id, group.epoch))

    def send_end_epoch(self, voter: int, group, successors: list[int]) -> None:
        self._ends.setdefault(voter, []).append((group.key, self.node_id, group.epoch, list(successors)))

    def begin_epoch(self, group, now_ms: int, granted) -> None:
        self.hooks.append_leader_change(group, now_ms, granted)

    def hw_moved(self, group) -> None:
        self.hooks.partition_changed(group.partition, hw=True)

    def appended(self, group) -> None:
        self.hooks.follower_appended(group.partition)

    def truncated(self, group) -> None:
        stream = self.streams.get(group.leader_id)
        if stream is not None:
            stream.unflushed.discard(group.key)
        self.hooks.follower_truncated(group.partition)

    def log_start_moved(self, group) -> None:
        self.hooks.partition_changed(group.partition, hw=False)

    def follower_log_start(self, group, leader_log_start: int) -> None:
        self.hooks.follower_log_start(group.partition, leader_log_start)

    def leadership_lost(self, group) -> None:
        self.hooks.partition_changed(group.partition, hw=False)

    def position_changed(self, group) -> None:
        """The group's fetch position changed outside a Fetch answer (a snapshot installed)."""
        stream = self.streams.get(group.leader_id)
        if stream is not None:
            stream.changed.add(group.key)

    def heard_from_leader(self, leader_id: int, now_ms: int) -> None:
        """A FetchSnapshot answer counts as hearing from the leader, as a Fetch does."""
        stream = self.streams.get(leader_id)
        if stream is not None:
            stream.last_success_ms = max(stream.last_success_ms, now_ms)

    def start_snapshot_download(self, group, snapshot_id) -> None:
        if self.downloads.start(group, snapshot_id, self.hooks.begin_snapshot_download(group.partition, snapshot_id)):
            log.info("%s-%d: fetching snapshot %s from %d", *group.key, snapshot_id, group.leader_id)
            self.position_changed(group)  # paused: it leaves the fetch session

    # -- driving --------------------------------------------------------------------------------
    def poll(self, now_ms: int) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now_ms:
            deadline, _, key = heapq.heappop(timers)
            group = self.groups.get(key)
            if group is not None and group.timer_ms == deadline:
                group.poll(now_ms)
        self._expire_in_flight(now_ms)
        for stream in self.streams.values():
            if stream.ready(now_ms):
                request = stream.build_request(self.node_id, self.config, self._topic_ids)
                self._send(stream.leader_id, api.FETCH, FETCH_VERSION, request, now_ms, stream)
        for leader, downloads in self.downloads.ready_by_leader(now_ms).items():
            request = rpc.fetch_snapshot_request(self.cluster_id, self.node_id, self.config.snapshot_chunk_bytes,
                                                 downloads)
            self.downloads.sent(leader)
            self._send(leader, api.FETCH_SNAPSHOT, rpc.FETCH_SNAPSHOT_VERSION, request, now_ms, leader)

    def next_deadline_ms(self) -> int | None:
        candidates = []
        while self._timers:
            deadline, _, key = self._timers[0]
            group = self.groups.get(key)
            if group is not None and group.timer_ms == deadline:
                candidates.append(deadline)
                break
            heapq.heappop(self._timers)
        for stream in self.streams.values():
            if not stream.in_flight and not stream.unflushed and (stream.groups or stream.sent):
                candidates.append(stream.next_send_ms)
        if self._in_flight:
            candidates.append(min(f.sent_ms + self._timeout(f) for f in self._in_flight.values()))
        return min(candidates) if candidates else None

    def _timeout(self, flight: _InFlight) -> int:
        return flight.timeout_ms if flight.timeout_ms >= 0 else self.config.request_timeout_ms

    def _expire_in_flight(self, now_ms: int) -> None:
        for correlation in [c for c, f in self._in_flight.items() if now_ms - f.sent_ms >= self._timeout(f)]:
            self._failed(self._in_flight.pop(correlation), now_ms)

    def on_unreachable(self, node_id: int, now_ms: int) -> None:
        """The shell could not reach `node_id` (connection refused or reset): its requests fail
        now, and if we follow it, its groups may stand after `unreachable_grace_ms`."""
        for correlation in [c for c, f in self._in_flight.items() if f.destination == node_id]:
            self._failed(self._in_flight.pop(correlation), now_ms)
        stream = self.streams.get(node_id)
        if stream is not None:
            if stream.unreachable_since_ms < 0:
                stream.unreachable_since_ms = now_ms
            grace = self.config.unreachable_grace_ms
            for group in list(stream.groups.values()):
                # Jitter: every follower hears of the loss at once; standing at once too, they
                # would split the vote (the benchmark saw three elections in a row).
                group.leader_unreachable(stream.unreachable_since_ms + grace + self.rng.randrange(grace + 1), now_ms)

    def leader_unreachable(self, leader_id: int, now_ms: int) -> bool:
        stream = self.streams.get(leader_id)
        return (stream is not None and stream.unreachable_since_ms >= 0
                and now_ms - stream.unreachable_since_ms >= self.config.unreachable_grace_ms)

    def _failed(self, flight: _InFlight, now_ms: int) -> None:
        if isinstance(flight.context, Call):
            flight.context.on_done(None, now_ms)
        elif flight.api_key == api.VOTE:
            # A voter we cannot reach gives no vote this round: with the others' refusals the
            # election is lost now (a split vote backs off at once, not after its timeout).
            for key, ask in flight.context.items():
                group = self.groups.get(key)
                if group is not None:
                    group.on_vote_unanswered(flight.destination, ask.pre_vote, ask.epoch, now_ms)
        elif flight.api_key == api.FETCH:
            flight.context.on_failure(now_ms, self.config.retry_backoff_ms)
        elif flight.api_key == api.FETCH_SNAPSHOT:
            self.downloads.failed(flight.context, now_ms + self.config.retry_backoff_ms)
        # Votes, BeginQuorumEpoch and EndQuorumEpoch are resent by their roles' timers.

    def _send(self, destination: int, api_key: int, version: int, request, now_ms: int, context=None,
              timeout_ms: int = -1) -> None:
        correlation = self._next_correlation
        self._next_correlation += 1
        self._in_flight[correlation] = _InFlight(destination, api_key, now_ms, context, timeout_ms)
        self._pending.sends.append(Send(destination, api_key, version, request, correlation))

    def call(self, destination: int, api_key: int, version: int, request, now_ms: int, on_done,
             timeout_ms: int = -1) -> None:
        """Any other request to a peer (the metadata plane's): `on_done(response, now_ms)` with
        the answer, or with None if it timed out or the peer was unreachable."""
        self._send(destination, api_key, version, request, now_ms, Call(on_done), timeout_ms)

    def flush_outbound(self, now_ms: int) -> None:
        """Turn this step's per-group asks into one request per destination and API."""
        votes, self._votes = self._votes, {}
        for voter, asks in sorted(votes.items()):
            self._send(voter, api.VOTE, rpc.VOTE_VERSION, rpc.vote_request(self.cluster_id, voter, asks), now_ms,
                       {a.key: a for a in asks})
        begins, self._begins = self._begins, {}
        for voter, groups in sorted(begins.items()):
            self._send(voter, api.BEGIN_QUORUM_EPOCH, rpc.BEGIN_QUORUM_EPOCH_VERSION,
                       rpc.begin_epoch_request(self.cluster_id, voter, groups), now_ms)
        ends, self._ends = self._ends, {}
        for voter, groups in sorted(ends.items()):
            self._send(voter, api.END_QUORUM_EPOCH, rpc.END_QUORUM_EPOCH_VERSION,
                       rpc.end_epoch_request(self.cluster_id, groups), now_ms)

    def complete(self, token: int, response) -> None:
        """An answer to a quorum request: it goes out with this step's sends (held if a persist
        is pending, so a vote is never answered before it is durable)."""
        from ..outcomes import Completion
        self._pending.completions.append(Completion(token, response))

    # -- persist, then send ----------------------------------------------------------------------
    def persist_pending(self) -> bool:
        return bool(self._dirty) or self._persisting is not None

    def take_outbox(self, now_ms: int) -> Outbox:
        self.flush_outbound(now_ms)
        pending, self._pending = self._pending, Outbox()
        if self._persisting is not None or self._dirty:
            self._held.sends += pending.sends
            self._held.completions += pending.completions
            if self._persisting is None and self._dirty:
                self._persisting, self._dirty = self._dirty, {}
                return Outbox(persist=dict(self._persisting))
            return Outbox()
        return pending

    def on_persisted(self) -> None:
        self._persisting = None
        if not self._dirty:
            self._pending.sends[:0] = self._held.sends
            self._pending.completions[:0] = self._held.completions
            self._held = Outbox()

    # -- responses ---------------------------------------------------------------------------
    def on_response(self, source: int, correlation_id: int, response, now_ms: int) -> None:
        flight = self._in_flight.get(correlation_id)
        if flight is None or flight.destination != source or not _answers(flight.api_key, response):
            return  # late (already timed out), a duplicate, or not an answer to that request
        del self._in_flight[correlation_id]
        if isinstance(flight.context, Call):
            flight.context.on_done(response, now_ms)
        elif flight.api_key == api.FETCH:
            flight.context.on_response(response, self._topic_names, now_ms, self.config.retry_backoff_ms, self)
        elif flight.api_key == api.VOTE:
            self._on_vote_response(source, flight.context, response, now_ms)
        elif flight.api_key == api.BEGIN_QUORUM_EPOCH:
            self._on_epoch_response(source, response, now_ms, begin=True)
        elif flight.api_key == api.END_QUORUM_EPOCH:
            self._on_epoch_response(source, response, now_ms, begin=False)
        elif flight.api_key == api.FETCH_SNAPSHOT:
            self.downloads.on_response(source, response, now_ms, self)

    def _on_vote_response(self, voter: int, asks: dict, response, now_ms: int) -> None:
        if response.error_code != 0:
            return
        for topic in response.topics:
            for p in topic.partitions:
                key = (topic.topic_name, p.partition_index)
                ask, group = asks.get(key), self.groups.get(key)
                if ask is None or group is None:
                    continue
                group.on_vote_response(voter, VoteAnswer(ask.epoch, p.error_code, p.leader_id, p.leader_epoch,
                                                         p.vote_granted), ask.pre_vote, now_ms)

    def _on_epoch_response(self, voter: int, response, now_ms: int, *, begin: bool) -> None:
        if response.error_code != 0:
            return
        for topic in response.topics:
            for p in topic.partitions:
                group = self.groups.get((topic.topic_name, p.partition_index))
                if group is None:
                    continue
                if group.observe_leader(p.leader_id, p.leader_epoch, now_ms):
                    continue
                if p.error_code == 0 and p.leader_epoch == group.epoch:
                    (group.on_begin_epoch_acked if begin else group.on_end_epoch_acked)(voter)
                elif begin and p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    group.on_begin_epoch_unknown(voter, now_ms)

    # -- leader side of follower fetches -----------------------------------------------------
    def on_follower_fetch_request(self, replica_id: int, request, version: int, now_ms: int) -> None:
        """Which groups each follower fetches from us (its one session: a full fetch names
        them all, an incremental one adds and forgets), and when it last fetched. A session
        fetch that does not name a group still counts for it, at O(changes) per request."""
        self.peer_fetch_ms[replica_id] = now_ms
        names = self._topic_names
        full = request.session_epoch in (0, -1)
        fetched = set() if full else self.fetched_by.setdefault(replica_id, set())
        for topic in request.topics:
            name = names.get(topic.topic_id) if version >= 13 else topic.topic
            fetched.update((name, p.partition) for p in topic.partitions)
        for topic in request.forgotten_topics_data:
            name = names.get(topic.topic_id) if version >= 13 else topic.topic
            fetched.difference_update((name, p) for p in topic.partitions)
        self.fetched_by[replica_id] = fetched

    def follower_fetch_ms(self, replica_id: int, key) -> int:
        """When `replica_id` last fetched group `key` from us, through its session (-1: it does not)."""
        if key in self.fetched_by.get(replica_id, ()):
            return self.peer_fetch_ms.get(replica_id, -1)
        return -1

    def resign_all(self, now_ms: int) -> int:
        """Graceful shutdown: every group led here hands over (EndQuorumEpoch)."""
        led = [g for g in self.groups.values() if g.is_leader]
        for group in led:
            group.resign(now_ms)
        return len(led)

    def on_flushed(self, partition, flushed_offset: int, now_ms: int) -> None:
        group = self.groups.get(partition.key)
        if group is None:
            return
        if group.is_leader:
            group.maybe_advance_hw(now_ms)
        elif group.leader_id in self.streams:
            stream = self.streams[group.leader_id]
            if flushed_offset >= partition.log.log_end_offset:
                stream.unflushed.discard(partition.key)
            group.caught_up_once(-1, now_ms)


def _answers(api_key: int, response) -> bool:
    return getattr(type(response), "API_KEY", api_key) == api_key

