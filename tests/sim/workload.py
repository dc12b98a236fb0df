"""Clients of the simulated cluster: idempotent producers (acks=all and acks=1), and what they
were told. A producer keeps one batch in flight per partition and retries it (same sequence)
until it is acknowledged, moving to another node when told NOT_LEADER_OR_FOLLOWER."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch

from .network import Message

PRODUCE_VERSION = 9
REQUEST_TIMEOUT_MS = 1500
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
             ErrorCode.LEADER_NOT_AVAILABLE}


def records_for(topic: str, compacted, seq: int, count: int, value_prefix: str, now_ms: int) -> list:
    """The records of a batch. A compacted topic's keys mostly come from a small set, so that the
    cleaner has old values to remove, and every 13th record is a tombstone (a null value); every
    5th record's key is the producer's own and written only twice (a value lost by a bad clean
    is not overwritten a moment later)."""
    if topic in compacted:
        return [_compacted_record(seq + i, value_prefix, now_ms) for i in range(count)]
    return [(f"k{seq + i}".encode(), f"{value_prefix}{seq + i}".encode(), [], now_ms) for i in range(count)]


def _compacted_record(n: int, value_prefix: str, now_ms: int) -> tuple:
    if n % 5 == 0:  # (the producer's own key: nobody else overwrites it)
        return f"r:{value_prefix}{n // 10}".encode(), f"{value_prefix}{n}".encode(), [], now_ms
    return f"k{n % 11}".encode(), None if n % 13 == 12 else f"{value_prefix}{n}".encode(), [], now_ms


class Producer:
    compacted: frozenset = frozenset()  # the topics with cleanup.policy=compact (set by the run)

    def __init__(self, name: str, producer_id: int, acks: int, topics: list, rng, every_ms: int) -> None:
        self.name = name
        self.producer_id = producer_id
        self.acks = acks
        self.rng = rng
        self.every_ms = every_ms
        self.partitions = [(t, 0, tuple(assign[0])) for t, _, assign in topics]
        self.next_seq = {p[:2]: 0 for p in self.partitions}
        self.epoch = {p[:2]: 0 for p in self.partitions}
        self.leader_guess = {p[:2]: p[2][0] for p in self.partitions}
        self.in_flight: dict = {}      # (topic, p) -> (correlation, seq, count, sent_ms, node)
        self.acked: list = []          # (topic, p, seq, count, offset) for acks=all
        self.correlation = 0
        self.errors: dict = {}
        self.active = True

    def tick(self, sim) -> None:
        now = sim.now
        for topic, index, replicas in self.partitions:
            key = (topic, index)
            flight = self.in_flight.get(key)
            if flight is not None and now - flight[3] < REQUEST_TIMEOUT_MS:
                continue
            if flight is not None:  # timed out: retry the same batch, maybe elsewhere
                self.leader_guess[key] = self.rng.choice(replicas)
                seq, count = flight[1], flight[2]
            elif self.active:
                seq, count = self.next_seq[key], self.rng.randint(1, 3)
            else:
                continue
            self._send(sim, key, seq, count)
        if self.active or self.in_flight:
            sim.at(now + self.every_ms, "client", self.name)

    def _send(self, sim, key, seq: int, count: int) -> None:
        topic, index = key
        records = records_for(topic, self.compacted, seq, count, f"{self.name}:", sim.now)
        idempotent = self.acks == -1
        batch = build_batch(records, producer_id=self.producer_id if idempotent else -1,
                            producer_epoch=self.epoch[key] if idempotent else -1,
                            base_sequence=seq if idempotent else -1)
        self.correlation += 1
        request = m.ProduceRequest(acks=self.acks, timeout_ms=REQUEST_TIMEOUT_MS, topic_data=[
            m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                m.ProduceRequest.PartitionProduceData(index=index, records=memoryview(batch))])])
        node = self.leader_guess[key]
        self.in_flight[key] = (self.correlation, seq, count, sim.now, node)
        sim.send(Message(self.name, node, True, api.PRODUCE, PRODUCE_VERSION, self.correlation, request))

    def on_response(self, sim, message: Message) -> None:
        out = message.body.responses[0].partition_responses[0]
        key = (message.body.responses[0].name, out.index)
        flight = self.in_flight.get(key)
        if flight is None or flight[0] != message.correlation_id:
            return
        del self.in_flight[key]
        _, seq, count, _, node = flight
        if out.error_code == 0:
            if self.acks == -1:
                self.acked.append((key[0], key[1], (self.epoch[key], seq), count, out.base_offset))
            self.next_seq[key] = seq + count
            return
        self.errors[out.error_code] = self.errors.get(out.error_code, 0) + 1
        replicas = next(p[2] for p in self.partitions if p[:2] == key)
        self.leader_guess[key] = self.rng.choice([r for r in replicas if r != node] or replicas)
        if out.error_code not in RETRIABLE and self.acks != -1:
            self.next_seq[key] = seq + count  # acks=1: give the batch up
        if self.acks == -1 and out.error_code in (ErrorCode.UNKNOWN_PRODUCER_ID,
                                                  ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER):
            # The partition forgot us (our state expired, or a replica that installed a snapshot
            # past our last batch leads): as the Java client does since KIP-360, bump the epoch
            # and start the sequence again at 0.
            self.epoch[key] += 1
            self.in_flight[key] = (flight[0], 0, count, sim.now - REQUEST_TIMEOUT_MS, node)
            return
        self.in_flight[key] = (flight[0], seq, count, sim.now - REQUEST_TIMEOUT_MS, node)  # retry at next tick


class PipelinedProducer:
    """An idempotent acks=all producer with up to `window` batches in flight per partition (the
    Java client's max.in.flight.requests.per.connection=5 with idempotence). Sequences are
    consecutive; when a batch fails, every batch after it is sent again in order (the leader
    answers those it already has as duplicates, with their first offsets). Only the oldest
    batch's UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER means the partition forgot the
    producer: then the epoch is bumped and the window numbered again from 0 (KIP-360)."""

    compacted: frozenset = frozenset()

    def __init__(self, name: str, producer_id: int, topics: list, rng, every_ms: int, window: int) -> None:
        self.name = name
        self.producer_id = producer_id
        self.rng = rng
        self.every_ms = every_ms
        self.window = window
        self.partitions = [(t, 0, tuple(assign[0])) for t, _, assign in topics]
        self.epoch = {p[:2]: 0 for p in self.partitions}
        self.next_seq = {p[:2]: 0 for p in self.partitions}
        self.leader_guess = {p[:2]: p[2][0] for p in self.partitions}
        # Per partition, oldest first: [seq, count, correlation or None (to send), sent_ms]
        self.pending: dict = {p[:2]: [] for p in self.partitions}
        self.acked: list = []
        self.correlation = 0
        self.by_correlation: dict = {}  # correlation -> (partition, seq, epoch)
        self.active = True
        self.max_in_flight_seen = 0

    @property
    def in_flight(self) -> bool:
        return any(self.pending.values())

    def tick(self, sim) -> None:
        for topic, index, replicas in self.partitions:
            key = (topic, index)
            pending = self.pending[key]
            if any(type(b[2]) is int and sim.now - b[3] >= REQUEST_TIMEOUT_MS for b in pending):
                self._resend_from(key, 0, replicas)  # a request timed out: the window again, in order
            while self.active and len(pending) < self.window:
                pending.append([self.next_seq[key], self.rng.randint(1, 3), None, 0])
                self.next_seq[key] += pending[-1][1]
            for batch in pending:
                if batch[2] is None:
                    self._send(sim, key, batch)
            sent = sum(1 for b in pending if type(b[2]) is int)
            self.max_in_flight_seen = max(self.max_in_flight_seen, sent)
            if sent > 1:
                sim.coverage["pipelined produce"] += 1
        if self.active or self.in_flight:
            sim.at(sim.now + self.every_ms, "client", self.name)

    def _send(self, sim, key, batch) -> None:
        seq, count = batch[0], batch[1]
        records = records_for(key[0], self.compacted, seq, count, f"{self.name}:{self.epoch[key]}:", sim.now)
        data = build_batch(records, producer_id=self.producer_id, producer_epoch=self.epoch[key], base_sequence=seq)
        self.correlation += 1
        request = m.ProduceRequest(acks=-1, timeout_ms=REQUEST_TIMEOUT_MS, topic_data=[
            m.ProduceRequest.TopicProduceData(name=key[0], partition_data=[
                m.ProduceRequest.PartitionProduceData(index=key[1], records=memoryview(data))])])
        batch[2], batch[3] = self.correlation, sim.now
        self.by_correlation[self.correlation] = (key, seq, self.epoch[key])
        sim.send(Message(self.name, self.leader_guess[key], True, api.PRODUCE, PRODUCE_VERSION, self.correlation,
                         request))

    def _resend_from(self, key, i: int, replicas) -> None:
        for batch in self.pending[key][i:]:
            batch[2] = None
        self.leader_guess[key] = self.rng.choice(replicas)

    def on_response(self, sim, message: Message) -> None:
        sent = self.by_correlation.pop(message.correlation_id, None)
        if sent is None:
            return
        key, seq, epoch = sent
        pending = self.pending[key]
        i = next((n for n, b in enumerate(pending) if b[0] == seq and b[2] == message.correlation_id), None)
        if i is None or epoch != self.epoch[key]:
            return  # an answer to a send we already gave up on
        out = message.body.responses[0].partition_responses[0]
        replicas = next(p[2] for p in self.partitions if p[:2] == key)
        if out.error_code == 0:
            if i == 0:
                self.acked.append((key[0], key[1], (epoch, seq), pending[0][1], out.base_offset))
                pending.pop(0)
                # Later batches acknowledged before it were held back: they follow in order now.
                while pending and pending[0][2] == "acked":
                    done = pending.pop(0)
                    self.acked.append((key[0], key[1], (epoch, done[0]), done[1], done[3]))
            else:
                pending[i][2], pending[i][3] = "acked", out.base_offset
            return
        if i == 0 and out.error_code in (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER):
            # The partition forgot us (see Producer.on_response): a new epoch, from 0.
            self.epoch[key] += 1
            seq = 0
            for batch in pending:
                batch[0], batch[2] = seq, None
                seq += batch[1]
            self.next_seq[key] = seq
            return
        self._resend_from(key, i, replicas)


FETCH_VERSION = 12  # by topic name, with CurrentLeaderEpoch, LastFetchedEpoch and DivergingEpoch


class Consumer:
    """Reads every group from its leader with KIP-320 epochs: CurrentLeaderEpoch from fencing
    answers, LastFetchedEpoch from the batches it consumed. What it read is checked against the
    committed log at the end; a DivergingEpoch below what it consumed means it read something
    that was not committed."""

    def __init__(self, name: str, topics: list, rng, every_ms: int = 29) -> None:
        self.name = name
        self.rng = rng
        self.every_ms = every_ms
        self.partitions = {(t, 0): tuple(assign[0]) for t, _, assign in topics}
        self.position = {k: (0, -1) for k in self.partitions}      # (offset, last fetched epoch)
        self.leader = {k: (replicas[0], -1) for k, replicas in self.partitions.items()}  # (node, epoch)
        self.consumed: dict = {k: {} for k in self.partitions}      # offset -> (key, value)
        self.in_flight: dict = {}
        self.correlation = 0
        self.problems: list[str] = []
        self.active = True

    def tick(self, sim) -> None:
        for key, replicas in self.partitions.items():
            flight = self.in_flight.get(key)
            if flight is not None and sim.now - flight[1] < REQUEST_TIMEOUT_MS:
                continue
            if flight is not None:
                self.leader[key] = (self.rng.choice(replicas), -1)
            offset, last_epoch = self.position[key]
            node, epoch = self.leader[key]
            self.correlation += 1
            request = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                     session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(
                                         topic=key[0], partitions=[m.FetchRequest.FetchPartition(
                                             partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                             last_fetched_epoch=last_epoch, log_start_offset=-1,
                                             partition_max_bytes=1 << 16)])])
            self.in_flight[key] = (self.correlation, sim.now, node)
            sim.send(Message(self.name, node, True, api.FETCH, FETCH_VERSION, self.correlation, request))
        if self.active or self.in_flight:
            sim.at(sim.now + self.every_ms, "client", self.name)

    def on_response(self, sim, message: Message) -> None:
        from kraftd.protocol.records import decode_records, iter_batch_headers
        topic = message.body.responses[0]
        data = topic.partitions[0]
        key = (topic.topic, data.partition_index)
        flight = self.in_flight.get(key)
        if flight is None or flight[0] != message.correlation_id:
            return
        del self.in_flight[key]
        node = flight[2]
        code = data.error_code
        if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH):
            leader = data.current_leader
            if leader.leader_id >= 0 and leader.leader_epoch >= self.leader[key][1]:
                self.leader[key] = (leader.leader_id, leader.leader_epoch)
            else:
                self.leader[key] = (self.rng.choice(self.partitions[key]), -1)
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if data.log_start_offset > self.position[key][0]:
                self.position[key] = (data.log_start_offset, -1)  # its state is in a snapshot now
            return
        if code != 0:
            return
        offset, _ = self.position[key]
        if data.diverging_epoch.end_offset >= 0:
            # KIP-320: our position is not on the leader's log. Below what we consumed, that
            # would mean we read records that were never committed.
            end = data.diverging_epoch.end_offset
            if end < offset:
                self.problems.append(f"{key}: diverged at {end}, below the consumed position {offset}")
            self.position[key] = (min(end, offset), data.diverging_epoch.epoch)
            return
        records = data.records
        view = records.view() if hasattr(records, "view") else memoryview(records or b"")
        for pos, h in iter_batch_headers(view):
            if h.last_offset < offset:
                continue
            if not h.is_control:
                for r in decode_records(view[pos:pos + h.size], h):
                    if r.offset >= offset:
                        self.consumed[key][r.offset] = (None if r.key is None else bytes(r.key),
                                                        None if r.value is None else bytes(r.value))
            self.position[key] = (h.next_offset, h.partition_leader_epoch)
            offset = h.next_offset
        if self.leader[key][0] != node:
            self.leader[key] = (node, self.leader[key][1])


CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 4
ADMIN_RETRIABLE = {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.INVALID_REPLICATION_FACTOR,
                   ErrorCode.LEADER_NOT_AVAILABLE}


class Admin:
    """Creates topics through random nodes (forwarded to the controller, placed, committed,
    hosted by the replicas the image names) and deletes every other one again, retrying each
    request until it succeeds, as an admin client does. Names are never reused."""

    def __init__(self, name: str, rng, replication_factor: int, every_ms: int = 700) -> None:
        self.name = name
        self.rng = rng
        self.replication_factor = replication_factor
        self.every_ms = every_ms
        self.created: list[str] = []       # committed creations, in order
        self.deleted: set[str] = set()     # committed deletions
        self.pending = None                # (kind, topic, correlation, sent_ms)
        self.correlation = 0
        self.active = True

    def tick(self, sim) -> None:
        if self.pending is not None and sim.now - self.pending[3] >= 3 * REQUEST_TIMEOUT_MS:
            self.pending = (*self.pending[:3], -1)  # timed out: send it again, maybe elsewhere
        if self.pending is not None and self.pending[3] >= 0:
            pass
        elif self.pending is not None:
            self._send(sim, *self.pending[:2])
        elif self.active:
            doomed = [t for i, t in enumerate(self.created) if i % 2 == 0 and t not in self.deleted]
            if doomed and self.rng.random() < 0.4:
                self._send(sim, "delete", doomed[0])
            else:
                self._send(sim, "create", f"a{len(self.created)}")
        if self.active or self.pending is not None:
            sim.at(sim.now + self.every_ms, "client", self.name)

    def _send(self, sim, kind: str, topic: str) -> None:
        self.correlation += 1
        node = self.rng.choice(list(sim.nodes))
        if kind == "create":
            request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
                name=topic, num_partitions=1, replication_factor=self.replication_factor, assignments=[],
                configs=[])], timeout_ms=2 * REQUEST_TIMEOUT_MS, validate_only=False)
            key, version = api.CREATE_TOPICS, CREATE_TOPICS_VERSION
        else:
            request = m.DeleteTopicsRequest(topic_names=[topic], timeout_ms=2 * REQUEST_TIMEOUT_MS)
            key, version = api.DELETE_TOPICS, DELETE_TOPICS_VERSION
        self.pending = (kind, topic, self.correlation, sim.now)
        sim.send(Message(self.name, node, True, key, version, self.correlation, request))

    def on_response(self, sim, message: Message) -> None:
        if self.pending is None or message.correlation_id != self.pending[2]:
            return
        kind, topic = self.pending[:2]
        results = message.body.topics if kind == "create" else message.body.responses
        error = results[0].error_code
        done = {"create": (0, ErrorCode.TOPIC_ALREADY_EXISTS),
                "delete": (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}[kind]
        if error in done:
            if kind == "create":
                self.created.append(topic)
            else:
                self.deleted.add(topic)
            self.pending = None
        else:
            if error not in ADMIN_RETRIABLE:
                sim.admin_problems.append(f"{kind} {topic}: unexpected error {error}")
            self.pending = (kind, topic, self.pending[2], -1)
