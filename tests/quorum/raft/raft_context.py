"""A builder-style context for one Raft replica, modelled on Kafka's RaftClientTestContext.

The context drives ONE `Node` (memory log, MemoryElectionStore, a seeded random.Random, small
Raft timeouts) hosting topic "t", partition 0, whose voters are `voters`. The test plays every
other voter by hand: it delivers requests and responses, and inspects what the node sends.

It plays the shell's part exactly as a server must: an Outbox's `persist` is written to the
election store (and `on_persisted` called) *before* its sends are looked at, and logs are
flushed (group commit) before each poll. Sends are buffered until a test takes them with
`sent(...)` or one of the `assert_sent_*` helpers.

    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).build()
    ctx.advance(2 * ctx.election_timeout_ms)
    for send in ctx.assert_sent_vote_request(epoch=5, last_epoch=0, last_offset=0, pre_vote=True):
        ctx.respond(send, ctx.vote_response(granted=True, epoch=4))
"""
from __future__ import annotations

import os
import random
import shutil
import tempfile
import uuid
import weakref

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.control_records import ControlType, parse_control_record_key
from kraftd.protocol.records import build_batch, decode_records, iter_batch_headers
from kraftd.quorum.node import Node
from kraftd.quorum.node_wiring import NodeRuntime, NodeStartup, NodeStorage
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import Park, Respond
from kraftd.quorum.peer import Peer
from kraftd.quorum.raft.config import RaftConfig
from kraftd.quorum.raft.election_state import NO_NODE, ElectionState, MemoryElectionStore
from kraftd.storage import MemoryLog
from kraftd.storage.snapshots import SnapshotId, SnapshotStore, SnapshotWriter

from ...sim.stores import MemoryStateFile, MemoryTopicCatalog

CLUSTER_ID = "raft-test-cluster-000000"
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x7A57_0000_0001)
KEY = (TOPIC, 0)
START_MS = 100_000
SNAPSHOT_POLICY = {"cleanup.policy": "snapshot"}
RAFT = RaftConfig(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=300,
                  request_timeout_ms=400, retry_backoff_ms=50, fetch_max_wait_ms=100,
                  snapshot_chunk_bytes=4096)


def _tmp_dir(owner) -> str:
    path = tempfile.mkdtemp(prefix="raft-ctx-")
    weakref.finalize(owner, shutil.rmtree, path, True)
    return path


def data_batch(epoch: int, values, base_offset: int = 0, timestamp: int = START_MS) -> bytes:
    """A v2 batch of keyed records (`k<i>` -> value) carrying `epoch` as its leader epoch."""
    records = [(f"k{i}".encode(), v if isinstance(v, bytes) else str(v).encode(), [], timestamp)
               for i, v in enumerate(values)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch)


