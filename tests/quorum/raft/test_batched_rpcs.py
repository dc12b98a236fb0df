"""Batched quorum RPCs at scale: three nodes on memory storage host 1,000 Raft groups (one topic,
1,000 partitions, voters (1, 2, 3) each), wired by a tiny deterministic in-process pump.

What is shown:

1. Elections are batched per destination: when node 1's election timers fire it sends exactly
   ONE VoteRequest per peer per round (pre-vote, then vote), each naming all 1,000 partitions,
   and after winning ONE BeginQuorumEpoch per peer, again naming all 1,000.
2. Replication is one stream per (follower, leader): each follower keeps at most one Fetch in
   flight to the leader, all of them in a single KIP-227 session (a full fetch first, then
   SessionId != 0 and SessionEpoch 1, 2, 3, ...).
3. Incremental fetches carry only what changed: after a Produce to 10 of the 1,000 partitions,
   the leader's answer names exactly those 10, and the follower's next Fetch names exactly
   those 10 (the only positions that moved); the answer to it names only those too. The leader
   then reads only those partitions of a follower's session (quorum/fetch_sessions), yet
   DescribeQuorum still reports the followers' latest fetch for the partitions left unnamed.

Leadership is made deterministic by giving node 1 a short election timeout (its timers fire in
[100, 200] ms) and nodes 2 and 3 a long one ([1000, 2000] ms); everything else is the same.
"""
from __future__ import annotations

import collections
import random
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.records import build_batch, iter_batch_headers
from kraftd.quorum.node import Node
from kraftd.quorum.node_wiring import NodeRuntime
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import NoResponse, Park, Respond
from kraftd.quorum.peer import Peer
from kraftd.quorum.raft.config import RaftConfig
from tests.sim.stores import Disk

CLUSTER_ID = "batched-rpcs-cluster-000"
TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0xB47C4ED0001)
PARTITIONS = 1000
VOTERS = (1, 2, 3)
PEERS = {1: (2, 3), 2: (1, 3), 3: (1, 2)}
FETCH_WAIT_MS = 500
PRODUCE_VERSION = 9
CLIENT = "client"


@dataclass(slots=True)
class Sent:
    """One message the pump carried, in the order it was sent."""

    seq: int
    now_ms: int
    source: Any          # node id or CLIENT
    destination: Any
    is_request: bool
    api_key: int
    api_version: int
    correlation_id: int
    body: Any


