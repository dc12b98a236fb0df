"""A builder-style context for driving the sans-IO Node in tests: no sockets, explicit time."""
from __future__ import annotations

import dataclasses
import uuid

from kraftd.protocol import messages as m
from kraftd.protocol.records import build_batch, decode_records
from kraftd.quorum.node import Node
from kraftd.server.node_files import open_node_on_files
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import NoResponse, Park, Respond
from kraftd.quorum.peer import Peer

START_MS = 1_700_000_000_000


class NodeTestContext:
    def __init__(self, node: Node, config: NodeConfig, now_ms: int, wall_clock=None) -> None:
        self.node = node
        self.wall_clock = wall_clock
        self.config = config
        self.now_ms = now_ms
        self.completions: dict[int, object] = {}
        self._correlation = 0

    @staticmethod
    def builder(data_dir) -> "NodeTestContextBuilder":
        return NodeTestContextBuilder(data_dir)

    # -- time and durability -------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._collect(self.node.poll(self.now_ms))

    def flush(self) -> None:
        """What the server's group-commit flusher does: election states first, then logs."""
        out = self.node.take_outbox(self.now_ms)
        if out.persist:
            self.node.persist_election_states(out.persist)
        for key, log in self.node.logs_to_flush():
            offset = log.flush()
            self._collect(self.node.on_flushed(key, offset, self.now_ms))
        self._collect(self.node.poll(self.now_ms))

    def run_jobs(self, error: BaseException | None = None) -> list:
        """What the shell's worker threads do: run each job the node hands out and report it
        done (with `error` instead, if given: the job failed). Returns the jobs."""
        jobs = self.node.jobs()
        for job in jobs:
            if error is None:
                job.run()
            self.node.on_job_done(job, self.now_ms, error)
        self._collect(self.node.poll(self.now_ms))
        return jobs

    def _collect(self, completions) -> None:
        for c in completions:
            self.completions[c.token] = c.response

    def restart(self) -> "NodeTestContext":
        self.node.close()
        node = open_node_on_files(self.config, self.now_ms, wall_clock=self.wall_clock)
        return NodeTestContext(node, self.config, self.now_ms, self.wall_clock)

    # -- requests ------------------------------------------------------------------------
    def deliver(self, request, version: int, api_key: int | None = None, *, client_id: str = "test",
                peer: str = "127.0.0.1:50000", node_id: int | None = None, principal: str = "User:ANONYMOUS"):
        """node.handle of `request`; `node_id`: sent over a connection authenticated as that node;
        `principal`: the connection's (a SASL login, a TLS client certificate)."""
        self._correlation += 1
        key = api_key if api_key is not None else type(request).API_KEY
        header = m.RequestHeader(request_api_key=key, request_api_version=version,
                                 correlation_id=self._correlation, client_id=client_id)
        outcome = self.node.handle(header, request, self.now_ms, Peer(peer, node_id, principal))
        self._collect(self.node.poll(self.now_ms))
        return outcome

    def respond(self, request, version: int, **kw):
        outcome = self.deliver(request, version, **kw)
        assert isinstance(outcome, Respond), f"expected an immediate response, got {outcome}"
        return outcome.response

    def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = 1, version: int = 9,
                timeout_ms: int = 30_000):
        request = m.ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
            m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                m.ProduceRequest.PartitionProduceData(index=partition, records=memoryview(batch))])])
        return self.deliver(request, version)

    def produce_ok(self, topic: str, partition: int, values, **kw):
        outcome = self.produce(topic, partition, batch_of(values), **kw)
        assert isinstance(outcome, Respond), outcome
        out = outcome.response.responses[0].partition_responses[0]
        assert out.error_code == 0, out
        return out

    def fetch_request(self, topic: str, partition: int, offset: int, *, version: int = 12, max_wait_ms: int = 0,
                      min_bytes: int = 1, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                      partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20):
        topic_id = self.node.topics.get(topic).topic_id if self.node.topics.get(topic) else None
        fetch_topic = m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=partition_max_bytes)])
        if topic_id is not None:
            fetch_topic.topic_id = topic_id
        return m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                              isolation_level=0, session_id=0, session_epoch=-1, topics=[fetch_topic])

    def fetch(self, topic: str, partition: int, offset: int, *, version: int = 12, **kw):
        response = self.respond(self.fetch_request(topic, partition, offset, version=version, **kw), version)
        return response.responses[0].partitions[0]

    def session_fetch_request(self, positions: dict, *, session_id: int = 0, session_epoch: int = -1,
                              forgotten=(), version: int = 12, replica_id: int = -1, max_wait_ms: int = 0,
                              min_bytes: int = 1, max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20,
                              current_leader_epoch: int = -1, last_fetched_epoch: int = -1):
        """A Fetch naming `positions` ({(topic, partition): offset}, in order) and forgetting
        `forgotten` ([(topic, partition)]), with explicit KIP-227 session metadata."""
        topics: list = []
        for (topic, partition), offset in positions.items():
            if not topics or topics[-1].topic != topic:
                topics.append(m.FetchRequest.FetchTopic(topic=topic, topic_id=self._topic_id(topic), partitions=[]))
            topics[-1].partitions.append(m.FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=partition_max_bytes))
        gone: dict = {}
        for topic, partition in forgotten:
            gone.setdefault(topic, []).append(partition)
        forgotten_data = [m.FetchRequest.ForgottenTopic(topic=t, topic_id=self._topic_id(t), partitions=ps)
                          for t, ps in gone.items()]
        return m.FetchRequest(replica_id=replica_id, replica_state=m.FetchRequest.ReplicaState(replica_id=replica_id),
                              max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
                              session_id=session_id, session_epoch=session_epoch, topics=topics,
                              forgotten_topics_data=forgotten_data)

    def session_fetch(self, positions: dict, *, version: int = 12, client_id: str = "test",
                      peer: str = "127.0.0.1:50000", principal: str = "User:ANONYMOUS", **kw):
        """One immediate Fetch response (see session_fetch_request); a replica id >= 0 is sent as
        that node (over a connection authenticated as it)."""
        request = self.session_fetch_request(positions, version=version, **kw)
        return self.respond(request, version, client_id=client_id, peer=peer, principal=principal,
                            node_id=_as_node(kw.get("replica_id", -1)))

    def earliest_offset(self, topic: str, partition: int) -> int:
        request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=-2)])])
        out = self.respond(request, 7).topics[0].partitions[0]
        assert out.error_code == 0, out
        return out.offset

    def _topic_id(self, topic: str):
        known = self.node.topics.get(topic)
        return known.topic_id if known is not None else uuid.UUID(int=0)

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None, version: int = 7):
        request = m.CreateTopicsRequest(timeout_ms=1000, validate_only=False, topics=[
            m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                  assignments=[], configs=[
                    m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in (configs or {}).items()])])
        return self.respond(request, version).topics[0]


