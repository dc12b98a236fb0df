"""Which partitions this node hosts, and their Raft groups: made at startup from the catalog, on
CreateTopics (one node), or as the metadata image assigns them (a cluster); dropped on delete.
A reassignment (KIP-455) adds single partitions here, joining their groups as observers, and
drops those moved away once this node's removal from their voters has committed.

A node restarted on an empty data dir may have voted before and forgotten it: its groups with a
history may not vote or stand until each has caught up with a leader once (the disk-loss rule,
README), or until the whole rejoin is complete.
"""
from __future__ import annotations

import contextlib
import logging
import uuid

from .fetch_sessions.contexts import partition_key_int
from .metadata.names import METADATA_TOPIC, METADATA_TOPIC_ID
from .node_changes import NodeChanges
from .node_config import NodeConfig, VoterSetMismatch
from .node_wiring import NodeStartup, NodeStorage
from .partition import Partition
from .raft.election_state import ElectionState
from .raft.replication import Replication
from .snapshots.coordination import SnapshotCoordination
from .log_opening import LogOpening, OpenLogsJob, opened_key
from .metadata.image import topic_key
from .partition_moves import PartitionMoves, apply_config_change, starting_voters
from .topics import Topic, TopicCreating, TopicError, TopicRegistry

log = logging.getLogger(__name__)