class Pump:
    """Delivers every message in FIFO order at the current time; no randomness, no loss.

    After anything happens on a node it plays the shell's part, as tests/sim/cluster.py does:
    persist the election states first (then the held sends are released), flush the logs, send
    what the outbox holds, answer parked requests whose completions came back."""

    def __init__(self, nodes: dict[int, Node], now_ms: int = 0) -> None:
        self.nodes = nodes
        self.now = now_ms
        self.queue: collections.deque[Sent] = collections.deque()
        self.sent: list[Sent] = []
        self.parked: dict[int, dict[int, tuple]] = {i: {} for i in nodes}
        self.client_answers: dict[int, Any] = {}
        self._client_correlation = 0

    def _post(self, source, destination, is_request, api_key, version, correlation, body) -> None:
        message = Sent(len(self.sent), self.now, source, destination, is_request, api_key, version, correlation,
                       body)
        self.sent.append(message)
        self.queue.append(message)

    def settle(self, node_id: int) -> None:
        node = self.nodes[node_id]
        now = self.now
        while True:
            done = node.poll(now)
            out = node.take_outbox(now)
            done += out.completions
            for send in out.sends:
                self._post(node_id, send.destination, True, send.api_key, send.api_version, send.correlation_id,
                           send.request)
            if out.persist:
                node.persist_election_states(out.persist)
            flushed = False
            for key, partition_log in node.logs_to_flush():
                done += node.on_flushed(key, partition_log.flush(), now)
                flushed = True
            for completion in done:
                source, api_key, version, correlation = self.parked[node_id].pop(completion.token)
                self._post(node_id, source, False, api_key, version, correlation, completion.response)
            if not (out.persist or out.sends or flushed or done):
                return

    def run(self) -> None:
        """Deliver until nothing is left in flight (parked requests stay parked)."""
        while self.queue:
            message = self.queue.popleft()
            if message.destination == CLIENT:
                self.client_answers[message.correlation_id] = message.body
                continue
            node_id = message.destination
            node = self.nodes[node_id]
            if message.is_request:
                client_id = f"node-{message.source}" if isinstance(message.source, int) else message.source
                header = m.RequestHeader(request_api_key=message.api_key, request_api_version=message.api_version,
                                         correlation_id=message.correlation_id, client_id=client_id)
                source = message.source if isinstance(message.source, int) else None
                outcome = node.handle(header, message.body, self.now, Peer(f"{client_id}:1", source))
                if isinstance(outcome, Respond):
                    self._post(node_id, message.source, False, message.api_key, message.api_version,
                               message.correlation_id, outcome.response)
                elif isinstance(outcome, Park):
                    self.parked[node_id][outcome.token] = (message.source, message.api_key, message.api_version,
                                                           message.correlation_id)
                else:
                    assert isinstance(outcome, NoResponse)
            else:
                node.on_response(message.source, message.correlation_id, message.body, self.now)
            self.settle(node_id)

    def tick(self, now_ms: int, only=None) -> None:
        """Move time to `now_ms`, let the nodes' timers fire (only those of `only`, if given)."""
        assert now_ms >= self.now
        self.now = now_ms
        for node_id in (only or self.nodes):
            self.settle(node_id)
        self.run()

    def client_request(self, node_id: int, api_key: int, version: int, request) -> int:
        self._client_correlation += 1
        self._post(CLIENT, node_id, True, api_key, version, self._client_correlation, request)
        self.run()
        return self._client_correlation

    # -- reading what was sent -------------------------------------------------------------
    def requests(self, api_key: int, since: int = 0, source=None, destination=None) -> list[Sent]:
        return [s for s in self.sent[since:] if s.is_request and s.api_key == api_key
                and (source is None or s.source == source) and (destination is None or s.destination == destination)]

    def response_to(self, request: Sent) -> Sent | None:
        for s in self.sent[request.seq + 1:]:
            if (not s.is_request and s.source == request.destination and s.destination == request.source
                    and s.correlation_id == request.correlation_id and s.api_key == request.api_key):
                return s
        return None


def make_node(node_id: int, election_timeout_ms: int) -> Node:
    disk = Disk(CLUSTER_ID)
    session_ids = iter(range(node_id * 1_000_000 + 1, 1 << 31))
    raft = RaftConfig(election_timeout_ms=election_timeout_ms, fetch_timeout_ms=2000, request_timeout_ms=2000,
                      fetch_max_wait_ms=FETCH_WAIT_MS)
    node = Node(NodeConfig(node_id=node_id, fsync_policy="acks_all", retention_check_interval_ms=10**9),
                disk.storage(),
                NodeRuntime(rng=random.Random(node_id), new_session_id=lambda: next(session_ids), raft_config=raft,
                            cluster_id=CLUSTER_ID))
    node.start(0)
    node.create_replicated_topic(TOPIC, TOPIC_ID, [VOTERS] * PARTITIONS, {}, 0)
    return node


def named(body) -> list[tuple]:
    """(topic name or id, partition) pairs a batched request or response names, in order."""
    out = []
    for topic in getattr(body, "topics", None) or getattr(body, "responses", None) or []:
        name = getattr(topic, "topic_name", None) or getattr(topic, "topic", None) or topic.topic_id
        for p in topic.partitions:
            index = p.partition_index if hasattr(p, "partition_index") else p.partition
            out.append((name, index))
    return out


def _view(records) -> memoryview:
    """A Fetch answer's records: the leader's log region as handed over in-process."""
    return records.view() if hasattr(records, "view") else memoryview(records)


def fetch_partitions(body) -> dict[int, Any]:
    """partition index -> FetchPartition / PartitionData of a Fetch request or response (one topic)."""
    out = {}
    for topic in getattr(body, "topics", None) or getattr(body, "responses", None) or []:
        assert topic.topic_id == TOPIC_ID
        for p in topic.partitions:
            out[p.partition if hasattr(p, "partition") else p.partition_index] = p
    return out


ALL = [(TOPIC, i) for i in range(PARTITIONS)]


@pytest.fixture
def cluster():
    """Three nodes; node 1's elections fire at t=201 ms, nodes 2 and 3 stay passive until ~1 s."""
    nodes = {1: make_node(1, 100), 2: make_node(2, 1000), 3: make_node(3, 1000)}
    pump = Pump(nodes)
    pump.tick(0)
    assert not pump.sent  # nobody's timer is due yet
    pump.tick(201, only=[1])
    return pump


