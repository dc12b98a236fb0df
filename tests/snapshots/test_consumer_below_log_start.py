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
