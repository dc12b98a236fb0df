"""Acceptance item 4: a consumer fetching below the log start of a snapshot topic gets
OFFSET_OUT_OF_RANGE (and, on Fetch v12+, the SnapshotId to load); a real client resets and reads
what follows the log start. (The served fixture's kv-0 log starts at its snapshot, 1000.)"""
import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from kraftd.protocol.errors import ErrorCode

from .wire import BIG, fetch


def test_raw_fetch_below_the_log_start(served):
    for version in (12, 13, 16):
        data = fetch(served.client, "kv", 0, 0, version=version)
        assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE, version
        assert (data.snapshot_id.end_offset, data.snapshot_id.epoch) == BIG
        assert data.log_start_offset == BIG.end_offset
        assert len(data.records) == 0
    for version in (4, 11):  # no SnapshotId field before v12: the error alone
        data = fetch(served.client, "kv", 0, BIG.end_offset - 1, version=version)
        assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE, version
        assert data.snapshot_id.end_offset == -1
        assert len(data.records) == 0
    at_start = fetch(served.client, "kv", 0, BIG.end_offset, version=12)
    assert at_start.error_code == 0 and at_start.snapshot_id.end_offset == -1 and len(at_start.records) > 0




def test_kafka_python_resets_to_earliest_and_reads_after_the_log_start(served):
    consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    tp = TopicPartition("kv", 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got, deadline = [], time.monotonic() + 30
        while len(got) < 3:
            assert time.monotonic() < deadline, f"got only {got}"
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key, r.value) for r in records]
        # The LeaderChange control batch at 1000 is not a record; the tail follows it.
        assert got == [(1001, b"key-00001", None), (1002, b"key-00002", b"new"), (1003, b"tail", b"t")]
        assert consumer.position(tp) == 1004
    finally:
        consumer.close()


def test_kafka_python_without_a_reset_policy_reports_out_of_range(served):
    consumer = KafkaConsumer(bootstrap_servers=served.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="none", fetch_max_wait_ms=100)
    tp = TopicPartition("kv", 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 5)
        deadline = time.monotonic() + 30
        with pytest.raises(OffsetOutOfRangeError):
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()


def test_kafka_python_recovers_after_the_server_moved_the_log_start_itself(kraftd):
    """The same, with the log start moved by a snapshot the server took (POST /admin/snapshot)."""
    from kraftd.client import WireClient

    from .wire import SNAPSHOT_POLICY, create_topic, http, put_many, wait_until

    client = WireClient(kraftd.bootstrap)
    create_topic(client, "kv", 1, SNAPSHOT_POLICY)
    put_many(client, "kv", 0, [(b"old-%d" % i, b"x") for i in range(100)])
    status, _ = http("POST", f"http://127.0.0.1:{kraftd.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    log_start = wait_until(lambda: fetch(client, "kv", 0, 0, version=11).log_start_offset, 20, "the log start")
    assert log_start > 100
    put_many(client, "kv", 0, [(b"new-%d" % i, b"y") for i in range(5)])
    data = fetch(client, "kv", 0, 0, version=12)
    assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and data.snapshot_id.end_offset == log_start
    client.close()

    consumer = KafkaConsumer(bootstrap_servers=kraftd.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    tp = TopicPartition("kv", 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got, deadline = [], time.monotonic() + 30
        while len(got) < 5:
            assert time.monotonic() < deadline, f"got only {got}"
            for records in consumer.poll(timeout_ms=200).values():
                got += [(r.offset, r.key) for r in records]
        assert [k for _, k in got] == [b"new-%d" % i for i in range(5)]
        assert all(offset >= log_start for offset, _ in got)
    finally:
        consumer.close()