def leaders(pump: Pump) -> dict:
    return {key: node_id for node_id, node in pump.nodes.items()
            for key, group in node.replication.groups.items() if group.is_leader}


def test_one_vote_request_per_peer_per_round_and_one_begin_epoch(cluster):
    pump = cluster
    assert leaders(pump) == {key: 1 for key in ALL}
    for node_id in (2, 3):
        assert {g.role.name for g in pump.nodes[node_id].replication.groups.values()} == {"Follower"}

    votes = pump.requests(api.VOTE)
    assert all(v.source == 1 for v in votes), "only node 1 stood"
    # Two rounds (KIP-996 pre-vote, then the vote at epoch 1): per round, ONE request per peer.
    pre, real = votes[:2], votes[2:]
    assert len(votes) == 4
    for round_, pre_vote, epoch in ((pre, True, 1), (real, False, 1)):
        assert sorted(v.destination for v in round_) == [2, 3]
        for v in round_:
            assert sorted(named(v.body)) == ALL  # all 1,000 groups in one request
            assert {(p.pre_vote, p.replica_epoch, p.replica_id) for t in v.body.topics for p in t.partitions} \
                == {(pre_vote, epoch, 1)}
            answer = pump.response_to(v)
            assert answer is not None and answer.body.error_code == 0
            assert sorted(named(answer.body)) == ALL
            assert all(p.vote_granted for t in answer.body.topics for p in t.partitions)
    # The vote round was sent only after every pre-vote answer that made it was in.
    assert pre[0].seq < real[0].seq

    begins = pump.requests(api.BEGIN_QUORUM_EPOCH)
    assert sorted(b.destination for b in begins) == [2, 3]
    assert all(b.source == 1 for b in begins)
    for b in begins:
        assert sorted(named(b.body)) == ALL
        assert {(p.leader_id, p.leader_epoch) for t in b.body.topics for p in t.partitions} == {(1, 1)}
    assert begins[0].seq > max(v.seq for v in real)

    # Nothing else was sent per group: the quorum RPCs of 1,000 groups took 6 requests in all.
    quorum = [s for s in pump.sent if s.is_request and s.api_key != api.FETCH]
    assert len(quorum) == 6


def _fetch_chain(pump: Pump, follower: int) -> list[Sent]:
    chain = pump.requests(api.FETCH, source=follower)
    assert {s.destination for s in chain} == {1}, "one stream, to the only leader"
    return chain


def _check_single_session(pump: Pump, follower: int) -> None:
    chain = _fetch_chain(pump, follower)
    first = chain[0]
    assert (first.body.session_id, first.body.session_epoch) == (0, 0)
    assert sorted(fetch_partitions(first.body)) == list(range(PARTITIONS))  # the full fetch: all 1,000
    session_id = pump.response_to(first).body.session_id
    assert session_id != 0
    for epoch, (request, following) in enumerate(zip(chain, chain[1:]), start=1):
        # At most one Fetch in flight per (follower, leader): the next goes out after the answer.
        answer = pump.response_to(request)
        assert answer is not None and answer.seq < following.seq
        assert answer.body.error_code == 0 and answer.body.session_id == session_id
        assert (following.body.session_id, following.body.session_epoch) == (session_id, epoch)
        assert following.body.forgotten_topics_data == []


def _quiesce(pump: Pump, rounds: int) -> None:
    """Let the long polls expire a few times, so every follower is idle in its session."""
    for _ in range(rounds):
        pump.tick(pump.now + FETCH_WAIT_MS)


def test_one_fetch_stream_per_leader_in_one_session(cluster):
    pump = cluster
    _quiesce(pump, 4)
    for follower in (2, 3):
        chain = _fetch_chain(pump, follower)
        assert len(chain) >= 4
        _check_single_session(pump, follower)
    # Every follower has caught up (the LeaderChange batch at offset 0) and the HW moved.
    for key in ALL:
        ends = {pump.nodes[i].topics.partition(*key).log.log_end_offset for i in VOTERS}
        hws = {pump.nodes[i].topics.partition(*key).high_watermark for i in VOTERS}
        assert ends == {1} and hws == {1}
    # Idle: the last incremental fetches name nothing and their answers carry nothing.
    for follower in (2, 3):
        last = _fetch_chain(pump, follower)[-2]
        assert named(last.body) == []
        assert named(pump.response_to(last).body) == []