def snapshot_file_bytes(sid: SnapshotId, items: dict, *, max_batch_bytes: int = 1 << 20) -> bytes:
    """The bytes of a valid snapshot file (what a leader serves through FetchSnapshot)."""
    directory = tempfile.mkdtemp(prefix="raft-snap-")
    try:
        writer = SnapshotWriter(directory, sid, last_contained_log_timestamp=START_MS,
                                max_batch_bytes=max_batch_bytes)
        writer.append_many(sorted(items.items()))
        with open(writer.freeze(), "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class RaftTestContextBuilder:
    def __init__(self, local_id: int, voters) -> None:
        self.local_id = local_id
        self.voters = tuple(sorted(voters))
        self.raft_config = RAFT
        self.seed = 0x5EED
        self.state: ElectionState | None = None
        self.appends: list[tuple[int, list]] = []
        self.snapshot: tuple[SnapshotId, dict] | None = None
        self.snapshot_policy = False
        self.is_rejoining = False
        self.is_joining = False
        self.data_dir: str | None = None
        self.node_overrides: dict = {}

    # -- durable election state before the start ---------------------------------------------
    def with_unknown_leader(self, epoch: int) -> "RaftTestContextBuilder":
        self.state = ElectionState(epoch)
        return self

    def with_voted_candidate(self, epoch: int, candidate_id: int) -> "RaftTestContextBuilder":
        self.state = ElectionState(epoch, voted_id=candidate_id)
        return self

    def with_elected_leader(self, epoch: int, leader_id: int) -> "RaftTestContextBuilder":
        self.state = ElectionState(epoch, leader_id=leader_id)
        return self

    def joining(self) -> "RaftTestContextBuilder":
        """A new copy of a partition with a history (a move made it): no vote until it follows
        a leader (ElectionState.joining)."""
        self.is_joining = True
        return self

    def rejoining(self) -> "RaftTestContextBuilder":
        """Restarted on an empty disk: it may have voted and forgotten it (may_vote False)."""
        self.is_rejoining = True
        return self

    # -- log and snapshots --------------------------------------------------------------------
    def append_to_log(self, epoch: int, records, *, per_batch: int | None = None) -> "RaftTestContextBuilder":
        """Records written by the leader of `epoch` (an int is a count of records), in one batch
        or in batches of `per_batch` records (truncation works on whole batches)."""
        values = [f"v{i}" for i in range(records)] if isinstance(records, int) else list(records)
        step = per_batch or len(values)
        for i in range(0, len(values), step):
            self.appends.append((epoch, values[i:i + step]))
        return self

    def with_snapshot_policy(self) -> "RaftTestContextBuilder":
        self.snapshot_policy = True
        return self

    def with_snapshot(self, end_offset: int, epoch: int, items: dict | None = None) -> "RaftTestContextBuilder":
        """A snapshot-policy topic whose latest snapshot ends at `end_offset` (the log starts there)."""
        self.snapshot_policy = True
        self.snapshot = (SnapshotId(end_offset, epoch), dict(items or {b"snap": b"shot"}))
        return self

    def with_data_dir(self, path) -> "RaftTestContextBuilder":
        self.data_dir = os.fspath(path)
        return self

    def with_raft_config(self, **overrides) -> "RaftTestContextBuilder":
        import dataclasses
        self.raft_config = dataclasses.replace(self.raft_config, **overrides)
        return self

    def with_node_config(self, **overrides) -> "RaftTestContextBuilder":
        self.node_overrides.update(overrides)
        return self

    def with_seed(self, seed: int) -> "RaftTestContextBuilder":
        self.seed = seed
        return self

    def build(self) -> "RaftTestContext":
        ctx = RaftTestContext.__new__(RaftTestContext)
        data_dir = self.data_dir or (_tmp_dir(ctx) if self.snapshot_policy else "/nonexistent-raft-test-dir")
        store = MemoryElectionStore()
        if self.state is not None:
            state = self.state
            if self.is_rejoining:
                state = ElectionState(state.epoch, state.leader_id, state.voted_id, False)
            store.states[KEY] = state
        if self.is_joining:
            store.states[KEY] = ElectionState(self.state.epoch if self.state else 0, may_vote=False, joining=True)
        log = MemoryLog(segment_bytes=1 << 20, log_start_offset=self.snapshot[0].end_offset if self.snapshot else 0)
        for epoch, values in self.appends:
            log.append_as_leader(bytearray(data_batch(epoch, values)), epoch, now_ms=START_MS)
        log.flush()
        if self.snapshot is not None:
            sid, items = self.snapshot
            snapshots = SnapshotStore(os.path.join(data_dir, f"{TOPIC}-0"))
            writer = snapshots.writer(sid, last_contained_log_timestamp=START_MS)
            writer.append_many(sorted(items.items()))
            writer.freeze()
        config = NodeConfig(node_id=self.local_id, data_dir=data_dir, fsync_policy="acks_all",
                            **{"retention_check_interval_ms": 10**9, **self.node_overrides})
        session_rng = random.Random(self.seed ^ 0xF37C)
        # The node restarts with the topic on its disk (its catalog entry, its log, its state).
        catalog = MemoryTopicCatalog(CLUSTER_ID)
        catalog.create(TOPIC, 1, SNAPSHOT_POLICY if self.snapshot_policy else {}, topic_id=TOPIC_ID,
                       assignments=[self.voters])
        storage = NodeStorage(
            catalog=catalog, election_store=store, producer_id_store=MemoryStateFile(),
            open_log=lambda topic, index, cfg: log,
            open_snapshot_store=lambda topic, index: SnapshotStore(os.path.join(data_dir, f"{topic}-{index}")))
        runtime = NodeRuntime(rng=random.Random(self.seed), new_session_id=lambda: session_rng.randrange(1, 0x7FFFFFFF),
                              raft_config=self.raft_config, cluster_id=CLUSTER_ID)
        node = Node(config, storage, runtime, NodeStartup(rejoining=self.is_rejoining))
        ctx.__init__(node, store, log, self.local_id, self.voters, self.raft_config, data_dir)
        node.start(START_MS)
        ctx.poll()
        return ctx


class RaftTestContext:
    def __init__(self, node: Node, store: MemoryElectionStore, log: MemoryLog, local_id: int, voters,
                 raft_config: RaftConfig, data_dir: str) -> None:
        self.node = node
        self.other_nodes: set = set()  # nodes besides the voters whose requests are authenticated (observers)
        self.store = store
        self.log = log
        self.local_id = local_id
        self.voters = voters
        self.others = tuple(v for v in voters if v != local_id)
        self.raft = raft_config
        self.data_dir = data_dir
        self.now_ms = START_MS
        self.completions: dict[int, object] = {}
        self._sent: list = []
        self._correlation = 1000

    @staticmethod
    def builder(local_id: int = 1, voters=(1, 2, 3)) -> RaftTestContextBuilder:
        return RaftTestContextBuilder(local_id, voters)

    # -- what the tests read -----------------------------------------------------------------
    @property
    def election_timeout_ms(self) -> int:
        return self.raft.election_timeout_ms

    @property
    def fetch_timeout_ms(self) -> int:
        return self.raft.fetch_timeout_ms

    @property
    def check_quorum_ms(self) -> int:
        return self.raft.check_quorum_ms

    @property
    def group(self):
        return self.node.replication.groups[KEY]

    @property
    def partition(self):
        return self.node.topics.partition(*KEY)

    @property
    def role(self) -> str:
        return self.group.role.name

    @property
    def epoch(self) -> int:
        return self.group.epoch

    def persisted_state(self) -> ElectionState | None:
        """What is durable in the election store (not what the core holds in memory)."""
        return self.store.states.get(KEY)

    def last_log_id(self) -> tuple[int, int]:
        """(latest epoch, log end offset) as a candidate would claim them."""
        latest = self.log.epoch_cache.latest_epoch
        return (0 if latest is None else latest), self.log.log_end_offset

    # -- time and the shell's part -----------------------------------------------------------
    def poll(self) -> None:
        """One turn of a shell: run the followers' jobs (truncations, snapshot installs: a worker
        thread's in the server) unless `hold_follower_jobs`, flush logs (group commit), poll the
        core, persist, then send."""
        if not self.hold_follower_jobs:
            self.run_follower_jobs()
        for key, partition_log in self.node.logs_to_flush():
            self._collect(self.node.on_flushed(key, partition_log.flush(), self.now_ms))
        self._collect(self.node.poll(self.now_ms))
        self._drain()

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.poll()

    hold_follower_jobs = False  # True: jobs wait for run_follower_jobs() (a test of the pause)

    def run_follower_jobs(self) -> int:
        jobs = self.node.replication.follower_jobs()
        for job in jobs:
            error = None
            try:
                job.run()
            except Exception as exc:  # as the shell's runner: the node hears of the failure
                error = exc
            self.node.on_job_done(job, self.now_ms, error)
        return len(jobs)

    def ms_until_sent(self, api_key: int, limit_ms: int, step_ms: int = 1) -> int | None:
        """Advance in steps until the node sends `api_key`; how long that took (None: never)."""
        waited = 0
        while waited < limit_ms:
            self.advance(step_ms)
            waited += step_ms
            if any(s.api_key == api_key for s in self._sent):
                return waited
        return None

    def take_outbox(self):
        """The raw Outbox, as a shell gets it (nothing persisted): for persist-before-send tests."""
        out = self.node.take_outbox(self.now_ms)
        self._collect(out.completions)
        return out

    def persist(self, states: dict) -> None:
        self.node.persist_election_states(states)

    def _drain(self) -> None:
        while True:
            out = self.node.take_outbox(self.now_ms)
            self._sent += out.sends
            self._collect(out.completions)
            if not out.persist:
                if not out.sends and not out.completions:
                    return
                continue
            self.node.persist_election_states(out.persist)

    def _collect(self, completions) -> None:
        for c in completions:
            self.completions[c.token] = c.response

    def sent(self, api_key: int | None = None, destination: int | None = None) -> list:
        """Take the buffered Sends (persisting first, like a shell) matching the filters."""
        self._drain()
        taken = [s for s in self._sent if (api_key is None or s.api_key == api_key)
                 and (destination is None or s.destination == destination)]
        self._sent = [s for s in self._sent if s not in taken]
        return taken

    def clear_sent(self) -> None:
        self.sent()

    # -- requests to the node ----------------------------------------------------------------
    def handle(self, request, api_key: int, version: int, source: int = 2):
        """node.handle, raw: returns the Outcome (Respond or Park), nothing drained."""
        self._correlation += 1
        header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=self._correlation, client_id=f"node-{source}")
        node = source if source in self.voters or source in self.other_nodes else None
        return self.node.handle(header, request, self.now_ms, Peer(f"node-{source}:1", node))

    def deliver_request(self, request, api_key: int, version: int, source: int = 2):
        """The response to `request` from `source`; a parked answer is released after persisting."""
        outcome = self.handle(request, api_key, version, source)
        if isinstance(outcome, Respond):
            return outcome.response
        assert isinstance(outcome, Park), outcome
        self._drain()
        assert outcome.token in self.completions, "a parked quorum answer was not released after persisting"
        return self.completions.pop(outcome.token)

    def deliver_response(self, source: int, correlation_id: int, response) -> None:
        self.node.on_response(source, correlation_id, response, self.now_ms)

    def respond(self, send, response) -> None:
        self.deliver_response(send.destination, send.correlation_id, response)

    # -- request builders and deliveries -----------------------------------------------------
    def vote_request(self, epoch: int, candidate_id: int, last_epoch: int, last_offset: int, *,
                     pre_vote: bool = False):
        return m.VoteRequest(cluster_id=CLUSTER_ID, voter_id=self.local_id, topics=[m.VoteRequest.TopicData(
            topic_name=TOPIC, partitions=[m.VoteRequest.PartitionData(
                partition_index=0, replica_epoch=epoch, replica_id=candidate_id, last_offset_epoch=last_epoch,
                last_offset=last_offset, pre_vote=pre_vote)])])

    def deliver_vote_request(self, epoch: int, candidate_id: int, last_epoch: int, last_offset: int, *,
                             pre_vote: bool = False):
        """The partition's VoteResponse data."""
        response = self.deliver_request(self.vote_request(epoch, candidate_id, last_epoch, last_offset,
                                                          pre_vote=pre_vote), api.VOTE, 2, source=candidate_id)
        assert response.error_code == 0, response
        return response.topics[0].partitions[0]

    def deliver_begin_quorum_epoch(self, epoch: int, leader_id: int):
        request = m.BeginQuorumEpochRequest(cluster_id=CLUSTER_ID, voter_id=self.local_id, topics=[
            m.BeginQuorumEpochRequest.TopicData(topic_name=TOPIC, partitions=[
                m.BeginQuorumEpochRequest.PartitionData(partition_index=0, leader_id=leader_id, leader_epoch=epoch)])],
            leader_endpoints=[])
        return self.deliver_request(request, api.BEGIN_QUORUM_EPOCH, 1, source=leader_id).topics[0].partitions[0]

    def deliver_end_quorum_epoch(self, epoch: int, leader_id: int, successors):
        request = m.EndQuorumEpochRequest(cluster_id=CLUSTER_ID, topics=[m.EndQuorumEpochRequest.TopicData(
            topic_name=TOPIC, partitions=[m.EndQuorumEpochRequest.PartitionData(
                partition_index=0, leader_id=leader_id, leader_epoch=epoch, preferred_successors=list(successors),
                preferred_candidates=[m.EndQuorumEpochRequest.ReplicaInfo(candidate_id=c) for c in successors])])],
            leader_endpoints=[])
        return self.deliver_request(request, api.END_QUORUM_EPOCH, 1, source=leader_id).topics[0].partitions[0]

    def deliver_fetch(self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, epoch: int | None = None,
                      directory=None):
        """A follower's (sessionless) Fetch of t-0, from directory `directory` (KIP-853; default
        none said); the partition's FetchResponse data."""
        request = m.FetchRequest(
            replica_id=replica_id, replica_state=m.FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
            max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
            topics=[m.FetchRequest.FetchTopic(topic=TOPIC, topic_id=TOPIC_ID, partitions=[
                m.FetchRequest.FetchPartition(partition=0, current_leader_epoch=self.epoch if epoch is None else epoch,
                                              fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                                              log_start_offset=-1, partition_max_bytes=1 << 20,
                                              replica_directory_id=directory or uuid.UUID(int=0))])],
            forgotten_topics_data=[], rack_id="")
        response = self.deliver_request(request, api.FETCH, 17, source=replica_id)
        return response.responses[0].partitions[0]

    # -- response builders -------------------------------------------------------------------
    def vote_response(self, granted: bool, epoch: int, leader_id: int = NO_NODE, error: int = 0):
        """A voter's answer; `epoch` is the voter's current epoch (its leader epoch)."""
        return m.VoteResponse(error_code=0, topics=[m.VoteResponse.TopicData(topic_name=TOPIC, partitions=[
            m.VoteResponse.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                         leader_epoch=epoch, vote_granted=granted)])])

    def epoch_response(self, response_cls, epoch: int, leader_id: int, error: int = 0):
        return response_cls(error_code=0, topics=[response_cls.TopicData(topic_name=TOPIC, partitions=[
            response_cls.PartitionData(partition_index=0, error_code=error, leader_id=leader_id,
                                       leader_epoch=epoch)])])

    def fetch_response(self, *, records: bytes | None = None, high_watermark: int = 0, log_start_offset: int = 0,
                       diverging_epoch: tuple[int, int] | None = None, snapshot_id: tuple[int, int] | None = None,
                       error: int = 0, leader: tuple[int, int] | None = None, session_id: int = 0):
        """A leader's Fetch answer for t-0. `diverging_epoch`/`snapshot_id`: (epoch, end offset) /
        (end offset, epoch), as the schema orders them; `leader`: (leader id, epoch)."""
        F = m.FetchResponse
        data = F.PartitionData(partition_index=0, error_code=error, high_watermark=high_watermark,
                               last_stable_offset=high_watermark, log_start_offset=log_start_offset,
                               aborted_transactions=None, preferred_read_replica=-1, records=records or b"")
        if diverging_epoch is not None:
            data.diverging_epoch = F.EpochEndOffset(epoch=diverging_epoch[0], end_offset=diverging_epoch[1])
        if snapshot_id is not None:
            data.snapshot_id = F.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1])
        if leader is not None:
            data.current_leader = F.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
        return F(throttle_time_ms=0, error_code=0, session_id=session_id, responses=[
            F.FetchableTopicResponse(topic=TOPIC, topic_id=TOPIC_ID, partitions=[data])])

    def empty_fetch_response(self, session_id: int = 0):
        """A leader's answer naming no partition (what a fetch with nothing to fetch gets)."""
        return m.FetchResponse(throttle_time_ms=0, error_code=0, session_id=session_id, responses=[])

    def fetch_snapshot_response(self, snapshot_id: tuple[int, int], data: bytes, position: int, size: int,
                                error: int = 0):
        """One chunk: `data` is the file's bytes from `position`; `size` the whole file's."""
        F = m.FetchSnapshotResponse
        return F(throttle_time_ms=0, error_code=0, topics=[F.TopicSnapshot(name=TOPIC, partitions=[
            F.PartitionSnapshot(index=0, error_code=error,
                                snapshot_id=F.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
                                size=size, position=position, unaligned_records=data)])])

    # -- assertions on what was sent ---------------------------------------------------------
    def fetch_partitions(self, send) -> list:
        """The request's partition entries for t-0 (empty if it does not name it)."""
        return self._partitions_of(send)

    def _partitions_of(self, send) -> list:
        request = send.request
        if send.api_key == api.FETCH:
            return [p for t in request.topics if t.topic_id == TOPIC_ID for p in t.partitions if p.partition == 0]
        if send.api_key == api.FETCH_SNAPSHOT:
            return [p for t in request.topics if t.name == TOPIC for p in t.partitions if p.partition == 0]
        return [p for t in request.topics if t.topic_name == TOPIC for p in t.partitions if p.partition_index == 0]

    def _one_each(self, api_key: int, to) -> list:
        sends = self.sent(api_key)
        destinations = sorted(s.destination for s in sends)
        assert destinations == sorted(to), f"api {api_key} sent to {destinations}, expected {sorted(to)}"
        return sorted(sends, key=lambda s: s.destination)

    def assert_sent_vote_request(self, epoch: int, last_epoch: int, last_offset: int, pre_vote: bool, to=None) -> list:
        sends = self._one_each(api.VOTE, self.others if to is None else to)
        for s in sends:
            [p] = self._partitions_of(s)
            assert (p.replica_epoch, p.replica_id, p.last_offset_epoch, p.last_offset, p.pre_vote) == (
                epoch, self.local_id, last_epoch, last_offset, pre_vote), p
        return sends

    def assert_sent_begin_quorum_epoch(self, epoch: int, to=None) -> list:
        sends = self._one_each(api.BEGIN_QUORUM_EPOCH, self.others if to is None else to)
        for s in sends:
            [p] = self._partitions_of(s)
            assert (p.leader_id, p.leader_epoch) == (self.local_id, epoch), p
        return sends

    def assert_sent_end_quorum_epoch(self, epoch: int, to=None) -> list:
        sends = self._one_each(api.END_QUORUM_EPOCH, self.others if to is None else to)
        for s in sends:
            [p] = self._partitions_of(s)
            assert (p.leader_id, p.leader_epoch) == (self.local_id, epoch), p
        return sends

    def assert_sent_fetch(self, offset: int, last_fetched_epoch: int, epoch: int | None = None, to: int | None = None):
        """Exactly one Fetch naming t-0 went to the leader; returns its Send."""
        to = self.group.leader_id if to is None else to
        sends = [s for s in self.sent(api.FETCH, to) if self._partitions_of(s)]
        assert len(sends) == 1, f"expected one Fetch of {KEY} to {to}, got {len(sends)}"
        [p] = self._partitions_of(sends[0])
        expected_epoch = self.epoch if epoch is None else epoch
        assert (p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (
            offset, last_fetched_epoch, expected_epoch), p
        return sends[0]

    def assert_sent_fetch_snapshot(self, snapshot_id: tuple[int, int], position: int, to: int | None = None):
        to = self.group.leader_id if to is None else to
        sends = self.sent(api.FETCH_SNAPSHOT, to)
        assert len(sends) == 1, f"expected one FetchSnapshot to {to}, got {len(sends)}"
        [p] = self._partitions_of(sends[0])
        assert ((p.snapshot_id.end_offset, p.snapshot_id.epoch), p.position) == (tuple(snapshot_id), position), p
        return sends[0]

    # -- assertions on the replica's state ---------------------------------------------------
    def assert_role(self, name: str, epoch: int) -> None:
        assert (self.role, self.epoch) == (name, epoch), f"{self.role}@{self.epoch}, expected {name}@{epoch}"

    def assert_unknown_leader(self, epoch: int) -> None:
        """No leader in `epoch`, in memory and on disk (whatever the vote)."""
        assert self.role in ("Unattached", "Voted", "Prospective"), self.role
        assert self.epoch == epoch and self.group.leader_id == NO_NODE
        state = self.persisted_state()
        assert (state.epoch, state.leader_id) == (epoch, NO_NODE), state

    def assert_voted_for(self, epoch: int, candidate_id: int) -> None:
        state = self.persisted_state()
        assert (state.epoch, state.voted_id, state.leader_id) == (epoch, candidate_id, NO_NODE), state
        assert self.epoch == epoch

    def assert_elected_leader(self, epoch: int, leader_id: int) -> None:
        state = self.persisted_state()
        assert (state.epoch, state.leader_id) == (epoch, leader_id), state
        expected = "Leader" if leader_id == self.local_id else "Follower"
        self.assert_role(expected, epoch)
        assert self.group.leader_id == leader_id

    def assert_resigned(self, epoch: int) -> None:
        self.assert_role("Resigned", epoch)

    # -- the log -----------------------------------------------------------------------------
    def batches(self) -> list:
        """(header, records) of every batch in the log, from its start."""
        result = self.log.read(self.log.log_start_offset, 1 << 30, max_offset=self.log.log_end_offset)
        out = []
        for region in result.regions:
            buf = bytes(region.view())
            for pos, header in iter_batch_headers(buf):
                out.append((header, decode_records(buf[pos:pos + header.size], header)))
        return out

    def control_type_at(self, offset: int):
        for header, records in self.batches():
            if header.base_offset == offset:
                if not header.is_control:
                    return None
                return parse_control_record_key(records[0].key)[1]
        raise AssertionError(f"no batch starts at {offset}")

    # -- whole scenarios ---------------------------------------------------------------------
    def take_snapshot(self) -> SnapshotId:
        """What the server's snapshot worker does when an operator asks for a snapshot now."""
        assert self.node.snapshots.request(*KEY)
        jobs = self.node.snapshots.jobs()
        assert len(jobs) == 1, jobs
        jobs[0].run()
        self.node.on_snapshot_done(jobs[0], self.now_ms)
        self.poll()
        return jobs[0].snapshot_id

    def win_election(self) -> int:
        """Time out, win the pre-vote and the vote with just a majority (the lowest other voter
        ids); returns the new epoch."""
        epoch = self.epoch + 1
        granting = self.others[:len(self.voters) // 2]
        self.advance(2 * self.election_timeout_ms)
        last_epoch, last_offset = self.group.last_log_id()
        for s in self.assert_sent_vote_request(epoch, last_epoch, last_offset, pre_vote=True):
            if s.destination in granting:
                self.respond(s, self.vote_response(True, epoch - 1))
        for s in self.assert_sent_vote_request(epoch, last_epoch, last_offset, pre_vote=False):
            if s.destination in granting:
                self.respond(s, self.vote_response(True, epoch))
        self.poll()
        self.assert_elected_leader(epoch, self.local_id)
        return epoch


LEADER_CHANGE = ControlType.LEADER_CHANGE

__all__ = ["RaftTestContext", "RaftTestContextBuilder", "CLUSTER_ID", "TOPIC", "TOPIC_ID", "KEY", "LEADER_CHANGE",
           "data_batch", "snapshot_file_bytes", "SnapshotId"]