class Hosting:
    def __init__(self, config: NodeConfig, storage: NodeStorage, startup: NodeStartup, *,
                 replication: Replication, snapshots: SnapshotCoordination, changes: NodeChanges,
                 journal) -> None:
        self.config = config
        self._catalog = storage.catalog
        self._election_store = storage.election_store
        self._startup = startup
        self.rejoining = startup.rejoining
        self._replication = replication
        self._snapshots = snapshots
        self._changes = changes
        self._journal = journal  # the fetch sessions' change journal
        self._stored_states = storage.election_store.load()
        self._floor_memo: int | None = None
        # Partitions the image placed on another directory of this node (KIP-858 Directories):
        # this data dir replaced a lost one, and their groups have a history to catch up with.
        self._placed_elsewhere: set = set()
        self.started = False
        self.plane = None  # the MetadataPlane in a cluster
        self.topics = TopicRegistry(config, storage.catalog, storage.open_log, self._make_partition)
        # Partitions a reassignment moves here or away (quorum/partition_moves.py).
        self.moves = PartitionMoves(config.node_id, self.topics, replication, self._stored_states,
                                    storage.election_store, changes, snapshots, self._epoch_floor_fixed)
        self._opening = LogOpening(self.topics, storage.open_log) if storage.opens_logs_off_loop else None

    def start(self, now_ms: int) -> None:
        self.topics.load()
        if self.plane is not None:
            self._open_metadata_partition(now_ms)
        self._drop_orphan_states()
        self.started = True

    def _drop_orphan_states(self) -> None:
        """The stored election states of topics this node no longer has: it deleted them and
        stopped before the states' removal was written. Dropped, so that a topic re-created
        under the name starts afresh instead of from the old topic's epoch and vote."""
        orphans = {key: None for key in self._stored_states if self.topics.get(key[0]) is None}
        if orphans:
            self._election_store.write(orphans)
            for key in orphans:
                del self._stored_states[key]

    def legacy_epoch(self) -> int:
        return getattr(self._election_store, "legacy_epoch", 0)

    def _open_metadata_partition(self, now_ms: int) -> None:
        """`__cluster_metadata-0`: a snapshot-policy group over the voters, on every voter."""
        voters = sorted(self.config.voters)
        topic = self.topics.get(METADATA_TOPIC)
        if topic is None:
            topic = self.topics.create(METADATA_TOPIC, 1, {"cleanup.policy": "snapshot"}, topic_id=METADATA_TOPIC_ID,
                                       assignments=[voters])
        partition = topic.partitions[0]
        # (--voters must stay what the quorum was founded with; once VotersRecords change the
        # voters, the log's set is in force and --voters is only where a node first looks.)
        if partition is None or partition.raft.log_voters.static.ids != tuple(voters):
            raise VoterSetMismatch(f"{METADATA_TOPIC} here has voters {partition and partition.raft.voters}, "
                                   f"--voters says {voters}; start it with the --voters the quorum was founded with")
        self.plane.partition = partition
        self.reconcile(now_ms)

    def _make_partition(self, topic, index, topic_id, partition_log, config, topic_num: int,
                        voters=None) -> Partition:
        partition = Partition(topic=topic, index=index, topic_id=topic_id, log=partition_log, config=config,
                              high_watermark=partition_log.log_start_offset,
                              journal=self._journal, session_key=partition_key_int(topic_num, index))
        if config.is_snapshot_policy:
            self._snapshots.attach(partition)
        voters = tuple(voters) if voters else (self.config.node_id,)
        partition.replicas = voters
        stored = self._stored_states.get(partition.key)
        fresh = stored is None
        now_ms = self._changes.now_ms
        if fresh:
            # A single node's groups share one epoch (raised at each start, as before replication):
            # a group created while serving elects itself at the node's current epoch.
            epoch = 0
            if len(voters) == 1:
                floor = self.leader_epoch_floor()
                epoch = max(floor - 1, 0) if self.started else floor
            replaced = partition.key in self._placed_elsewhere
            self._placed_elsewhere.discard(partition.key)
            joining = partition.key in self.moves.joining
            self.moves.joining.discard(partition.key)
            if replaced:
                log.warning("%s-%d: placed on another directory of this node: this data dir replaced a lost "
                            "one; no vote until caught up", *partition.key)
            lost = self.rejoining or replaced  # (the disk-loss rule, stricter, wins)
            stored = ElectionState(epoch, may_vote=not (lost or joining), joining=joining and not lost)
        self._replication.add_group(partition, voters, stored, now_ms, persist_now=fresh)
        partition.raft = self._replication.groups[partition.key]
        if (fresh and stored.may_vote and self.plane is not None and voters[0] == self.config.node_id
                and topic != METADATA_TOPIC):
            partition.raft.stand_now(now_ms)  # the preferred leader of a new partition
        return partition

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
        epochs = [g.epoch for g in self._replication.groups.values() if len(g.voters) == 1]
        return max(epochs, default=self.legacy_epoch())

    # -- creating and deleting --------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: dict, *, open_inline: bool = False) -> Topic:
        """A client's CreateTopics or auto-creation. In a cluster it goes through the controller
        and the client retries. With a storage that opens logs off the loop, raises
        TopicCreating (log_opening.py) unless `open_inline`: Metadata and Produce auto-create
        a topic of default_partitions and answer with it, as before."""
        now_ms = self._changes.now_ms
        if self.plane is not None:
            if self.plane.image.topic(name) is not None:
                raise TopicError("NOT_LEADER_OR_FOLLOWER", f"No replica of '{name}' here.")
            self.plane.auto_create(name, partitions, now_ms, configs)
            raise TopicError("LEADER_NOT_AVAILABLE", f"Topic '{name}' is being created.")
        if self.topics.pending(name) is not None:
            raise TopicError("LEADER_NOT_AVAILABLE", f"Topic '{name}' is being created.")
        if self._opening is not None and self._opening.busy(name):
            raise TopicError("LEADER_NOT_AVAILABLE" if open_inline else "TOPIC_ALREADY_EXISTS",
                             f"Topic '{name}' is marked for deletion.")
        if self._opening is not None and not open_inline:
            pending = self.topics.reserve(name, partitions, configs)
            self._opening.start(pending)
            raise TopicCreating(pending)
        with self._epoch_floor_fixed():
            topic = self.topics.create(name, partitions, configs)
        self._replication.poll(now_ms)  # a group of one voter leads at once
        return topic

    def create_replicated_topic(self, name: str, topic_id, assignments: list, configs: dict, now_ms: int,
                                joined=()) -> Topic:
        """Host this node's replicas of a topic whose placement was decided elsewhere (the
        metadata image, or the simulation). `assignments[i]` lists partition i's voters;
        `joined`, partitions hosted here though not among them (a move to this node). None
        while its logs are being opened off the loop (log_opening.py)."""
        self._changes.now_ms = now_ms
        if self._opening is not None:
            if self._opening.busy(name):
                return None  # an older topic's cancelled job is out: logs_opened reconciles again
            self._opening.start(self.topics.reserve(name, len(assignments), configs, topic_id=topic_id,
                                                    assignments=assignments, joined=joined))
            return None
        with self._epoch_floor_fixed():
            topic = self.topics.create(name, len(assignments), configs, topic_id=topic_id, assignments=assignments,
                                       joined=joined)
        self._replication.poll(now_ms)
        return topic

    def delete_topic(self, name: str) -> None:
        """Drop a topic here: its groups, parked requests see it gone, its files are removed."""
        if self._opening is not None and self._opening.cancel(name) is not None:
            log.info("deleted topic %s before its logs were open", name)
            self._changes.wake([opened_key(name)])
            return
        topic = self.topics.get(name)
        if topic is None:
            return
        partitions = [p for p in topic.partitions if p is not None]
        for partition in partitions:
            self._replication.remove_group(partition.key)
            self._stored_states.pop(partition.key, None)  # (a topic re-created under the name starts afresh)
            self._changes.dirty.pop(partition.key, None)
            self._snapshots.forget(partition.key)
            # The directory is renamed away before the catalog forgets the topic and removed
            # after (each queued in that order): a crash in between leaves a `-delete`
            # directory that startup finishes, never a directory no catalog entry owns.
            partition.log.discard(remove=False)
        self.topics.delete(name)
        for partition in partitions:
            partition.log.remove_discarded()
        log.info("deleted topic %s (%s)", name, topic.topic_id)

    def opening_jobs(self) -> list:
        return self._opening.jobs() if self._opening is not None else []

    def logs_opened(self, job: OpenLogsJob, error: BaseException | None, now_ms: int) -> None:
        """A topic's OpenLogsJob came back: serve the topic, unless it was deleted meanwhile."""
        self._changes.now_ms = now_ms
        pending = job.pending
        logs = self._opening.finish(job, error)
        if logs is not None:
            with self._epoch_floor_fixed():
                topic = self.topics.complete(pending, logs)
            if self.plane is not None:  # a config change or a move the image took while the logs opened
                apply_config_change(self.topics, self.config, pending.name, self.plane.image)
                info = self.plane.image.topics.get(topic.topic_id)
                if info is not None:
                    self.moves.reconcile(topic, info, now_ms)
            self._replication.poll(now_ms)  # a group of one voter leads at once
        else:
            if error is not None:
                log.error("opening the logs of topic %s failed: %r", pending.name, error)
            info = self.plane.image.topic(pending.name) if self.plane is not None else None
            if info is not None:
                # What the image holds under that name is hosted again: a failed job's topic at
                # the next reconciliation (no retry loop while a disk fails), a newer topic that
                # waited for this cancelled job's logs to go at once.
                self.plane.machine.touched.add(topic_key(info.topic_id))
                if error is None:
                    self.reconcile(now_ms)
        self._changes.wake([opened_key(pending.name)])

    # -- the metadata image decides what this node hosts ------------------------------------------
    def reconcile(self, now_ms: int) -> None:
        """After the image changed: host the new partitions that list us, drop deleted topics."""
        machine = self.plane.machine
        image = machine.image
        if machine.applied_offset < self._catalog.metadata_offset:
            # Restarted: what we host already reflects the image at a later offset than we have
            # replayed (a snapshot plus part of the log). Acting now would bring back topics
            # deleted since, as empty replicas; wait (the changes keep accumulating).
            return
        touched_partitions: dict = {}  # topic id -> the indexes whose records changed (None: all)
        if machine.reloaded:
            topic_ids = set(image.topics) | image.removed
            reconfigured = {t.name for t in self.topics}
        else:
            topic_ids = set()
            for key in machine.touched:
                if key[:2] in (b"t/", b"p/"):
                    parts = key.split(b"/")
                    topic_id = uuid.UUID(hex=parts[1].decode())
                    topic_ids.add(topic_id)
                    if key[:2] == b"t/":
                        touched_partitions[topic_id] = None
                    elif touched_partitions.get(topic_id, ()) is not None:
                        touched_partitions.setdefault(topic_id, set()).add(int(parts[2]))
            reconfigured = {key.split(b"/")[1].decode() for key in machine.touched if key[:2] == b"c/"}
        machine.touched, machine.reloaded = set(), False
        for name in reconfigured:
            apply_config_change(self.topics, self.config, name, image)
        me = self.config.node_id
        changed = False
        for topic_id in sorted(topic_ids):
            info = image.topics.get(topic_id)
            local = self.topics.get_by_id(topic_id) or self.topics.pending_by_id(topic_id)
            if info is None:
                if local is not None and topic_id in image.removed:
                    self.delete_topic(local.name)
                    changed = True
                continue
            if local is not None:
                if isinstance(local, Topic):
                    changed |= self.moves.reconcile(local, info, now_ms, touched_partitions.get(topic_id))
                continue
            if not any(me in p.replicas for p in info.partitions.values()):
                continue
            stale = self.topics.get(info.name) or self.topics.pending(info.name)
            if stale is not None and stale.name != METADATA_TOPIC:
                self.delete_topic(stale.name)  # an older topic of that name, deleted while we were away
            parts = [info.partitions[i] for i in range(len(info.partitions))]
            assignments = [starting_voters(p) for p in parts]
            joined = [i for i, p in enumerate(parts) if me in p.replicas and me not in assignments[i]]
            mine = self._replication.directory_id
            self._placed_elsewhere |= {(info.name, i) for i, p in info.partitions.items()
                                       if p.directory_of(me) not in (None, mine)}
            # A move here: no vote until it follows a leader (ElectionState.joining).
            self.moves.joining |= {(info.name, i) for i, p in info.partitions.items() if me in p.adding}
            self.create_replicated_topic(info.name, topic_id, assignments, image.configs.get(info.name, {}), now_ms,
                                         joined=joined)
            changed = True
        if changed:  # (a file write: only when what we host changed)
            self._catalog.set_metadata_offset(machine.applied_offset)

    def check_rejoin_complete(self) -> None:
        """A rejoin is complete once the metadata group votes again, the image is applied up to
        its HW, and every partition the image assigns here is hosted and votes again. A group
        created after that is for a partition created after the disk was lost: no vote of this
        node's to forget, so it votes at once (and the marker file goes)."""
        groups = self._replication.groups
        metadata = groups.get((METADATA_TOPIC, 0))
        if metadata is None or not metadata.state.may_vote:
            return
        partition = metadata.partition
        if partition.snapshots.machine.applied_offset < partition.high_watermark:
            return
        for info in self.plane.image.topics.values():
            for p in info.partitions.values():
                if self.config.node_id in p.replicas:
                    group = groups.get((info.name, p.index))
                    if group is None or not group.state.may_vote:
                        return
        self.rejoining = False
        if self._startup.on_rejoin_complete is not None:
            self._startup.on_rejoin_complete()
        log.info("rejoin after a disk loss complete: every group hosted here has caught up")
