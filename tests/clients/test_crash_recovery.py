"""Acceptance 3: SIGKILL the server while an acks=all producer is sending; restart it on the
same port: every acknowledged record is there exactly once (at the offset it was acknowledged
at), the log is well formed and writable again, the leader epoch went up (Metadata v12 as seen
by kafka-python's cluster metadata and by a raw request), and consumers that were reading across
the crash neither lose nor repeat records."""
import logging
import threading
import time
from collections import defaultdict

import pytest

from tests.clients import helpers as h

pytestmark = pytest.mark.clients

PARTITIONS = 3
ACKED_BEFORE_KILL = 5_000
ACKED_AFTER_RESTART = 3_000
# librdkafka logs every refused reconnect during the outage: route it to logging (captured).
RDKAFKA_LOG = logging.getLogger("librdkafka")


class Load(threading.Thread):
    """acks=all producer thread: key k<seq>, round-robin partitions, until stopped; records
    which sends were acknowledged (partition, offset) and which failed."""

    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: dict[bytes, str] = {}
        self.produced = 0
        self.fatal = None
        self.unflushed = None

    def in_flight(self) -> int:
        return self.produced - len(self.acked) - len(self.failed)


class ConfluentLoad(Load):
    """confluent-kafka, acks=all, enable.idempotence=true."""

    def __init__(self, bootstrap, topic):
        super().__init__(bootstrap, topic)
        from confluent_kafka import Producer
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 60_000, "request.timeout.ms": 5_000,
            "retry.backoff.ms": 100, "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
        }, logger=RDKAFKA_LOG)

    def _cb(self, err, msg):
        if err is None:
            self.acked[msg.key()] = (msg.partition(), msg.offset())
        else:
            self.failed[msg.key()] = str(err)
            if err.fatal():
                self.fatal = str(err)

    def run(self):
        while not self.stop.is_set():
            key = b"k%07d" % self.produced
            try:
                self.producer.produce(self.topic, key=key, value=key * (1 + self.produced % 7),
                                      partition=self.produced % PARTITIONS, on_delivery=self._cb)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.produced += 1
            if self.produced % 50 == 0:
                self.producer.poll(0.001)   # serve callbacks; caps the rate at ~50k/s
        self.unflushed = self.producer.flush(70)


class KafkaPythonLoad(Load):
    """kafka-python 3.x KafkaProducer with default settings (idempotent, acks=all)."""

    def __init__(self, bootstrap, topic):
        super().__init__(bootstrap, topic)
        from kafka import KafkaProducer
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2,
                                      request_timeout_ms=5_000, delivery_timeout_ms=60_000,
                                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=500,
                                      max_block_ms=60_000)
        assert self.producer.config["enable_idempotence"] and self.producer.config["acks"] == -1

    def run(self):
        from kafka.errors import KafkaError
        futures = []
        while not self.stop.is_set():
            key = b"k%07d" % self.produced
            try:
                f = self.producer.send(self.topic, key=key, value=key * (1 + self.produced % 7),
                                       partition=self.produced % PARTITIONS)
            except KafkaError as e:           # e.g. buffer full for max_block_ms
                self.fatal = repr(e)
                break
            f.add_callback(lambda md, key=key: self.acked.__setitem__(key, (md.partition, md.offset)))
            f.add_errback(lambda e, key=key: self.failed.__setitem__(key, repr(e)))
            futures.append(f)
            self.produced += 1
            if self.produced % 50 == 0:
                time.sleep(0.001)
        self.producer.flush(70)
        self.unflushed = sum(1 for f in futures if not f.is_done)
        self.producer.close(5)


class KafkaPythonReader(threading.Thread):
    """assign + seek(0) on every partition; keeps polling across the crash."""

    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                      enable_auto_commit=False, auto_offset_reset="none",
                                      fetch_max_wait_ms=100, request_timeout_ms=5_000,
                                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=500)
        self.topic = topic
        self.stop = threading.Event()
        self.seen = defaultdict(list)   # partition -> [(offset, key)]
        self.errors = []

    def run(self):
        from kafka import TopicPartition
        tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, 0)
        try:
            while not self.stop.is_set():
                try:
                    batches = self.consumer.poll(timeout_ms=100, max_records=5000)
                except Exception as e:  # noqa: BLE001 - recorded and asserted on
                    self.errors.append(repr(e))
                    time.sleep(0.1)
                    continue
                for tp, recs in batches.items():
                    self.seen[tp.partition].extend((r.offset, r.key) for r in recs)
        finally:
            self.consumer.close()


