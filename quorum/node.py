"""A node's sans-IO core: the partitions it hosts, their Raft groups, and the RPC handlers.

Driven by handle() / poll() / on_response() / on_unreachable() / on_flushed() with `now_ms`;
outputs are responses (Outcome, Completion) and an Outbox (state to persist first, then
requests to send). Storage, randomness and ids are injected, so the same core runs on files
under the asyncio server and on memory logs under the deterministic simulation (tests/sim).
"""
from __future__ import annotations

import base64
import contextlib
import logging
import random
import uuid
from collections import deque
import secrets
from pathlib import Path

from .fetch_sessions import FetchSessionCache
from .fetch_sessions.contexts import partition_key_int
from .limits import Refusals
from .handlers import HANDLERS
from .handlers.context import LATENCY_SAMPLES_KEPT, HandlerContext
from .node_claims import is_refused, refusal
from .node_config import NodeConfig, VoterSetMismatch
from .outcomes import Completion, Outcome, Respond
from .partition import Partition, PartitionKey
from .peer import Peer
from .producer_ids import ProducerIdAllocator
from .purgatory import Purgatory
from .raft.config import BugSwitches, RaftConfig
from .raft.election_state import ElectionState
from .raft.leader_change import leader_change_batch
from .raft.replication import Outbox, Replication
from .snapshots.partition_snapshots import PartitionSnapshots, SnapshotJob
from .topic_config import TopicConfig
from .metadata.names import METADATA_TOPIC, METADATA_TOPIC_ID
from .metadata.plane import MetadataPlane
from .metadata.state_machine import MetadataStateMachine
from .topics import Topic, TopicError, TopicRegistry

log = logging.getLogger(__name__)
BALANCE_INTERVAL_MS = 1000
LOG_START_GATE_INTERVAL_MS = 1000
HANDOVER_BACKOFF_MS = 3_000


def cluster_id_for(voters: dict) -> str:
    """Every node of a cluster derives the same id from its voter ids (KRAFTD_CLUSTER_ID
    is not needed to form a cluster; nodes of different clusters should not share voter ids)."""
    digest = uuid.uuid5(uuid.NAMESPACE_URL, "kraftd:" + ",".join(str(v) for v in sorted(voters)))
    return base64.urlsafe_b64encode(digest.bytes).decode().rstrip("=")


