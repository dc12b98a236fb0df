"""A node's sans-IO core: the facade the shell drives.

Driven by handle() / poll() / on_response() / on_unreachable() / on_flushed() with `now_ms`;
outputs are responses (Outcome, Completion) and an Outbox (state to persist first, then
requests to send). Storage, randomness and ids are injected (`node_wiring`), so the same core
runs on files under the asyncio server and on memory logs under the deterministic simulation
(tests/sim). The work is done by the pieces it wires together:

- `Hosting` (hosting.py): which partitions are hosted here, and their Raft groups;
- `Replication` (raft/): the groups, their timers, RPCs and persisted election states;
- `GroupHooks` (group_hooks.py): what the groups tell the node;
- `SnapshotCoordination` (snapshots/coordination.py): snapshot jobs and log starts;
- `MetadataPlane` (metadata/): the metadata quorum, the controller, registrations;
- `LeaderBalancer`, `Housekeeping`, `NodeStats`;
- the RPC handlers (handlers/), over a `HandlerContext`.
"""
from __future__ import annotations

import base64
import logging
import uuid

from .authorizer import AclAuthorizer
from .fetch_sessions import FetchSessionCache
from .group_hooks import GroupHooks
from .handlers import HANDLERS
from .handlers.context import HandlerContext
from .compaction import CleaningJob, LogCompaction
from .housekeeping import Housekeeping
from .hosting import Hosting
from .log_opening import OpenLogsJob
from .leader_balance import BALANCE_INTERVAL_MS, LeaderBalancer
from .limits import Refusals
from .metadata.plane import MetadataPlane
from .node_changes import NodeChanges
from .node_claims import is_refused, refusal
from .node_config import NodeConfig
from .node_stats import NodeStats
from .node_wiring import NodeRuntime, NodeStartup, NodeStorage, directory_id_of
from .outcomes import Completion, Outcome, Respond
from .partition import PartitionKey
from .peer import Peer
from .producer_ids import ProducerIdAllocator
from .purgatory import Purgatory
from .raft.persist_gate import Outbox
from .raft.replication import Replication
from .raft.snapshot_installs import InstallJob
from .raft.truncations import TruncationJob
from .snapshots.coordination import SnapshotCoordination
from .wall_clock import WallClock

log = logging.getLogger(__name__)


def cluster_id_for(voters: dict) -> str:
    """Every node of a cluster derives the same id from its voter ids (KRAFTD_CLUSTER_ID
    is not needed to form a cluster; nodes of different clusters should not share voter ids)."""
    digest = uuid.uuid5(uuid.NAMESPACE_URL, "kraftd:" + ",".join(str(v) for v in sorted(voters)))
    return base64.urlsafe_b64encode(digest.bytes).decode().rstrip("=")


