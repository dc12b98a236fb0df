"""Drives every Raft group of a node: it is each group's environment (a GroupEnv), and composes
the parts that do the work: timers (timers.py), requests in flight (in_flight.py), the election
RPCs (quorum_asks.py), our fetch streams (fetch_streams.py), snapshot downloads, the followers'
sessions with us (follower_sessions.py), and the persist-then-send rule (persist_gate.py).

Inputs: `handle_*` for quorum requests (called by the RPC handler modules), `on_response`,
`on_unreachable`, `poll(now_ms)`. Outputs: `take_outbox()` → an Outbox whose `persist` (if any)
the shell must make durable (one write, one fsync) *before* it sends `sends`; it then calls
`on_persisted()`, which releases what was held back for it.
"""
from __future__ import annotations

import logging

from ...protocol import api

from ..outcomes import Completion
from . import rpc
from .config import BugSwitches, RaftConfig
from .election_state import ElectionState
from .fetch_streams import FetchStreams
from .fetcher import FETCH_VERSION
from .follower_sessions import FollowerSessions
from .group import RaftGroup
from .in_flight import Call, InFlight, InFlightRequests
from .persist_gate import Outbox, PersistGate
from .quorum_asks import QuorumAsks
from .snapshot_download import SnapshotDownloads
from .snapshot_installs import SnapshotInstalls
from .timers import GroupTimers
from .truncations import Truncations

log = logging.getLogger(__name__)

__all__ = ["Outbox", "Replication"]