class NodeTestContextBuilder:
    def __init__(self, data_dir) -> None:
        self._config = NodeConfig(data_dir=str(data_dir), fsync_policy="acks_all")
        self._topics: list[tuple[str, int, dict]] = []
        self._session_ids = None
        self._now = START_MS
        self._wall_clock = None
        self._off_loop = False

    def with_config(self, **overrides) -> "NodeTestContextBuilder":
        self._config = dataclasses.replace(self._config, **overrides)
        return self

    def with_session_ids(self, ids) -> "NodeTestContextBuilder":
        """Fetch session ids from `ids` instead of the CSPRNG (deterministic tests)."""
        self._session_ids = iter(ids)
        return self

    def with_wall_clock(self, read) -> "NodeTestContextBuilder":
        """Timestamps from `read()` (ms since the epoch) instead of the timer clock (now_ms)."""
        self._wall_clock = read
        return self

    def with_logs_opened_off_loop(self) -> "NodeTestContextBuilder":
        """A new topic's logs are opened by a job, as in the server (quorum/log_opening.py):
        the test runs it with `run_jobs()`."""
        self._off_loop = True
        return self

    def with_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> "NodeTestContextBuilder":
        self._topics.append((name, partitions, configs or {}))
        return self

    def build(self) -> NodeTestContext:
        ctx = NodeTestContext(open_node_on_files(self._config, self._now, wall_clock=self._wall_clock,
                                                 open_logs_off_loop=self._off_loop),
                              self._config, self._now, self._wall_clock)
        if self._session_ids is not None:
            ctx.node.fetch_sessions._new_id = self._session_ids.__next__
        for name, partitions, configs in self._topics:
            assert ctx.create_topic(name, partitions, configs).error_code == 0
        ctx.flush()
        return ctx