class Node:
    def __init__(self, config: NodeConfig, storage: NodeStorage, runtime: NodeRuntime,
                 startup: NodeStartup | None = None) -> None:
        self.config = config
        startup = startup or NodeStartup()
        self._startup = startup
        self._election_store = storage.election_store
        self._purgatory = purgatory = Purgatory()
        self._changes = changes = NodeChanges(purgatory)
        rng = runtime.rng
        self.wall = wall = WallClock(runtime.wall_clock)
        self.refusals = Refusals()  # what the caps refused (kraftd_refused_total{what}); limits.py
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms,
            runtime.new_session_id or (lambda: rng.randrange(1, 0x7FFFFFFF)),
            max_partitions=config.max_incremental_fetch_session_partitions, refusals=self.refusals)
        self.snapshots = SnapshotCoordination(config, storage.open_snapshot_store, clustered=config.clustered,
                                              check_quorum_ms=runtime.raft_config.check_quorum_ms,
                                              clock=runtime.clock)
        self.group_hooks = hooks = GroupHooks(config.node_id, changes, self.snapshots, wall)
        cluster_id = runtime.cluster_id or (cluster_id_for(config.voters) if config.clustered
                                            else storage.catalog.cluster_id())
        self.replication = Replication(
            config.node_id, config=runtime.raft_config, rng=rng, hooks=hooks, cluster_id=cluster_id,
            fsync_never=config.fsync_policy == "never", bugs=runtime.bugs,
            directory_id=directory_id_of(storage, config.node_id))
        self._hosting = hosting = Hosting(config, storage, startup, replication=self.replication,
                                          snapshots=self.snapshots, changes=changes,
                                          journal=self.fetch_sessions.journal)
        self.topics = hosting.topics
        self.plane: MetadataPlane | None = None
        if config.clustered:
            self.plane = MetadataPlane(config, replication=self.replication, purgatory=purgatory,
                                       notify=changes.wake, on_append=self._controller_appended, now_ms=0,
                                       startup=startup)
            hosting.plane = self.plane
            hooks.on_state_caught_up = self._state_caught_up
            hooks.on_installed = self._snapshot_installed
        self._ctx = HandlerContext(
            config=config, cluster_id=cluster_id, topics=self.topics, purgatory=purgatory,
            allocate_producer_id=ProducerIdAllocator(storage.producer_id_store).allocate,
            create_topic=hosting.create_topic, fetch_sessions=self.fetch_sessions, replication=self.replication,
            plane=self.plane, delete_topic=hosting.delete_topic, clock=runtime.clock, refusals=self.refusals,
            wall=wall)
        if self.plane is not None:
            self.plane.ctx = self._ctx
            if config.authorizer == "acl":
                plane = self.plane
                self._ctx.authorizer = AclAuthorizer(lambda: plane.image, config.super_user_set,
                                                     config.allow_everyone_if_no_acl_found)
            self._balancer = LeaderBalancer(config.node_id, self.replication, self.plane)
        self._next_balance_ms = 0
        self._housekeeping = Housekeeping(config, self.topics, self.snapshots, wall)
        self._compaction = LogCompaction(config, self.topics, wall, bugs=runtime.bugs)
        self.stats = NodeStats(self._ctx, hooks, self._housekeeping, self.snapshots, purgatory, self._compaction)
        self.stats.now_ms = lambda: changes.now_ms

    @property
    def leader_epoch(self) -> int:
        """The highest epoch of any group here (on a single node every group shares it)."""
        return max((g.epoch for g in self.replication.groups.values()), default=self._hosting.legacy_epoch())

    @property
    def cluster_id(self) -> str:
        return self._ctx.cluster_id

    def start(self, now_ms: int) -> None:
        """Recover topics and start their groups. A group of one voter elects itself at once."""
        self._changes.now_ms = now_ms
        self._hosting.start(now_ms)
        self.replication.poll(now_ms)
        log.info("started with %d topics, %d groups", len(self.topics), len(self.replication.groups))

    def settle_startup(self, now_ms: int) -> None:
        """Before serving (single node, blocking): persist the elections, make the epochs'
        LeaderChange batches durable, so a restarted node's HW includes its new epoch's start."""
        out = self.take_outbox(now_ms)
        if out.persist:
            self.persist_election_states(out.persist)
        for key, partition_log in self.logs_to_flush():
            self.on_flushed(key, partition_log.flush(), now_ms)

    def create_replicated_topic(self, name: str, topic_id, assignments: list, configs: dict, now_ms: int):
        return self._hosting.create_replicated_topic(name, topic_id, assignments, configs, now_ms)

    def delete_topic(self, name: str) -> None:
        self._hosting.delete_topic(name)

    def _controller_appended(self, partition) -> None:
        self._ctx.appended[partition.key] = partition
        self._after_handling(self._changes.now_ms)

    def _state_caught_up(self, snapshots) -> None:
        if snapshots.partition is self.plane.partition:
            self._hosting.reconcile(self._changes.now_ms)

    def _snapshot_installed(self, partition, now_ms: int) -> None:
        if partition is self.plane.partition:
            self._hosting.reconcile(now_ms)

    # -- driving the core ------------------------------------------------------------------------
    def handle(self, header, request, now_ms: int, peer: Peer) -> Outcome:
        self._changes.now_ms = now_ms
        key = header.request_api_key
        if is_refused(key, header.request_api_version, request, peer):
            return Respond(refusal(key, header.request_api_version, request))  # changes nothing
        outcome = HANDLERS[key](self._ctx, header, request, now_ms, peer)
        self._after_handling(now_ms)
        return outcome

    def cancel_parked(self, tokens, now_ms: int) -> int:
        """The client connection these parked requests (Park tokens) came on has closed: drop
        the parked produces, fetches and forwarded requests among them. Returns how many."""
        self._changes.now_ms = now_ms
        return self._purgatory.cancel(tokens)

    def on_response(self, source: int, correlation_id: int, response, now_ms: int) -> None:
        self._changes.now_ms = now_ms
        self.replication.on_response(source, correlation_id, response, now_ms)

    def on_unreachable(self, node_id: int, now_ms: int) -> None:
        self._changes.now_ms = now_ms
        self.replication.on_unreachable(node_id, now_ms)

    def take_outbox(self, now_ms: int) -> Outbox:
        """What to persist (first) and send; see Replication.take_outbox."""
        return self.replication.take_outbox(now_ms)

    def persist_election_states(self, states: dict) -> None:
        """Blocking write, then release what waited for it (tests, startup, shutdown)."""
        self.write_election_states(states)
        self.replication.on_persisted()

    def write_election_states(self, states: dict) -> None:
        """One write and one fsync for the whole batch, through the injected store (the shell
        calls this off the loop thread)."""
        self._election_store.write(states)

    def on_persisted(self) -> None:
        self.replication.on_persisted()

    def _after_handling(self, now_ms: int) -> None:
        if self.plane is not None and self._balancer.waiting:
            self._balancer.hand_over_caught_up(now_ms)
        ctx = self._ctx
        if ctx.appended:
            changes = self._changes
            changes.dirty.update(ctx.appended)
            for partition in ctx.appended.values():
                partition.record_change()  # follower fetch sessions read up to the log end
            keys = list(ctx.appended)
            ctx.appended.clear()
            # A follower's parked fetch wakes on the append, not only on HW movement.
            changes.wake(keys, now_ms)
            for key in keys:
                partition = self.topics.partition(*key)
                if partition is not None:
                    partition.raft.maybe_advance_hw(now_ms)  # fsync_policy=never: at once

    def jobs(self) -> list:
        """Work for the shell to run off the loop (`job.run()` on a worker thread), then hand
        back to `on_job_done`: snapshots to write, followers' truncations and installs, new
        topics' logs to open, compacted logs to clean."""
        return (self.snapshots.jobs() + self.replication.follower_jobs() + self._hosting.opening_jobs()
                + self._compaction.jobs())

    def on_job_done(self, job, now_ms: int, error: BaseException | None = None) -> None:
        self._changes.now_ms = now_ms
        if isinstance(job, OpenLogsJob):
            self._hosting.logs_opened(job, error, now_ms)
        elif isinstance(job, TruncationJob):
            self.replication.truncation_done(job, error)
        elif isinstance(job, InstallJob):
            self.replication.install_done(job, error, now_ms)
        elif isinstance(job, CleaningJob):
            self._compaction.on_done(job, now_ms, error)
        else:
            self.snapshots.on_done(job, now_ms, error)

    def on_snapshot_done(self, job, now_ms: int, error: BaseException | None = None) -> None:
        """A snapshot job the shell ran (`snapshots.jobs()`) finished."""
        self.on_job_done(job, now_ms, error)

    def poll(self, now_ms: int) -> list[Completion]:
        changes = self._changes
        changes.now_ms = now_ms
        self.replication.poll(now_ms)
        if self.plane is not None:
            self.plane.poll(now_ms, self._led_data_groups)
            self.plane.retry_forwards(now_ms)
            if now_ms >= self._next_balance_ms:
                self._next_balance_ms = now_ms + BALANCE_INTERVAL_MS
                self._balancer.balance(now_ms)
                if self._hosting.rejoining:
                    self._hosting.check_rejoin_complete()
            if self._hosting.moves.departing:
                self._hosting.moves.drop_departed(self.plane.image, now_ms, self.plane.machine.applied_offset)
        self._housekeeping.poll(now_ms)
        self._compaction.poll(now_ms)
        done = self._purgatory.expire(now_ms)
        if self._ctx.appended:  # a group-coordinator timer appended (e.g. offsets-expiry tombstones)
            self._after_handling(now_ms)
        return changes.take_completions() + done

    def _led_data_groups(self) -> list:
        """Data partitions led here (O(groups): the plane asks only when a report is due)."""
        metadata = self.plane.partition
        return [g for g in self.replication.groups.values() if g.is_leader and g.partition is not metadata]

    def drain(self, now_ms: int) -> list[Completion]:
        """Shutting down: answer every parked request now with what it would get at expiry."""
        self._changes.now_ms = now_ms
        return self._changes.take_completions() + self._purgatory.expire_all(now_ms)

    def resign_all(self, now_ms: int) -> int:
        """Graceful shutdown: hand over every leadership (EndQuorumEpoch) before exiting."""
        self._changes.now_ms = now_ms
        return self.replication.resign_all(now_ms)

    def scram_credential(self, user: str, mechanism: int):
        """A user's committed SCRAM credential (quorum/metadata/image.py), or None: what the
        shell's SASL exchange checks a client against. No metadata log, no users."""
        if self.plane is None:
            return None
        return self.plane.image.scram.get(user, {}).get(mechanism)

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        """Where a registered broker listens (peers outside --voters are reached there)."""
        broker = self.plane.image.brokers.get(node_id) if self.plane is not None else None
        return (broker.host, broker.port) if broker is not None and broker.port > 0 else None

    def still_leading(self) -> int:
        """Groups whose latest known leader is this node (a resigned leader until a successor
        is known)."""
        me = self.config.node_id
        return sum(1 for g in self.replication.groups.values() if g.leader_id == me and len(g.voters) > 1)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self._purgatory.next_deadline_ms(), self.replication.next_deadline_ms())
                     if d is not None]
        deadlines += self._housekeeping.deadlines() + self._compaction.deadlines()
        if self.plane is not None:
            deadlines.append(self.plane.next_deadline_ms())
        return min(deadlines)

    def logs_to_flush(self) -> list:
        if self.config.fsync_policy == "never":
            return []
        return [(p.key, p.log) for p in self._changes.needing_flush()]

    def on_flushed(self, key: PartitionKey, flushed_offset: int, now_ms: int) -> list[Completion]:
        self._changes.now_ms = now_ms
        partition = self.topics.partition(*key)
        if partition is not None:
            self.replication.on_flushed(partition, flushed_offset, now_ms)
        return self._changes.take_completions()

    def close(self) -> None:
        """Clean shutdown (blocking): pending election states, then every log, made durable."""
        now_ms = self._changes.now_ms
        out = self.take_outbox(now_ms)
        while out.persist:
            self.persist_election_states(out.persist)
            out = self.take_outbox(now_ms)
        for partition in self.topics.partitions():
            partition.log.flush()
            partition.log.close()
        if self._startup.on_close is not None:
            self._startup.on_close()
