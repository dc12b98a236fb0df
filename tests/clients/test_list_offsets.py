"""Acceptance 2: ListOffsets earliest / latest / by timestamp agree with what was produced
(kafka-python: beginning_offsets, end_offsets, offsets_for_times; confluent-kafka:
get_watermark_offsets, offsets_for_times, AdminClient.list_offsets incl. max-timestamp).

Offset 0 of a fresh partition is the LeaderChange control batch (clients skip it), so data
starts at offset 1 and "earliest" (the log start offset) is 0.
"""
import time

import pytest

from tests.clients import helpers as h

pytestmark = pytest.mark.clients

N = 30          # records, produced in 3 separate requests (3 batches) of 10
SPACING = 1000  # ms between record timestamps
FIRST = 1       # first data offset


def _prepare(server, topic, produce):
    """Create the topic, then produce N records whose timestamps start 15 s after creation
    (clearly after the control batch's timestamp) and are SPACING ms apart."""
    with h.RawClient(server.bootstrap) as raw:
        from kraftd.protocol import messages as m
        raw.request(3, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                             allow_auto_topic_creation=True))
        h.wait_until(lambda: raw.leader_epochs(topic), 10, what=f"{topic} to exist")
    base = int(time.time() * 1000) + 15_000
    ts = [base + SPACING * i for i in range(N)]
    records = h.make_records(N, seed=7)
    offsets = []
    for lo in range(0, N, 10):
        offsets += produce(server.bootstrap, topic, records[lo:lo + 10], ts[lo:lo + 10])
    assert offsets == list(range(FIRST, FIRST + N))
    return records, ts


def _kp_produce(bootstrap, topic, records, ts):
    return h.kafka_python_produce(bootstrap, topic, records, timestamps=ts)[0]


def _ck_produce(bootstrap, topic, records, ts):
    return h.confluent_produce(bootstrap, topic, records, timestamps=ts)


def check_kafka_python(bootstrap, topic, ts, *, end):
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, request_timeout_ms=10_000)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: end}

        def at(t):
            return consumer.offsets_for_times({tp: t})[tp]

        for i in (0, 1, 9, 10, 11, 19, 20, N - 1):   # exact timestamps, batch edges included
            r = at(ts[i])
            assert (r.offset, r.timestamp) == (FIRST + i, ts[i]), f"timestamp of record {i}"
        for i in (0, 9, 15, N - 2):                   # between record i and i + 1
            r = at(ts[i] + SPACING // 2)
            assert (r.offset, r.timestamp) == (FIRST + i + 1, ts[i + 1]), f"between {i} and {i + 1}"
        r = at(ts[0] - 5_000)                         # before the first record, after creation
        assert (r.offset, r.timestamp) == (FIRST, ts[0])
        assert at(ts[-1] + 1) is None                 # after the last record
        assert at(ts[-1] + 3_600_000) is None
    finally:
        consumer.close()


def check_confluent(bootstrap, topic, ts, *, end):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING, OFFSET_END
    from confluent_kafka.admin import AdminClient, OffsetSpec

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kraftd-tests-unused",
                         "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10,
                                              cached=False) == (0, end)

        def at(t):
            (r,) = consumer.offsets_for_times([TopicPartition(topic, 0, t)], timeout=10)
            assert r.error is None, r.error
            return r.offset

        for i in (0, 1, 9, 10, 11, 19, 20, N - 1):
            assert at(ts[i]) == FIRST + i, f"timestamp of record {i}"
        for i in (0, 9, 15, N - 2):
            assert at(ts[i] + SPACING // 2) == FIRST + i + 1, f"between {i} and {i + 1}"
        assert at(ts[0] - 5_000) == FIRST
        assert at(ts[-1] + 1) == -1                   # after the last record: OFFSET_END (-1)
        assert at(ts[-1] + 3_600_000) == -1
        assert at(OFFSET_BEGINNING) == 0              # -2: earliest
        assert at(OFFSET_END) == end                  # -1: latest
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    for spec, want_offset, want_ts in [
        (OffsetSpec.earliest(), 0, None),
        (OffsetSpec.latest(), end, None),
        (OffsetSpec.for_timestamp(ts[12]), FIRST + 12, ts[12]),
        (OffsetSpec.for_timestamp(ts[12] + 1), FIRST + 13, ts[13]),
        (OffsetSpec.for_timestamp(ts[-1] + 1), -1, None),
        (OffsetSpec.max_timestamp(), FIRST + N - 1, ts[-1]),   # KIP-734 (ListOffsets v7+)
    ]:
        info = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=15)
        assert info.offset == want_offset, f"{spec}: offset {info.offset} != {want_offset}"
        if want_ts is not None:
            assert info.timestamp == want_ts, f"{spec}: timestamp {info.timestamp} != {want_ts}"


@pytest.mark.parametrize("crash", [True, False], ids=["sigkill", "sigterm"])
def test_list_offsets_after_restart(kraftd_factory, crash):
    """The time index is rebuilt/recovered: the same answers after a restart, except that the
    restart appended one more LeaderChange control batch (latest = previous latest + 1)."""
    server = kraftd_factory()
    topic = "lo-restart"
    records, ts = _prepare(server, topic, _kp_produce)
    check_kafka_python(server.bootstrap, topic, ts, end=FIRST + N)
    server.restart(crash=crash)
    check_kafka_python(server.bootstrap, topic, ts, end=FIRST + N + 1)
    check_confluent(server.bootstrap, topic, ts, end=FIRST + N + 1)
    got = h.kafka_python_consume(server.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)


def test_kafka_python_list_offsets(shared_kraftd):
    from kafka import KafkaConsumer, TopicPartition

    topic = "lo-kafka-python"
    records, ts = _prepare(shared_kraftd, topic, _kp_produce)
    got = h.kafka_python_consume(shared_kraftd.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)
    assert [g.timestamp for g in got] == ts, "CreateTime timestamps not preserved"

    check_kafka_python(shared_kraftd.bootstrap, topic, ts, end=FIRST + N)


def test_confluent_list_offsets(shared_kraftd):
    from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING, OFFSET_END
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic = "lo-confluent"
    records, ts = _prepare(shared_kraftd, topic, _ck_produce)
    got = h.confluent_consume(shared_kraftd.bootstrap, topic, N)
    h.assert_same(got, records, first_offset=FIRST)
    assert [g.timestamp for g in got] == ts, "CreateTime timestamps not preserved"

    check_confluent(shared_kraftd.bootstrap, topic, ts, end=FIRST + N)