def _as_node(replica_id: int) -> int | None:
    return replica_id if replica_id >= 0 else None


def batch_of(values, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             timestamp: int = START_MS) -> bytes:
    records = [(None if v is None else f"k{i}".encode(), v if isinstance(v, (bytes, type(None))) else v.encode(),
                [], timestamp) for i, v in enumerate(values)]
    return build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


def values_in(partition_data, from_offset: int = 0) -> list[bytes]:
    """Decode the data records of a fetched partition as a client would: control batches and
    records below the fetch offset (whole batches come back) are skipped."""
    records = partition_data.records
    raw = records.view() if hasattr(records, "view") else records
    from kraftd.protocol.records import iter_batch_headers

    out = []
    buf = bytes(raw)
    for pos, header in iter_batch_headers(buf):
        if header.is_control:
            continue
        out += [bytes(r.value) for r in decode_records(buf[pos:pos + header.size], header)
                if r.offset >= from_offset]
    return out


MAX_SESSION_EPOCH = 0x7FFFFFFF


class FetchClient:
    """A consumer's fetcher over a NodeTestContext, tracking its session like Kafka's
    FetchSessionHandler.

    With `use_sessions` it keeps (session id, next epoch); a full fetch is (0, 0) or (id, 0); an
    incremental fetch names only partitions whose position changed since the server last heard of
    them and forgets unsubscribed ones. FETCH_SESSION_ID_NOT_FOUND → (0, 0) next; any other
    top-level error → (id, 0) (close and reopen). An incremental answer with session id 0 means
    the session ended. Without sessions every fetch is (0, -1) with every subscribed partition.

    Either way it accumulates `records[tp]` as [(offset, value)], advances its position past
    every returned batch (control batches included), resets to the earliest offset after
    OFFSET_OUT_OF_RANGE, and remembers the last high watermark / log start it was told.
    """

    def __init__(self, ctx: "NodeTestContext", *, client_id: str, use_sessions: bool = True, version: int = 12,
                 max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20, replica_id: int = -1,
                 peer: str = "127.0.0.1:50000") -> None:
        self.ctx = ctx
        self.client_id, self.peer = client_id, peer
        self.use_sessions, self.version, self.replica_id = use_sessions, version, replica_id
        self.max_bytes, self.partition_max_bytes = max_bytes, partition_max_bytes
        self.positions: dict = {}
        self._paused: dict = {}
        self.records: dict = {}
        self.high_watermark: dict = {}
        self.log_start: dict = {}
        self.session_id, self.epoch = 0, (0 if use_sessions else -1)
        self.session_partitions: dict = {}  # what the server's session knows: tp -> offset
        self.top_errors: list[int] = []
        self.unexpected: list = []
        self._expected: dict = {}
        self.lost_responses = 0
        self.last_response = None

    # -- subscription --------------------------------------------------------------------
    def subscribe(self, topic: str, partition: int, offset: int = 0) -> None:
        """Start fetching at `offset`, or where it left off if it was subscribed before."""
        tp = (topic, partition)
        self.positions.setdefault(tp, self._paused.pop(tp, offset))
        self.records.setdefault(tp, [])

    def unsubscribe(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        if tp in self.positions:
            self._paused[tp] = self.positions.pop(tp)

    # -- one fetch -----------------------------------------------------------------------
    def request(self, **kw):
        full = self.epoch in (0, -1)
        if full:
            wanted, forgotten = dict(self.positions), []
        else:
            wanted = {tp: pos for tp, pos in self.positions.items() if self.session_partitions.get(tp) != pos}
            forgotten = [tp for tp in self.session_partitions if tp not in self.positions]
        self.session_partitions = dict(self.positions)
        request = self.ctx.session_fetch_request(
            wanted, session_id=self.session_id, session_epoch=self.epoch, forgotten=forgotten, version=self.version,
            replica_id=self.replica_id, max_bytes=self.max_bytes, partition_max_bytes=self.partition_max_bytes, **kw)
        return request, full

    def poll(self, **kw):
        """Send one fetch and take in its (immediate) response."""
        request, full = self.request(**kw)
        response = self.ctx.respond(request, self.version, client_id=self.client_id, peer=self.peer,
                                    node_id=_as_node(self.replica_id))
        self.handle(response, full)
        return response

    def lose_response(self) -> None:
        """The request reaches the server but the answer is lost on the way back."""
        request, _ = self.request()
        self.ctx.respond(request, self.version, client_id=self.client_id, peer=self.peer,
                         node_id=_as_node(self.replica_id))
        self.lost_responses += 1

    def handle(self, response, full: bool) -> None:
        self.last_response = response
        self._expected = self.session_partitions  # what the answer may name (before any reset below)
        if response.error_code:
            self.top_errors.append(response.error_code)
            assert response.responses == [] and response.session_id == 0, response
            if response.error_code == 70:  # FETCH_SESSION_ID_NOT_FOUND
                self.session_id, self.epoch = 0, 0
            else:
                self.epoch = 0
            self.session_partitions = {}
            return
        if self.use_sessions:
            if response.session_id == 0:
                self.session_id, self.epoch = 0, 0
                self.session_partitions = {}
            elif full:
                self.session_id, self.epoch = response.session_id, 1
            else:
                assert response.session_id == self.session_id, (response.session_id, self.session_id)
                self.epoch = 1 if self.epoch >= MAX_SESSION_EPOCH else self.epoch + 1
        for topic in response.responses:
            name = topic.topic
            if self.version >= 13:
                name = self.ctx.node.topics.get_by_id(topic.topic_id).name
            for data in topic.partitions:
                self._take((name, data.partition_index), data)

    def _take(self, tp, data) -> None:
        if tp not in self._expected:
            self.unexpected.append(tp)  # neither asked for nor in the session
        if tp not in self.positions:
            return
        if data.error_code == 1:  # OFFSET_OUT_OF_RANGE: start again from the earliest offset
            self.positions[tp] = self.ctx.earliest_offset(*tp)
            return
        if data.error_code:
            return
        self.high_watermark[tp] = data.high_watermark
        self.log_start[tp] = data.log_start_offset
        from kraftd.protocol.records import iter_batch_headers

        raw = data.records.view() if hasattr(data.records, "view") else data.records
        buf = bytes(raw or b"")
        for pos, header in iter_batch_headers(buf):
            if header.last_offset < self.positions[tp]:
                continue
            if not header.is_control:
                self.records[tp] += [(r.offset, bytes(r.value)) for r in decode_records(buf[pos:pos + header.size], header)
                                     if r.offset >= self.positions[tp]]
            self.positions[tp] = header.last_offset + 1


__all__ = ["FetchClient", "NodeTestContext", "batch_of", "values_in", "NoResponse", "Park", "Respond", "START_MS"]