class Replication:
    def __init__(self, node_id: int, *, config: RaftConfig, rng, hooks, cluster_id: str,
                 fsync_never: bool = False, bugs: BugSwitches | None = None, directory_id=None) -> None:
        self.node_id = node_id
        self.directory_id = directory_id       # this node's data dir (KIP-853: a voter is (id, directory))
        self.config = config
        self.rng = rng
        self.hooks = hooks                     # the Node: log appends, purgatory wake-ups
        self.cluster_id = cluster_id
        self.fsync_never = fsync_never
        self.bugs = bugs or BugSwitches()
        self.groups: dict = {}
        self.timers = GroupTimers(self.groups)
        self.gate = PersistGate()
        self.asks = QuorumAsks(node_id, cluster_id, self.groups)
        self.streams = FetchStreams(node_id)
        self.downloads = SnapshotDownloads()
        self.truncations = Truncations()
        self.installs = SnapshotInstalls()
        self.sessions = FollowerSessions()
        self.in_flight = InFlightRequests(rng.randrange(1, 1 << 30), config.request_timeout_ms)
        self._topic_ids: dict = {}
        self._topic_names: dict = {}

    @property
    def peer_fetch_ms(self) -> dict[int, int]:
        """When each node last fetched from us (the metadata plane reads it)."""
        return self.sessions.peer_fetch_ms

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
        self.gate.drop(key)
        self.streams.remove(group)
        self.downloads.cancel(key)
        self.truncations.cancel(key)
        self.installs.cancel(key)
        group.delete()

    # -- the groups' environment (GroupEnv), and the fetch path's ----------------------------------
    def schedule(self, group: RaftGroup, deadline_ms: int) -> None:
        self.timers.schedule(group.key, deadline_ms)

    def persist(self, group: RaftGroup) -> None:
        self.gate.mark(group.key, group.state)

    def forget_persist(self, group: RaftGroup) -> None:
        self.gate.unmark(group.key)

    def follow(self, group: RaftGroup, leader_id: int) -> None:
        self.streams.follow(group, leader_id)

    def unfollow(self, group: RaftGroup, leader_id: int) -> None:
        self.streams.unfollow(group, leader_id)
        self.downloads.cancel(group.key)
        self.truncations.cancel(group.key)
        self.installs.cancel(group.key)

    def last_heard_from(self, leader_id: int) -> int:
        return self.streams.last_heard_from(leader_id)

    def leader_unreachable(self, leader_id: int, now_ms: int) -> bool:
        return self.streams.leader_unreachable(leader_id, now_ms, self.config.unreachable_grace_ms)

    def follower_fetch_ms(self, replica_id: int, key) -> int:
        return self.sessions.fetch_ms(replica_id, key)

    def send_vote(self, voter: int, group: RaftGroup, pre_vote: bool, epoch: int, last_epoch: int,
                  last_offset: int) -> None:
        self.asks.vote(voter, group, pre_vote, epoch, last_epoch, last_offset)

    def send_begin_epoch(self, voter: int, group: RaftGroup) -> None:
        self.asks.begin_epoch(voter, group)

    def send_end_epoch(self, voter: int, group: RaftGroup, successors: list[int]) -> None:
        self.asks.end_epoch(voter, group, successors)

    def begin_epoch(self, group: RaftGroup, now_ms: int, granted) -> None:
        self.hooks.append_leader_change(group, now_ms, granted)

    def append_voters(self, group: RaftGroup, voter_set, now_ms: int) -> int:
        """Append a VotersRecord as the group's leader; its offset (KIP-853)."""
        self.hooks.append_voters(group, voter_set, now_ms)
        return group.log_voters.offset()

    def follower_directory(self, replica_id: int):
        """The directory id a follower's fetches say (None: not heard)."""
        return self.sessions.directories.get(replica_id)

    def record_election_latency(self, ms: int) -> None:
        self.hooks.election_latencies.append(ms)

    def hw_moved(self, group: RaftGroup) -> None:
        self.hooks.partition_changed(group.partition, hw=True)

    def leadership_lost(self, group: RaftGroup) -> None:
        self.hooks.partition_changed(group.partition, hw=False)

    def appended(self, group: RaftGroup) -> None:
        self.hooks.follower_appended(group.partition)

    def truncated(self, group: RaftGroup) -> None:
        stream = self.streams.of(group)
        if stream is not None:
            stream.unflushed.discard(group.key)
        self.hooks.follower_truncated(group.partition)

    def start_truncation(self, group: RaftGroup, offset: int) -> bool:
        """Truncate off the loop (truncations.py); False: the caller truncates now."""
        if not self.truncations.start(group, offset):
            return False
        self.position_changed(group)  # paused: it leaves the fetch session
        return True

    def truncation_done(self, job, error: BaseException | None) -> None:
        if self.truncations.done(job, error):
            self.truncated(job.group)
        if self.groups.get(job.key) is job.group:
            self.position_changed(job.group)  # fetching resumes

    def start_install(self, download) -> None:
        """A snapshot is downloaded: install it through a job (snapshot_installs.py)."""
        self.installs.start(download)
        self.position_changed(download.group)  # still paused

    def install_done(self, job, error: BaseException | None, now_ms: int) -> None:
        group = job.group
        if self.installs.done(job, error):
            group.check_truncation(job.snapshot_id.end_offset)  # the log restarts at the snapshot's end
            self.hooks.install_snapshot(group.partition, job.snapshot_id, now_ms, job.prepared)
            # An idle partition's later fetches may bring no answer for it: the disk-loss rule
            # checks here whether the snapshot already covers the leader's HW.
            group.catch_up.caught_up_once(-1, now_ms)
        if self.groups.get(job.key) is group:
            self.position_changed(group)  # fetching resumes

    def follower_jobs(self) -> list:
        """Truncations and snapshot installs for the shell to run off the loop."""
        return self.truncations.jobs() + self.installs.jobs()

    def log_start_moved(self, group: RaftGroup) -> None:
        self.hooks.partition_changed(group.partition, hw=False)

    def follower_log_start(self, group: RaftGroup, leader_log_start: int) -> None:
        self.hooks.follower_log_start(group.partition, leader_log_start)

    def position_changed(self, group: RaftGroup) -> None:
        """The group's fetch position changed outside a Fetch answer (a snapshot installed)."""
        stream = self.streams.of(group)
        if stream is not None:
            stream.changed.add(group.key)

    def heard_from_leader(self, leader_id: int, now_ms: int) -> None:
        """A FetchSnapshot answer counts as hearing from the leader, as a Fetch does."""
        self.streams.heard_from(leader_id, now_ms)

    def start_snapshot_download(self, group: RaftGroup, snapshot_id) -> None:
        if group.key in self.downloads.by_key or self.installs.busy(group.key):
            # One download of a group at a time, and none while its last one's install runs:
            # they share the `.part` file, which a second opening would truncate (seed 5355
            # published an empty snapshot so) and a late install's abort would remove.
            return
        if self.downloads.start(group, snapshot_id, self.hooks.begin_snapshot_download(group.partition, snapshot_id)):
            log.info("%s-%d: fetching snapshot %s from %d", *group.key, snapshot_id, group.leader_id)
            self.position_changed(group)  # paused: it leaves the fetch session

    # -- driving --------------------------------------------------------------------------------
    def poll(self, now_ms: int) -> None:
        self.timers.fire(now_ms)
        self.in_flight.fail_expired(now_ms, self._failed)
        for stream in self.streams.ready(now_ms):
            request = stream.build_request(self.node_id, self.config, self._topic_ids, self.directory_id)
            self._send(stream.leader_id, api.FETCH, FETCH_VERSION, request, now_ms, stream)
        for leader, downloads in self.downloads.ready_by_leader(now_ms).items():
            request = rpc.fetch_snapshot_request(self.cluster_id, self.node_id, self.config.snapshot_chunk_bytes,
                                                 downloads)
            self.downloads.sent(leader)
            self._send(leader, api.FETCH_SNAPSHOT, rpc.FETCH_SNAPSHOT_VERSION, request, now_ms, leader)

    def next_deadline_ms(self) -> int | None:
        candidates = self.streams.next_send_ms()
        for deadline in (self.timers.next_ms(), self.in_flight.next_expiry_ms()):
            if deadline is not None:
                candidates.append(deadline)
        return min(candidates) if candidates else None

    def on_unreachable(self, node_id: int, now_ms: int) -> None:
        """The shell could not reach `node_id` (connection refused or reset): its requests fail
        now, and if we follow it, its groups may stand after `unreachable_grace_ms`."""
        self.in_flight.fail_to(node_id, now_ms, self._failed)
        self.streams.unreachable(node_id, now_ms, self.config.unreachable_grace_ms, self.rng)

    def _failed(self, flight: InFlight, now_ms: int) -> None:
        if isinstance(flight.context, Call):
            flight.context.on_done(None, now_ms)
        elif flight.api_key == api.FETCH:
            flight.context.on_failure(now_ms, self.config.retry_backoff_ms)
        elif flight.api_key == api.FETCH_SNAPSHOT:
            self.downloads.failed(flight.context, now_ms + self.config.retry_backoff_ms)
        else:
            self.asks.on_failure(flight, now_ms)

    def _send(self, destination: int, api_key: int, version: int, request, now_ms: int, context=None,
              timeout_ms: int = -1) -> None:
        self.gate.send(self.in_flight.start(destination, api_key, version, request, now_ms, context, timeout_ms))

    def call(self, destination: int, api_key: int, version: int, request, now_ms: int, on_done,
             timeout_ms: int = -1) -> None:
        """Any other request to a peer (the metadata plane's): `on_done(response, now_ms)` with
        the answer, or with None if it timed out or the peer was unreachable."""
        self._send(destination, api_key, version, request, now_ms, Call(on_done), timeout_ms)

    def complete(self, token: int, response) -> None:
        """An answer to a quorum request: it goes out with this step's sends (held if a persist
        is pending, so a vote is never answered before it is durable)."""
        self.gate.complete(Completion(token, response))

    # -- persist, then send ----------------------------------------------------------------------
    def persist_pending(self) -> bool:
        return self.gate.pending()

    def take_outbox(self, now_ms: int) -> Outbox:
        self.asks.flush(self._send, now_ms)
        return self.gate.take()

    def on_persisted(self) -> None:
        self.gate.on_persisted()

    # -- answers and requests from peers -----------------------------------------------------
    def on_response(self, source: int, correlation_id: int, response, now_ms: int) -> None:
        flight = self.in_flight.answered(source, correlation_id, response)
        if flight is None:
            return
        if isinstance(flight.context, Call):
            flight.context.on_done(response, now_ms)
        elif flight.api_key == api.FETCH:
            flight.context.on_response(response, self._topic_names, now_ms, self.config.retry_backoff_ms, self)
        elif flight.api_key == api.FETCH_SNAPSHOT:
            self.downloads.on_response(source, response, now_ms, self)
        else:
            self.asks.on_response(flight, response, now_ms)

    def on_follower_fetch_request(self, replica_id: int, request, version: int, now_ms: int) -> None:
        """A follower's Fetch: its session's groups, and when it fetched (check-quorum)."""
        self.sessions.on_fetch(replica_id, request, version, now_ms, self._topic_names)

    def on_follower_fetch_not_read(self, replica_id: int, keys) -> None:
        self.sessions.not_read(replica_id, keys)

    def on_follower_fetch_refused(self, replica_id: int, request, version: int) -> None:
        self.sessions.refused(replica_id, request, version, self._topic_names)

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
            return
        stream = self.streams.of(group)
        if stream is not None:
            if flushed_offset >= partition.log.log_end_offset:
                stream.unflushed.discard(partition.key)
            group.catch_up.caught_up_once(-1, now_ms)