def _produce(pump: Pump, partitions: list[int]) -> int:
    request = m.ProduceRequest(acks=-1, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[
            m.ProduceRequest.PartitionProduceData(
                index=i, records=memoryview(build_batch([(b"k%d" % i, b"v%d" % i, [], pump.now)])))
            for i in partitions])])
    return pump.client_request(1, api.PRODUCE, PRODUCE_VERSION, request)


def test_incremental_fetch_names_only_the_changed_partitions(cluster):
    pump = cluster
    _quiesce(pump, 4)
    # Every follower now has a long poll parked at the leader, naming nothing.
    outstanding = {f: _fetch_chain(pump, f)[-1] for f in (2, 3)}
    for f, request in outstanding.items():
        assert named(request.body) == [] and pump.response_to(request) is None

    changed = list(range(7, PARTITIONS, 100))  # 10 partitions
    assert len(changed) == 10
    mark = len(pump.sent)
    correlation = _produce(pump, changed)

    # The produce woke both long polls: the answers carry exactly the 10 partitions, with records.
    for f, request in outstanding.items():
        answer = pump.response_to(request)
        assert answer is not None and answer.seq >= mark
        data = fetch_partitions(answer.body)
        assert sorted(data) == changed
        for p in data.values():
            assert p.error_code == 0
            assert [h.base_offset for _, h in iter_batch_headers(_view(p.records))] == [1]

    _quiesce(pump, 2)
    for f in (2, 3):
        after = [s for s in _fetch_chain(pump, f) if s.seq >= mark]
        # The next incremental fetch (same session, next epoch) names exactly those 10, at their new
        # positions; nothing else moved, so nothing else is named.
        following = after[0]
        assert following.body.session_id == outstanding[f].body.session_id
        assert following.body.session_epoch == outstanding[f].body.session_epoch + 1
        asked = fetch_partitions(following.body)
        assert sorted(asked) == changed
        assert {(p.fetch_offset, p.last_fetched_epoch) for p in asked.values()} == {(2, 1)}
        # Its answer carries those 10 only: their high watermarks moved (no records are left).
        answer = fetch_partitions(pump.response_to(following).body)
        assert sorted(answer) == changed
        assert {(p.error_code, p.high_watermark, len(p.records or b"")) for p in answer.values()} == {(0, 2, 0)}
        # Then nothing changes any more: the stream is idle, requests and answers are empty.
        for request in after[1:]:
            assert named(request.body) == []
            response = pump.response_to(request)
            assert response is None or named(response.body) == []

    # acks=all: the produce was answered once a majority had the records durably.
    answer = pump.client_answers[correlation]
    results = {p.index: p for t in answer.responses for p in t.partition_responses}
    assert sorted(results) == changed
    assert {(p.error_code, p.base_offset) for p in results.values()} == {(0, 1)}
    for i in changed:
        for node_id in VOTERS:
            partition = pump.nodes[node_id].topics.partition(TOPIC, i)
            assert (partition.log.log_end_offset, partition.high_watermark) == (2, 2)
    untouched = pump.nodes[2].topics.partition(TOPIC, 8)
    assert (untouched.log.log_end_offset, untouched.high_watermark) == (1, 1)
    for f in (2, 3):
        _check_single_session(pump, f)

    # The leader's view of its followers stays current for partitions their fetches no longer
    # name (a session fetch counts for every partition it holds): DescribeQuorum says so.
    last_fetch = {f: _fetch_chain(pump, f)[-1].now_ms for f in (2, 3)}
    correlation = pump.client_request(1, api.DESCRIBE_QUORUM, 1, m.DescribeQuorumRequest(topics=[
        m.DescribeQuorumRequest.TopicData(topic_name=TOPIC, partitions=[
            m.DescribeQuorumRequest.PartitionData(partition_index=i) for i in (7, 8)])]))
    described = {p.partition_index: p for t in pump.client_answers[correlation].topics for p in t.partitions}
    for index, end in ((7, 2), (8, 1)):
        p = described[index]
        assert (p.error_code, p.leader_id, p.leader_epoch, p.high_watermark) == (0, 1, 1, end)
        followers = {v.replica_id: v for v in p.current_voters if v.replica_id != 1}
        assert {v: (s.log_end_offset, s.last_fetch_timestamp, s.last_caught_up_timestamp)
                for v, s in followers.items()} == {f: (end, last_fetch[f], last_fetch[f]) for f in (2, 3)}
