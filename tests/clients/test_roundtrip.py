"""Acceptance 1: every real client produces 10,000 keyed records with headers, once per codec,
and the same client's consumer (assign + seek, no groups) reads back exactly the same keys,
values, headers and order.  One topic per (client, codec); one server for the module."""
import zlib

import pytest

from tests.clients import helpers as h

pytestmark = pytest.mark.clients

N = 10_000
# A fresh topic's offset 0 holds the LeaderChange control batch: data starts at offset 1.
FIRST = 1


def _check_batches(server, topic, codec, n, *, idempotent):
    """On the wire: every data batch carries the codec the client asked for, the records are
    all there, and (for idempotent producers) one producer id with contiguous sequences."""
    with h.RawClient(server.bootstrap) as raw:
        batches = raw.fetch_batches(topic)
    control = [b for b in batches if b.is_control]
    data = [b for b in batches if not b.is_control]
    assert control and control[0].base_offset == 0
    assert sum(b.count for b in data) == n
    # Clients send a batch uncompressed when compression does not shrink it (librdkafka also
    # for small batches), so a codec need not be on every batch: it must be on some, and no
    # batch may carry another codec.
    codecs = [b.codec for b in data]
    assert set(codecs) <= {0, h.CODEC_IDS[codec]}, f"batch codecs {sorted(set(codecs))}"
    if codec != "none" and h.CODEC_IDS[codec] not in codecs:
        raise AssertionError(
            f"asked for {codec} but every batch arrived uncompressed "
            f"(codec, count, bytes): {[(b.codec, b.count, b.length) for b in data][:8]}. "
            "librdkafka decides from ApiVersions whether the broker 'supports' a codec: LZ4 needs "
            "FindCoordinator (key 10) v0 listed; gzip/snappy/lz4 in older librdkafka (kcat's 2.0.2) need Produce v0 "
            "listed (Apache Kafka 4 lists Produce 0..N for this reason, KAFKA-18659)")
    assert all(b.magic == 2 for b in batches)
    pids = {b.producer_id for b in data}
    if idempotent:
        (pid,) = pids
        assert pid >= 0
        seqs = [(b.base_sequence, b.count) for b in data]
        assert seqs[0][0] == 0
        assert all(s1 + c1 == s2 for (s1, c1), (s2, _) in zip(seqs, seqs[1:])), "sequence gap"
        return pid
    assert pids == {-1}
    return -1


@pytest.mark.parametrize("codec", h.CODECS)
def test_kafka_python_roundtrip(shared_kraftd, codec):
    topic = f"kp-{codec}"
    records = h.make_records(N, seed=zlib.crc32(topic.encode()))
    offsets, facts = h.kafka_python_produce(shared_kraftd.bootstrap, topic, records, codec=codec)
    # kafka-python 3.x: KafkaProducer() with default settings is idempotent with acks=all.
    assert facts["enable_idempotence"] is True and facts["acks"] == -1
    assert facts["producer_id"] >= 0, facts
    assert offsets == list(range(FIRST, FIRST + N))
    got = h.kafka_python_consume(shared_kraftd.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)
    assert _check_batches(shared_kraftd, topic, codec, N, idempotent=True) == facts["producer_id"]


@pytest.mark.parametrize("codec", h.CODECS)
def test_confluent_roundtrip(shared_kraftd, codec):
    topic = f"ck-{codec}"
    records = h.make_records(N, seed=zlib.crc32(topic.encode()))
    offsets = h.confluent_produce(shared_kraftd.bootstrap, topic, records, codec=codec)
    assert offsets == list(range(FIRST, FIRST + N))
    got = h.confluent_consume(shared_kraftd.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)
    _check_batches(shared_kraftd, topic, codec, N, idempotent=False)


@pytest.mark.parametrize("codec", h.CODECS)
def test_aiokafka_roundtrip(shared_kraftd, codec):
    topic = f"aio-{codec}"
    records = h.make_records(N, seed=zlib.crc32(topic.encode()))
    offsets = h.aiokafka_produce(shared_kraftd.bootstrap, topic, records, codec=codec)
    assert offsets == list(range(FIRST, FIRST + N))
    got = h.aiokafka_consume(shared_kraftd.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)
    _check_batches(shared_kraftd, topic, codec, N, idempotent=False)


@pytest.mark.parametrize("codec", h.CODECS)
def test_kcat_roundtrip(shared_kraftd, codec):
    topic = f"kcat-{codec}"
    # kcat -H headers are static per invocation: every record carries the same two headers.
    headers = (("source", b"kcat"), ("codec", codec.encode()))
    records = h.make_text_records(N, seed=zlib.crc32(topic.encode()), headers=headers)
    h.kcat_produce(shared_kraftd.bootstrap, topic, records, codec=codec)
    got = h.kcat_consume(shared_kraftd.bootstrap, topic)
    h.assert_same(got, records, first_offset=FIRST)
    _check_batches(shared_kraftd, topic, codec, N, idempotent=False)