class ConfluentReader(threading.Thread):
    """assign() at offset 0 on every partition (no subscribe, no commits) across the crash."""

    def __init__(self, bootstrap, topic):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftd-tests-unused",
                                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                                  "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
                                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500},
                                 logger=RDKAFKA_LOG)
        self.topic = topic
        self.stop = threading.Event()
        self.seen = defaultdict(list)
        self.errors = []

    def run(self):
        from confluent_kafka import KafkaError, TopicPartition
        transient = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._PARTITION_EOF,
                     KafkaError._RESOLVE, KafkaError._TIMED_OUT}
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
        try:
            while not self.stop.is_set():
                for msg in self.consumer.consume(num_messages=1000, timeout=0.1):
                    err = msg.error()
                    if err is None:
                        self.seen[msg.partition()].append((msg.offset(), msg.key()))
                    elif err.code() not in transient:
                        self.errors.append(str(err))
        finally:
            self.consumer.close()


def kafka_python_epochs(bootstrap, topic):
    """{partition: leader_epoch} from kafka-python's cluster metadata (Metadata v7+)."""
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, request_timeout_ms=10_000)
    try:
        parts = h.wait_until(lambda: consumer.partitions_for_topic(topic), 10, what="metadata")
        cluster = consumer._client.cluster
        return {p: cluster.leader_epoch_for_partition(TopicPartition(topic, p)) for p in parts}
    finally:
        consumer.close()


def read_all(bootstrap, topic):
    """The whole log after the fact, per partition: [(offset, key)] from offset 0 to the end."""
    out = {}
    for p in range(PARTITIONS):
        with h.RawClient(bootstrap) as raw:
            end = raw.fetch_batches(topic, p)[-1].last_offset + 1
        out[p] = [(g.offset, g.key) for g in _consume_to(bootstrap, topic, p, end)]
    return out


def _consume_to(bootstrap, topic, partition, end_offset, timeout=60.0):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=100)
    tp = TopicPartition(topic, partition)
    got = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end_offset:
            if time.monotonic() > deadline:
                raise h.ClientTimeout(f"read {len(got)} records of {topic}[{partition}] "
                                      f"up to {consumer.position(tp)} < {end_offset}")
            for recs in consumer.poll(timeout_ms=200, max_records=5000).values():
                got.extend(h.Got(r.offset, r.key, r.value, ()) for r in recs)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("producer", ["confluent", "kafka-python"])
