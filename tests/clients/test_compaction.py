"""Compacted topics with real clients (issue 26's acceptance): kafka-python, confluent-kafka and
the Java client each create a compacted topic, write 200,000 updates over 10,000 keys (1,000
keys deleted at the end, 1,000 deleted in the middle and written again), and read it back
from the beginning once the cleaner has run: one record per key with its latest value, at the
offset its write was acknowledged at; the tombstones until delete.retention.ms has passed
since the pass that kept them, then none."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.java_client import compile_driver, java_command
from tests.support.kraftd_process import KraftdProcess
from tests.support.waiting import wait_until

KEYS = 10_000
UPDATES = 200_000
DELETE_RETENTION_MS = 8_000
SEGMENT_MS = 1_000
CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "segment.bytes": str(1 << 20),
           "min.cleanable.dirty.ratio": "0.01", "max.compaction.lag.ms": "3000",
           "delete.retention.ms": str(DELETE_RETENTION_MS)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data",
                         env={"KRAFTD_LOG_CLEANER_BACKOFF_MS": "250"}).start()
    yield proc
    proc.kill()


def planned_writes() -> list[tuple[bytes, bytes | None]]:
    """Every key gets ~20 updates; keys 0-999 are deleted halfway and written again after;
    keys 9000-9999 are deleted by the last 1,000 writes."""
    writes = []
    for i in range(UPDATES - 1000):
        key = b"k%05d" % (i % KEYS)
        writes.append((key, None if 100_000 <= i < 101_000 else b"v%d" % i))
    writes += [(b"k%05d" % k, None) for k in range(KEYS - 1000, KEYS)]
    return writes


def latest_of(writes, offsets) -> list[tuple[int, bytes, bytes | None]]:
    last = {}
    for (key, value), offset in zip(writes, offsets):
        last[key] = (offset, key, value)
    return sorted(last.values())


# -- the three clients: create, write (returns each write's offset), read (offset, key, value) ------

class KafkaPython:
    def __init__(self, bootstrap, workdir):
        self.bootstrap = bootstrap

    def create(self, topic):
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1, 1, topic_configs=CONFIGS)])
        finally:
            admin.close()

    def write(self, topic, writes):
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5, batch_size=65536)
        try:
            futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in writes]
            producer.flush(120)
            return [f.get(timeout=60).offset for f in futures]
        finally:
            producer.close()

    def read(self, topic, end):
        return read_with_kafka_python(self.bootstrap, topic, end)


def read_with_kafka_python(bootstrap, topic, end):
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    out = []
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                out += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return out


class Confluent:
    def __init__(self, bootstrap, workdir):
        self.bootstrap = bootstrap

    def create(self, topic):
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=CONFIGS)])[topic].result(30)

    def write(self, topic, writes):
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        offsets = [None] * len(writes)
        errors = []

        def delivered(i):
            def report(err, msg):
                if err is not None:
                    errors.append(err)
                else:
                    offsets[i] = msg.offset()
            return report

        for i, (key, value) in enumerate(writes):
            while True:
                try:
                    producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivered(i))
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(120) == 0 and not errors, errors
        return offsets

    def read(self, topic, end):
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"read-{topic}",
                             "enable.auto.commit": False})
        out = []
        try:
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for msg in consumer.consume(1000, 0.2):
                    assert msg.error() is None, msg.error()
                    out.append((msg.offset(), msg.key(), msg.value()))
                if out and out[-1][0] >= end - 1:
                    break
        finally:
            consumer.close()
        return out


class Java:
    def __init__(self, bootstrap, workdir):
        self.bootstrap = bootstrap
        self.classes = compile_driver("CompactedTopic", workdir / "java")

    def _run(self, *args, stdin=None):
        done = subprocess.run(java_command("CompactedTopic", self.classes, *args), input=stdin,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and done.stdout.rstrip().endswith("done"), done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout.splitlines()

    def create(self, topic):
        self._run("create", self.bootstrap, topic, ",".join(f"{k}={v}" for k, v in CONFIGS.items()))

    def write(self, topic, writes):
        lines = "".join(f"{k.decode()} {'-' if v is None else v.decode()}\n" for k, v in writes)
        offsets = [None] * len(writes)
        for line in self._run("write", self.bootstrap, topic, stdin=lines):
            if line.startswith("acked "):
                _, i, offset = line.split()
                offsets[int(i)] = int(offset)
        return offsets

    def read(self, topic, end):
        out = []
        for line in self._run("read", self.bootstrap, topic, str(end)):
            if line.startswith("record "):
                _, offset, key, value = line.split(" ", 3)
                out.append((int(offset), key.encode(), None if value == "-" else value.encode()))
        return out


@pytest.mark.long
@pytest.mark.parametrize("client_class", [KafkaPython, Confluent, Java], ids=["kafka-python", "confluent", "java"])
def test_a_compacted_topic_reads_back_one_record_per_key_and_its_tombstones_go_after_delete_retention(
        server, tmp_path, client_class):
    client = client_class(server.bootstrap, tmp_path)
    topic = f"compacted-{client_class.__name__.lower()}"
    client.create(topic)
    writes = planned_writes()
    offsets = client.write(topic, writes)
    assert None not in offsets and offsets == sorted(offsets)
    # A record a segment.ms later rolls the active segment: everything before it is cleanable.
    time.sleep(SEGMENT_MS / 1000 + 0.2)
    writes.append((b"filler-1", b"x"))
    offsets += client.write(topic, writes[-1:])
    expected = latest_of(writes, offsets)
    assert len(expected) == KEYS + 1 and sum(v is None for _, _, v in expected) == 1000
    end = offsets[-1] + 1
    wait_until(lambda: read_with_kafka_python(server.bootstrap, topic, end) == expected, 60,
               "the cleaner leaves one record per key")
    assert client.read(topic, end) == expected  # the tombstones too: their delete horizon is ahead

    time.sleep(DELETE_RETENTION_MS / 1000 + 1)
    writes.append((b"filler-2", b"y"))  # rolls filler-1's segment: the next pass goes over the tombstones
    offsets += client.write(topic, writes[-1:])
    expected = [r for r in latest_of(writes, offsets) if r[2] is not None]
    assert len(expected) == KEYS - 1000 + 2
    end = offsets[-1] + 1
    wait_until(lambda: read_with_kafka_python(server.bootstrap, topic, end) == expected, 60,
               "the tombstones are gone after delete.retention.ms")
    assert client.read(topic, end) == expected