class Node:
    def __init__(self, config: NodeConfig, *, catalog, election_store, producer_id_store, open_log,
                 open_snapshot_store=None, new_session_id=None, clock=None, rng: random.Random | None = None,
                 raft_config: RaftConfig | None = None, bugs: BugSwitches | None = None,
                 cluster_id: str | None = None, rejoining: bool = False, on_rejoin_complete=None,
                 forced=None, on_forced_done=None) -> None:
        self.config = config
        self._catalog = catalog
        self._election_store = election_store
        self._purgatory = Purgatory()
        self._dirty: dict[PartitionKey, Partition] = {}
        self._completions: list[Completion] = []
        self._next_retention_ms = 0
        self._next_gate_ms = 0
        self._next_producer_expiry_ms = 0
        self._floor_memo: int | None = None
        self.producer_ids_expired = 0  # kraftd_producer_ids_expired_total
        self._now_ms = 0  # the time of the call being handled (topics created mid-request need it)
        self._open_snapshot_store = open_snapshot_store
        self._clock = clock  # a monotonic seconds clock, only to report how long loading took
        # A node restarted on an empty data dir may have voted before and forgotten it: its groups
        # with a history may not vote or stand until each has caught up with a leader once (the
        # disk-loss rule; `_may_vote_when_fresh`).
        self._rejoining = rejoining
        self._on_rejoin_complete = on_rejoin_complete  # the file-backed node removes its marker
        self._data_dir_lock = None  # the file-backed node's DataDirLock, released by close()
        self._started = False
        self.snapshots: dict[PartitionKey, PartitionSnapshots] = {}
        self._snapshot_jobs_due: set[PartitionKey] = set()
        self.topics = TopicRegistry(config, catalog, open_log, self._make_partition)
        producer_ids = ProducerIdAllocator(producer_id_store)
        # Session ids come from a CSPRNG (KIP-227: unguessable); simulations inject a seeded source.
        # What the caps refused (kraftd_refused_total{what}); quorum/limits.py.
        self.refusals = Refusals()
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms,
            new_session_id or _random_session_id, max_partitions=config.max_incremental_fetch_session_partitions,
            refusals=self.refusals)
        cluster_id = cluster_id or (cluster_id_for(config.voters) if config.clustered else catalog.cluster_id())
        self.replication = Replication(
            config.node_id, config=raft_config or RaftConfig(), rng=rng or random.Random(secrets.randbits(64)),
            hooks=self, cluster_id=cluster_id, fsync_never=config.fsync_policy == "never", bugs=bugs)
        self._stored_states = election_store.load()
        self.plane: MetadataPlane | None = None
        if config.clustered:
            self.plane = MetadataPlane(config, replication=self.replication, purgatory=self._purgatory,
                                       notify=self._notify, on_append=self._controller_appended, now_ms=0,
                                       forced_lost=forced.lost if forced is not None else (),
                                       on_forced_done=on_forced_done)
        self._ctx = HandlerContext(
            config=config, cluster_id=cluster_id, topics=self.topics, purgatory=self._purgatory,
            allocate_producer_id=producer_ids.allocate, create_topic=self._create_topic,
            fetch_sessions=self.fetch_sessions, replication=self.replication, plane=self.plane,
            delete_topic=self.delete_topic, clock=clock, refusals=self.refusals,
        )
        if self.plane is not None:
            self.plane.ctx = self._ctx
        self._next_balance_ms = 0
        self._handover_after: dict = {}
        self._handovers: dict = {}  # group key -> preferred replica, waiting for it to be at the log end
        # ms from losing a leader to leading (groups here), until /metrics drains them
        self.election_latencies: deque = deque(maxlen=LATENCY_SAMPLES_KEPT)

    @classmethod
    def open(cls, config: NodeConfig, now_ms: int, clock=None) -> "Node":
        """File-backed node: recover every log, then elect (a single voter leads at a new epoch). Blocking."""
        from ..storage import FileLog, TopicCatalog
        from ..storage.rejoin_marker import clear_rejoin_marker
        from ..storage.snapshots import SnapshotStore

        from .raft.election_state import FileElectionStore

        from ..storage.forced_recovery import clear_forced_recovery

        from .data_dir_startup import prepare_data_dir

        data_dir = Path(config.data_dir)
        startup = prepare_data_dir(config, now_ms)

        def open_log(topic: str, index: int, topic_config: TopicConfig):
            return FileLog(data_dir / f"{topic}-{index}", segment_bytes=topic_config.segment_bytes,
                           index_interval_bytes=config.index_interval_bytes)

        from ..storage import QuorumStateStore
        node = cls(config, catalog=TopicCatalog(data_dir), election_store=FileElectionStore(data_dir / "quorum-state"),
                   producer_id_store=QuorumStateStore(data_dir / "producer-id-block"), open_log=open_log,
                   open_snapshot_store=lambda topic, index: SnapshotStore(data_dir / f"{topic}-{index}"),
                   clock=clock, rejoining=startup.rejoining, on_rejoin_complete=lambda: clear_rejoin_marker(data_dir),
                   forced=startup.forced, on_forced_done=lambda: clear_forced_recovery(data_dir))
        node._data_dir_lock = startup.lock
        try:
            node.start(now_ms)
            node.settle_startup(now_ms)
        except BaseException:
            startup.lock.release()
            raise
        return node

    @property
    def leader_epoch(self) -> int:
        """The highest epoch of any group here (on a single node every group shares it)."""
        return max((g.epoch for g in self.replication.groups.values()), default=self._legacy_epoch())

    @property
    def cluster_id(self) -> str:
        return self._ctx.cluster_id

    def _legacy_epoch(self) -> int:
        return getattr(self._election_store, "legacy_epoch", 0)

    def start(self, now_ms: int) -> None:
        """Recover topics and start their groups. A group of one voter elects itself at once."""
        self._now_ms = now_ms
        self.topics.load()
        if self.plane is not None:
            self._open_metadata_partition()
        self._started = True
        self.replication.poll(now_ms)
        log.info("started with %d topics, %d groups", len(self.topics), len(self.replication.groups))

    def _open_metadata_partition(self) -> None:
        """`__cluster_metadata-0`: a snapshot-policy group over the voters, on every voter."""
        voters = sorted(self.config.voters)
        topic = self.topics.get(METADATA_TOPIC)
        if topic is None:
            topic = self.topics.create(METADATA_TOPIC, 1, {"cleanup.policy": "snapshot"}, topic_id=METADATA_TOPIC_ID,
                                       assignments=[voters])
        partition = topic.partitions[0]
        if partition is None or tuple(partition.raft.voters) != tuple(voters):
            raise VoterSetMismatch(f"{METADATA_TOPIC} here has voters {partition and partition.raft.voters}, "
                               f"--voters says {voters}; changing the voter set is not supported")
        self.plane.partition = partition
        self._reconcile(self._now_ms)

    def settle_startup(self, now_ms: int) -> None:
        """Before serving (single node, blocking): persist the elections, make the epochs'
        LeaderChange batches durable, so a restarted node's HW includes its new epoch's start."""
        out = self.take_outbox(now_ms)
        if out.persist:
            self.persist_election_states(out.persist)
        for key, partition_log in self.logs_to_flush():
            self.on_flushed(key, partition_log.flush(), now_ms)

    def _make_partition(self, topic, index, topic_id, partition_log, config, topic_num: int,
                        voters=None) -> Partition:
        partition = Partition(topic=topic, index=index, topic_id=topic_id, log=partition_log, config=config,
                              high_watermark=partition_log.log_start_offset,
                              journal=self.fetch_sessions.journal, session_key=partition_key_int(topic_num, index))
        if config.is_snapshot_policy:
            self._attach_snapshots(partition)
        voters = tuple(voters) if voters else (self.config.node_id,)
        partition.replicas = voters
        stored = self._stored_states.get(partition.key)
        fresh = stored is None
        if fresh:
            # A single node's groups share one epoch (raised at each start, as before replication):
            # a group created while serving elects itself at the node's current epoch.
            epoch = 0
            if len(voters) == 1:
                floor = self.leader_epoch_floor()
                epoch = max(floor - 1, 0) if self._started else floor
            stored = ElectionState(epoch, may_vote=self._may_vote_when_fresh(topic, index))
        self.replication.add_group(partition, voters, stored, self._now_ms, persist_now=fresh)
        partition.raft = self.replication.groups[partition.key]
        if fresh and self.plane is not None and voters[0] == self.config.node_id and topic != METADATA_TOPIC:
            partition.raft.stand_now(self._now_ms)  # the preferred leader of a new partition
        return partition

    def _may_vote_when_fresh(self, topic: str, index: int) -> bool:
        """The disk-loss rule (README): on a data dir that replaced a lost one, every group starts
        without a vote (whether this node voted in it before cannot be known) until it has
        caught up with a leader, or until the rejoin is complete (`_check_rejoin_complete`)."""
        return not self._rejoining

    def _check_rejoin_complete(self) -> None:
        """A rejoin is complete once the metadata group votes again, the image is applied up to
        its HW, and every partition the image assigns here is hosted and votes again. A group
        created after that is for a partition created after the disk was lost: no vote of this
        node's to forget, so it votes at once (and the marker file goes)."""
        metadata = self.replication.groups.get((METADATA_TOPIC, 0))
        if metadata is None or not metadata.state.may_vote:
            return
        partition = metadata.partition
        if partition.snapshots.machine.applied_offset < partition.high_watermark:
            return
        groups = self.replication.groups
        for info in self.plane.image.topics.values():
            for p in info.partitions.values():
                if self.config.node_id in p.replicas:
                    group = groups.get((info.name, p.index))
                    if group is None or not group.state.may_vote:
                        return
        self._rejoining = False
        if self._on_rejoin_complete is not None:
            self._on_rejoin_complete()
        log.info("rejoin after a disk loss complete: every group hosted here has caught up")

    @contextlib.contextmanager
    def _epoch_floor_fixed(self):
        """While one topic's partitions are made: the floor is computed once, not once per
        partition (it walks every group: 10,000 partitions took O(groups) each)."""
        self._floor_memo = self.leader_epoch_floor()
        try:
            yield
        finally:
            self._floor_memo = None

    def leader_epoch_floor(self) -> int:
        if self._floor_memo is not None:
            return self._floor_memo  # (the new groups start at or below it: it cannot move meanwhile)
        epochs = [g.epoch for g in self.replication.groups.values() if len(g.voters) == 1]
        return max(epochs, default=self._legacy_epoch())

    def _attach_snapshots(self, partition: Partition) -> None:
        """Startup invariants and the state from the latest snapshot; the log tail is applied as
        the HW covers it (only committed records reach the state)."""
        machine = MetadataStateMachine() if partition.topic == METADATA_TOPIC and self.plane is not None else None
        snapshots = PartitionSnapshots(partition, self._open_snapshot_store(partition.topic, partition.index),
                                       machine)
        started = self._clock() if self._clock else None
        for name in snapshots.recover():
            log.info("removed leftover snapshot file %s", name)
        snapshots.load()
        if started is not None:
            snapshots.load_ms = (self._clock() - started) * 1000.0
        partition.snapshots = snapshots
        self.snapshots[partition.key] = snapshots
        if hasattr(partition.log, "cache_replicated"):
            partition.log.cache_replicated = True  # the state machine reads committed records back

    def _create_topic(self, name: str, partitions: int, configs: dict) -> Topic:
        if self.plane is not None:
            # Auto-creation in a cluster goes through the controller; the client retries.
            if self.plane.image.topic(name) is not None:
                raise TopicError("NOT_LEADER_OR_FOLLOWER", f"No replica of '{name}' here.")
            self.plane.auto_create(name, partitions, self._now_ms, configs)
            raise TopicError("LEADER_NOT_AVAILABLE", f"Topic '{name}' is being created.")
        with self._epoch_floor_fixed():
            topic = self.topics.create(name, partitions, configs)
        self.replication.poll(self._now_ms)  # a group of one voter leads at once
        return topic

    def create_replicated_topic(self, name: str, topic_id, assignments: list, configs: dict, now_ms: int) -> Topic:
        """Host this node's replicas of a topic whose placement was decided elsewhere (the
        simulation; later the metadata quorum). `assignments[i]` lists partition i's voters."""
        self._now_ms = now_ms
        with self._epoch_floor_fixed():
            topic = self.topics.create(name, len(assignments), configs, topic_id=topic_id, assignments=assignments)
        self.replication.poll(now_ms)
        return topic

    def delete_topic(self, name: str) -> None:
        """Drop a topic here: its groups, parked requests see it gone, its files are removed."""
        topic = self.topics.delete(name)
        if topic is None:
            return
        for partition in topic.partitions:
            if partition is None:
                continue
            self.replication.remove_group(partition.key)
            self._dirty.pop(partition.key, None)
            self.snapshots.pop(partition.key, None)
            self._snapshot_jobs_due.discard(partition.key)
            partition.log.close()
            remove = getattr(partition.log, "remove_files", None)
            if remove is not None:
                remove()
        log.info("deleted topic %s (%s)", name, topic.topic_id)

    # -- the metadata image decides what this node hosts ---------------------------------------
    def _reconcile(self, now_ms: int) -> None:
        """After the image changed: host the new partitions that list us, drop deleted topics."""
        machine = self.plane.machine
        image = machine.image
        if machine.applied_offset < self._catalog.metadata_offset:
            # Restarted: what we host already reflects the image at a later offset than we have
            # replayed (a snapshot plus part of the log). Acting now would bring back topics
            # deleted since, as empty replicas; wait (the changes keep accumulating).
            return
        if machine.reloaded:
            topic_ids = set(image.topics) | image.removed
        else:
            topic_ids = {uuid.UUID(hex=key.split(b"/")[1].decode()) for key in machine.touched
                         if key[:2] in (b"t/", b"p/")}
        machine.touched, machine.reloaded = set(), False
        me = self.config.node_id
        changed = False
        for topic_id in sorted(topic_ids):
            info = image.topics.get(topic_id)
            local = self.topics.get_by_id(topic_id)
            if info is None:
                if local is not None and topic_id in image.removed:
                    self.delete_topic(local.name)
                    changed = True
                continue
            if local is not None or not any(me in p.replicas for p in info.partitions.values()):
                continue
            stale = self.topics.get(info.name)
            if stale is not None and stale.name != METADATA_TOPIC:
                self.delete_topic(stale.name)  # an older topic of that name, deleted while we were away
            assignments = [info.partitions[i].replicas for i in range(len(info.partitions))]
            self.create_replicated_topic(info.name, topic_id, assignments, image.configs.get(info.name, {}), now_ms)
            changed = True
        if changed:  # (a file write: only when what we host changed)
            self._catalog.set_metadata_offset(machine.applied_offset)

    def _controller_appended(self, partition) -> None:
        self._ctx.appended[partition.key] = partition
        self._after_handling(self._now_ms)

    def _notify(self, keys) -> None:
        self._completions += self._purgatory.notify(keys, self._now_ms)

    # -- hooks the Raft groups call ------------------------------------------------------------
    def append_leader_change(self, group, now_ms: int, granting=()) -> None:
        partition = group.partition
        batch = leader_change_batch(self.config.node_id, group.epoch, group.voters, granting or (self.config.node_id,),
                                    now_ms)
        partition.log.append_as_leader(batch, group.epoch, now_ms=now_ms)
        self._dirty[partition.key] = partition
        partition.record_change()  # follower fetch sessions read up to the log end
        self._completions += self._purgatory.notify([partition.key], now_ms)

    def partition_changed(self, partition: Partition, *, hw: bool) -> None:
        partition.record_change()
        if hw:
            self._hw_moved([partition.key], self._now_ms)
        else:
            self._completions += self._purgatory.notify([partition.key], self._now_ms)

    def follower_appended(self, partition: Partition) -> None:
        self._dirty[partition.key] = partition

    def follower_truncated(self, partition: Partition) -> None:
        self._dirty[partition.key] = partition
        partition.record_change()

    def follower_log_start(self, partition: Partition, leader_log_start: int) -> None:
        """Followers advance to min(leader's log start, own HW) (KIP-630); a snapshot-policy
        follower only to one of its own snapshots, so its earliest snapshot sits at its log
        start and its state can always be rebuilt."""
        partition.leader_log_start = leader_log_start
        target = min(leader_log_start, partition.high_watermark)
        snapshots = partition.snapshots
        at = None
        if snapshots is not None:
            own = [sid for sid in snapshots.store.ids() if sid.end_offset <= target]
            if not own:
                return
            at = own[-1]
            target = at.end_offset
        if target > partition.log.log_start_offset:
            partition.log.advance_log_start(target)
            partition.after_log_start_moved()
            if at is not None:
                snapshots.store.delete_older_than(at)

    def begin_snapshot_download(self, partition: Partition, snapshot_id):
        return partition.snapshots.store.begin_download(snapshot_id)

    def install_snapshot(self, partition: Partition, snapshot_id, now_ms: int) -> None:
        """A downloaded snapshot is in place: the log restarts at its end, the state is loaded."""
        snapshots = partition.snapshots
        partition.log.truncate_fully_and_start_at(snapshot_id.end_offset)
        partition.log.epoch_cache.assign(snapshot_id.epoch, snapshot_id.end_offset)
        snapshots.load()
        if snapshot_id.end_offset > partition.high_watermark:
            partition.set_high_watermark(snapshot_id.end_offset)
        partition.after_log_start_moved()
        snapshots.store.delete_older_than(snapshot_id)
        self._dirty[partition.key] = partition
        if self.plane is not None and partition is self.plane.partition:
            self._reconcile(now_ms)

    # -- driving the core ------------------------------------------------------------------

    def handle(self, header, request, now_ms: int, peer: Peer) -> Outcome:
        self._now_ms = now_ms
        key = header.request_api_key
        if is_refused(key, header.request_api_version, request, peer):
            return Respond(refusal(key, header.request_api_version, request))  # changes nothing
        outcome = HANDLERS[key](self._ctx, header, request, now_ms, peer)
        self._after_handling(now_ms)
        return outcome

    def cancel_parked(self, tokens, now_ms: int) -> int:
        """The client connection these parked requests (Park tokens) came on has closed: drop
        the parked produces, fetches and forwarded requests among them. Returns how many."""
        self._now_ms = now_ms
        return self._purgatory.cancel(tokens)

    def metrics_values(self) -> dict:
        """Exposed as kraftd_<key> by the shell's /metrics (a counter when it ends in _total)."""
        return {"producer_ids_expired_total": self.producer_ids_expired,
                "producer_states": self.producer_state_count(),
                "parked_requests": len(self._purgatory)}

    def on_response(self, source: int, correlation_id: int, response, now_ms: int) -> None:
        self._now_ms = now_ms
        self.replication.on_response(source, correlation_id, response, now_ms)

    def on_unreachable(self, node_id: int, now_ms: int) -> None:
        self._now_ms = now_ms
        self.replication.on_unreachable(node_id, now_ms)

    def take_outbox(self, now_ms: int) -> Outbox:
        """What to persist (first) and send; see Replication.take_outbox."""
        return self.replication.take_outbox(now_ms)

    def persist_election_states(self, states: dict) -> None:
        """Blocking write, then release what waited for it (tests, startup, shutdown)."""
        self.write_election_states(states)
        self.replication.on_persisted()

    def write_election_states(self, states: dict) -> None:
        """Blocking: one write and one fsync for the whole batch; safe off the loop thread."""
        self._election_store.write(states)

    def on_persisted(self) -> None:
        self.replication.on_persisted()

    def _after_handling(self, now_ms: int) -> None:
        if self._handovers:
            self._hand_over_caught_up(now_ms)
        ctx = self._ctx
        if ctx.appended:
            self._dirty.update(ctx.appended)
            for partition in ctx.appended.values():
                partition.record_change()  # follower fetch sessions read up to the log end
            keys = list(ctx.appended)
            ctx.appended.clear()
            # A follower's parked fetch wakes on the append, not only on HW movement.
            self._completions += self._purgatory.notify(keys, now_ms)
            for key in keys:
                partition = self.topics.partition(*key)
                if partition is not None:
                    partition.raft.maybe_advance_hw(now_ms)  # fsync_policy=never: at once

    def _hw_moved(self, keys, now_ms: int) -> None:
        self._completions += self._purgatory.notify(keys, now_ms)
        for key in keys:
            snapshots = self.snapshots.get(key)
            if snapshots is not None:
                snapshots.catch_up()
                if self.plane is not None and snapshots.partition is self.plane.partition:
                    self._reconcile(now_ms)
                if snapshots.due():
                    self._snapshot_jobs_due.add(key)

    # -- snapshots (KIP-630): the shell runs job.run() in a worker thread ------------------

    def snapshot_jobs(self) -> list[SnapshotJob]:
        if not self._snapshot_jobs_due:  # the shell asks after every batch of requests
            return []
        jobs = []
        for key in sorted(self._snapshot_jobs_due):
            snapshots = self.snapshots.get(key)
            if snapshots is not None and snapshots.due():
                jobs.append(snapshots.start_job())
        self._snapshot_jobs_due.clear()
        return jobs

    def on_snapshot_done(self, job: SnapshotJob, now_ms: int, error: BaseException | None = None) -> None:
        self._now_ms = now_ms
        snapshots = self.snapshots.get(job.key)
        if snapshots is None:
            return
        snapshots.finish(job, error, now_ms)
        if error is not None:
            log.error("snapshot %s of %s-%s failed: %s", job.snapshot_id, *job.key, error)
        else:
            self._advance_log_start(snapshots, now_ms)
            if snapshots.due():
                self._snapshot_jobs_due.add(job.key)

    def _advance_log_start(self, snapshots: PartitionSnapshots, now_ms: int) -> None:
        """KIP-630: a leader moves the log start to its latest snapshot once every live replica
        has fetched past it, or once snapshot_start_offset_lag_time_max_ms has passed; a
        follower takes min(leader's log start, its own latest snapshot) as it fetches."""
        group = snapshots.partition.raft
        if not group.is_leader:
            # An idle partition's incremental fetches stop naming it once the leader's log
            # start has been sent: a snapshot of our own taken after that is our cue.
            partition = snapshots.partition
            if partition.leader_log_start > partition.log.log_start_offset:
                self.follower_log_start(partition, partition.leader_log_start)
            return
        latest = snapshots.latest
        if latest is None:
            return
        lagging = group.role.progress.min_live_offset(now_ms, self.replication.config.check_quorum_ms,
                                                      group.session_fetch_ms)
        waited = now_ms - snapshots.latest_taken_ms >= self.config.snapshot_start_offset_lag_time_max_ms
        if lagging is None or lagging >= latest.end_offset or waited:
            snapshots.advance_log_start()

    def request_snapshot(self, topic: str, index: int) -> bool:
        """`kraftd snapshot create`: snapshot now if anything is newer than the latest one."""
        snapshots = self.snapshots.get((topic, index))
        if snapshots is None:
            return False
        snapshots.requested = True
        self._snapshot_jobs_due.add((topic, index))
        return True

    def snapshot_stats(self) -> list[dict]:
        out = []
        for (topic, index), snapshots in self.snapshots.items():
            latest = snapshots.latest
            out.append({"topic": topic, "partition": index, "lag": snapshots.lag(),
                        "size_bytes": snapshots.store.size(latest) if latest else 0,
                        "latest": latest, "load_ms": snapshots.load_ms})
        return out

    def poll(self, now_ms: int) -> list[Completion]:
        self._now_ms = now_ms
        self.replication.poll(now_ms)
        if self.plane is not None:
            self.plane.poll(now_ms, self._led_data_groups)
            self.plane.retry_forwards(now_ms)
            if now_ms >= self._next_balance_ms:
                self._next_balance_ms = now_ms + BALANCE_INTERVAL_MS
                self._balance_leaders(now_ms)
                if self._rejoining:
                    self._check_rejoin_complete()
        if now_ms >= self._next_retention_ms:
            self._apply_retention(now_ms)
            self._next_retention_ms = now_ms + self.config.retention_check_interval_ms
            self._next_gate_ms = now_ms
        if now_ms >= self._next_producer_expiry_ms:
            self._expire_producers(now_ms)
            self._next_producer_expiry_ms = now_ms + self.config.producer_id_expiration_check_interval_ms
        if now_ms >= self._next_gate_ms:
            # Cheap (snapshot partitions only): a replica that went away stops holding back
            # the log start once it is no longer live, not at the next retention check.
            self._gate_log_starts(now_ms)
            self._next_gate_ms = now_ms + LOG_START_GATE_INTERVAL_MS
        done = self._purgatory.expire(now_ms)
        if self._ctx.appended:  # a group-coordinator timer appended (e.g. offsets-expiry tombstones)
            self._after_handling(now_ms)
        done = self._completions + done
        self._completions = []
        return done

    def _led_data_groups(self) -> list:
        """Data partitions led here (O(groups): the plane asks only when a report is due)."""
        metadata = self.plane.partition
        return [g for g in self.replication.groups.values() if g.is_leader and g.partition is not metadata]

    def _balance_leaders(self, now_ms: int) -> None:
        """Preferred leaders (as Kafka's automatic preferred-leader election): a leader that is not
        its partition's first replica hands over once that replica is live and caught up."""
        image = self.plane.image
        me = self.config.node_id
        self._handovers.clear()
        for group in list(self.replication.groups.values()):
            partition = group.partition
            if not group.is_leader or not partition.replicas or partition is self.plane.partition:
                continue
            preferred = partition.replicas[0]
            if preferred == me or not image.is_live(preferred) or now_ms < self._handover_after.get(group.key, 0):
                continue
            progress = group.role.progress.by_voter.get(preferred)
            if (progress is None or now_ms - progress.last_fetch_ms > BALANCE_INTERVAL_MS
                    or partition.high_watermark <= group.role.epoch_start_offset):
                continue
            self._handovers[group.key] = preferred
        self._hand_over_caught_up(now_ms)

    def _hand_over_caught_up(self, now_ms: int) -> None:
        """Resign where the preferred replica has fetched up to the log end, so that it wins the
        election its turn starts. Checked after every request, not only at the balance interval:
        under steady writes the replica is at the log end only between its fetch and the next
        append, which a check once a second hardly ever saw (a hand-over took 19 s on real
        processes, and some never happened)."""
        for key, preferred in list(self._handovers.items()):
            group = self.replication.groups.get(key)
            if group is None or not group.is_leader:
                del self._handovers[key]
                continue
            progress = group.role.progress.by_voter.get(preferred)
            if progress is None or progress.end_offset < group.partition.log.log_end_offset:
                continue
            del self._handovers[key]
            self._handover_after[key] = now_ms + HANDOVER_BACKOFF_MS
            log.info("%s-%d: handing leadership to preferred replica %d", *key, preferred)
            group.resign(now_ms, [preferred] + [v for v in group.role.progress.successors() if v != preferred])

    def cluster_stats(self) -> dict:
        """Gauges for /metrics: the metadata quorum and this node's leaderships."""
        plane = self.plane
        stats = {"metadata_leader_id": plane.leader_id if plane else -1,
                 "metadata_epoch": plane.epoch if plane else -1,
                 "leader_partitions": 0, "under_replicated_partitions": 0, "offline_partitions": 0,
                 "partitions": []}
        now = self._now_ms
        for group in self.replication.groups.values():
            partition = group.partition
            stats["partitions"].append({"topic": partition.topic, "partition": partition.index,
                                        "leader_epoch": group.epoch, "is_leader": group.is_leader})
            if not group.is_leader or (plane is not None and partition is plane.partition):
                continue
            stats["leader_partitions"] += 1
            if plane is not None and len(plane.isr_of(group, now)) < len(group.voters):
                stats["under_replicated_partitions"] += 1
        controller = plane.active_controller() if plane else None
        if controller is not None:
            stats["offline_partitions"] = controller.offline_partitions()
        return stats

    def drain_raft_latencies(self) -> tuple[list[float], list[float]]:
        """(election, commit) latency samples in ms since the last call (the /metrics scrape)."""
        elections, commits = list(self.election_latencies), list(self._ctx.commit_latencies)
        self.election_latencies.clear()
        self._ctx.commit_latencies.clear()
        return elections, commits

    def _gate_log_starts(self, now_ms: int) -> None:
        for snapshots in self.snapshots.values():
            latest = snapshots.latest
            if latest is not None and latest.end_offset > snapshots.partition.log.log_start_offset:
                self._advance_log_start(snapshots, now_ms)

    def drain(self, now_ms: int) -> list[Completion]:
        """Shutting down: answer every parked request now with what it would get at expiry."""
        self._now_ms = now_ms
        done = self._completions + self._purgatory.expire_all(now_ms)
        self._completions = []
        return done

    def resign_all(self, now_ms: int) -> int:
        """Graceful shutdown: hand over every leadership (EndQuorumEpoch) before exiting."""
        self._now_ms = now_ms
        return self.replication.resign_all(now_ms)

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
        deadlines = [d for d in (self._purgatory.next_deadline_ms(), self.replication.next_deadline_ms(),
                                 self._next_retention_ms, self._next_gate_ms if self.snapshots else None,
                                 self._next_producer_expiry_ms)
                     if d is not None]
        if self.plane is not None:
            deadlines.append(self.plane.next_deadline_ms())
        return min(deadlines)

    def logs_to_flush(self) -> list:
        if self.config.fsync_policy == "never":
            return []
        for key in [k for k, p in self._dirty.items() if not p.needs_flush()]:
            del self._dirty[key]
        return [(p.key, p.log) for p in self._dirty.values()]

    def on_flushed(self, key: PartitionKey, flushed_offset: int, now_ms: int) -> list[Completion]:
        self._now_ms = now_ms
        partition = self.topics.partition(*key)
        if partition is not None:
            self.replication.on_flushed(partition, flushed_offset, now_ms)
        done, self._completions = self._completions, []
        return done

    def _expire_producers(self, now_ms: int) -> None:
        """producer_id_expiration_ms: idempotent producers idle that long are forgotten (a
        later batch of theirs must start at sequence 0 again, or gets UNKNOWN_PRODUCER_ID)."""
        expiration = self.config.producer_id_expiration_ms
        expired = 0
        for partition in self.topics.partitions():
            expired += partition.log.producer_state.expire_idle(now_ms, expiration)
        if expired:
            self.producer_ids_expired += expired
            log.info("expired %d idle producer states", expired)

    def producer_state_count(self) -> int:
        return sum(len(p.log.producer_state) for p in self.topics.partitions())

    def _apply_retention(self, now_ms: int) -> None:
        for partition in self.topics.partitions():
            cfg = partition.config
            if cfg.cleanup_policy != "delete" or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
                continue
            if not partition.is_leader:
                continue  # followers take the leader's log start as they fetch
            partition.log.apply_retention(now_ms, cfg.retention_ms, cfg.retention_bytes,
                                          max_offset=partition.high_watermark)
            partition.after_log_start_moved()

    def group_stats(self) -> dict | None:
        """Consumer groups for /metrics (None until this node has served a group request)."""
        coordinator = self._ctx.groups
        if coordinator is None:
            return None
        return {**coordinator.stats(), "load_times_ms": coordinator.drain_load_times()}

    def fetch_session_stats(self) -> dict:
        cache = self.fetch_sessions
        return {"sessions": len(cache), "partitions_cached": cache.partitions_cached, "evictions": cache.evictions}

    def metrics_snapshot(self) -> list[dict]:
        return [
            {"topic": p.topic, "partition": p.index, "log_start_offset": p.log_start_offset,
             "log_end_offset": p.log_end_offset, "high_watermark": p.high_watermark}
            for p in self.topics.partitions()
        ]

    def close(self) -> None:
        """Clean shutdown (blocking): pending election states, then every log, made durable."""
        out = self.take_outbox(self._now_ms)
        while out.persist:
            self.persist_election_states(out.persist)
            out = self.take_outbox(self._now_ms)
        for partition in self.topics.partitions():
            partition.log.flush()
            partition.log.close()
        if self._data_dir_lock is not None:
            self._data_dir_lock.release()


def _random_session_id() -> int:
    return secrets.randbelow(0x7FFFFFFF) + 1