def test_sigkill_mid_produce_keeps_acked_records_and_consumers_continue(kraftd_factory, producer):
    topic = "crash"
    server = kraftd_factory(env={"KRAFTD_DEFAULT_PARTITIONS": str(PARTITIONS)})
    with h.RawClient(server.bootstrap) as raw:
        from kraftd.protocol import messages as m
        raw.request(3, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                             allow_auto_topic_creation=True))
        raw_before = h.wait_until(lambda: raw.leader_epochs(topic), 10, what="topic")
    kp_before = kafka_python_epochs(server.bootstrap, topic)
    assert set(kp_before) == set(range(PARTITIONS))
    assert kp_before == {p: e for p, (_, e) in raw_before.items()}
    assert all(e >= 0 for e in kp_before.values()), f"no leader epochs in Metadata: {kp_before}"

    load = (ConfluentLoad if producer == "confluent" else KafkaPythonLoad)(server.bootstrap, topic)
    readers = [KafkaPythonReader(server.bootstrap, topic), ConfluentReader(server.bootstrap, topic)]
    for t in (load, *readers):
        t.start()
    try:
        h.wait_until(lambda: len(load.acked) >= ACKED_BEFORE_KILL, 60, what="acks before the crash")
        h.wait_until(lambda: all(sum(map(len, r.seen.values())) > 1000 for r in readers), 30,
                     what="readers to be reading")
        server.kill()                              # SIGKILL while the producer is sending
        acked_at_kill, in_flight_at_kill = dict(load.acked), load.in_flight()
        time.sleep(0.5)
        server.restart(crash=True)                 # same port, same data dir
        h.wait_until(lambda: len(load.acked) >= len(acked_at_kill) + ACKED_AFTER_RESTART, 90,
                     what="acks after the restart")
    finally:
        load.stop.set()
        load.join(80)
    assert not load.is_alive(), "producer did not finish flushing"
    assert load.fatal is None, f"idempotent producer hit a fatal error: {load.fatal}"
    assert load.unflushed == 0, f"{load.unflushed} records neither acked nor failed"
    assert in_flight_at_kill > 0, "the kill did not happen mid-produce"

    # Leader epochs went up, seen both by kafka-python (Metadata v7+) and a raw Metadata v12.
    kp_after = kafka_python_epochs(server.bootstrap, topic)
    with h.RawClient(server.bootstrap) as raw:
        raw_after = raw.leader_epochs(topic)
        batches = {p: raw.fetch_batches(topic, p) for p in range(PARTITIONS)}
    assert kp_after == {p: e for p, (_, e) in raw_after.items()}
    for p in range(PARTITIONS):
        assert kp_after[p] > kp_before[p], f"partition {p}: epoch {kp_before[p]} -> {kp_after[p]}"

    # The recovered log is well formed: contiguous batches, one more LeaderChange control batch
    # (written at the new epoch), data before it stamped with the old epoch, after it the new one.
    for p, bs in batches.items():
        assert bs[0].base_offset == 0
        assert all(a.last_offset + 1 == b.base_offset for a, b in zip(bs, bs[1:])), f"gap in {p}"
        controls = [i for i, b in enumerate(bs) if b.is_control]
        assert len(controls) == 2, f"partition {p}: control batches at {controls}"
        c0, c1 = controls
        assert bs[c0].leader_epoch == kp_before[p] and bs[c1].leader_epoch == kp_after[p]
        assert {b.leader_epoch for b in bs[c0:c1]} == {kp_before[p]}
        assert {b.leader_epoch for b in bs[c1:]} == {kp_after[p]}
        assert any(not b.is_control for b in bs[c1 + 1:]), f"partition {p}: no writes after restart"

    # Every acknowledged record is present exactly once, at its acknowledged offset.
    log = read_all(server.bootstrap, topic)
    where = defaultdict(list)
    for p, recs in log.items():
        for offset, key in recs:
            where[key].append((p, offset))
    missing = [k for k in load.acked if k not in where]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    dups = {k: v for k, v in where.items() if len(v) > 1}
    assert not dups, f"{len(dups)} records duplicated (idempotent producer), e.g. {list(dups.items())[:3]}"
    moved = {k: (where[k][0], pos) for k, pos in load.acked.items() if where[k][0] != pos}
    assert not moved, f"records not at their acknowledged offset: {list(moved.items())[:5]}"
    assert set(acked_at_kill) <= set(load.acked)
    unacked_present = set(where) - set(load.acked)
    assert not unacked_present - set(load.failed), "records in the log the producer never sent?"
    print(f"\n{producer}: produced {load.produced}, acked {len(load.acked)} ({len(acked_at_kill)} "
          f"before the kill, {in_flight_at_kill} in flight at the kill), failed {len(load.failed)} "
          f"({len(unacked_present)} of them in the log anyway), epochs {kp_before} -> {kp_after}")

    # Consumers that were reading across the crash continue without losing or repeating records.
    for r in readers:
        try:
            h.wait_until(lambda: all(r.seen[p] and r.seen[p][-1][0] >= log[p][-1][0]
                                     for p in range(PARTITIONS)), 60,
                         what=f"{type(r).__name__} to catch up")
        except h.ClientTimeout as e:
            reached = {p: r.seen[p][-1][0] if r.seen[p] else None for p in range(PARTITIONS)}
            ends = {p: log[p][-1][0] for p in range(PARTITIONS)}
            raise AssertionError(f"{e}: reached {reached}, log ends {ends}, errors {r.errors[:5]}\n"
                                 "server log tail:\n" + "\n".join(server.log_lines[-40:])) from None
        r.stop.set()
        r.join(15)
        assert not r.errors, f"{type(r).__name__} errors: {r.errors[:5]}"
        for p in range(PARTITIONS):
            assert r.seen[p] == log[p], (
                f"{type(r).__name__} partition {p}: saw {len(r.seen[p])} records, log has "
                f"{len(log[p])}; first difference at "
                f"{next((i for i, (a, b) in enumerate(zip(r.seen[p], log[p])) if a != b), None)}")
