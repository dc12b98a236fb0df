"""Acceptance 5: build-snapshot on 5M updates over 500k keys, over a stopped server's data dir,
equals kraftd's own snapshotter (KeyValueStateMachine, in process) at the same offset; kraftd
loads the file at its next start and StateReader downloads it with FetchSnapshot."""
import random
import shutil
import time

import pytest

from kraftd.client import StateReader
from kraftd.pipeline.jobs import JobError, build_snapshot
from kraftd.quorum.snapshots.state_machine import KeyValueStateMachine
from kraftd.storage.file_log import FileLog
from kraftd.storage.snapshots import SnapshotReader
from tests.support.kraftd_process import KraftdProcess

from .helpers import create_topics, produce_raw
from kraftd.pipeline.wire import LATEST_TIMESTAMP, KafkaWire

NO_AUTO_SNAPSHOT = {"cleanup.policy": "snapshot", "metadata.log.max.record.bytes.between.snapshots": str(1 << 60)}


def _updates(n: int, keys: int, seed: int = 5):
    rng = random.Random(seed)
    for i in range(n):
        k = rng.randrange(keys)
        value = None if rng.random() < 0.05 else b"v%d-%d" % (k, i)
        yield b"key-%08d" % k, value


@pytest.mark.long
def test_build_snapshot_5m_updates_500k_keys(spark, tmp_path):
    _check(spark, tmp_path, updates=5_000_000, keys=500_000)


def _check(spark, tmp_path, *, updates: int, keys: int):
    data = tmp_path / "data"
    times = {}
    started = time.monotonic()
    server = KraftdProcess(data, env={"KRAFTD_FSYNC_POLICY": "never"}).start()
    try:
        create_topics(server.bootstrap, {"kv": 1}, NO_AUTO_SNAPSHOT)
        # The fast path: kraftd-built batches of 1,000 records in acks=all Produce requests
        # (the updates need no real client; the round trip test has kafka-python's).
        produce_raw(server.bootstrap, "kv", 0, _updates(updates, keys))
        with KafkaWire(server.bootstrap) as wire:
            end = wire.list_offsets([("kv", 0)], LATEST_TIMESTAMP)[("kv", 0)][0]
        assert end >= updates
    finally:
        server.stop()
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    times["produce"] = time.monotonic() - started

    # kraftd's own snapshotter, in process, on the original data dir
    started = time.monotonic()
    log = FileLog(data / "kv-0")
    machine = KeyValueStateMachine()
    machine.catch_up(log, log.log_end_offset)
    x = machine.applied_offset
    epoch = log.epoch_cache.epoch_for_offset(x - 1)
    log.close()
    times["in-process state"] = time.monotonic() - started

    started = time.monotonic()
    result = build_snapshot(spark, str(copy), "kv", 0)
    times["build-snapshot local[2]"] = time.monotonic() - started
    assert tuple(result.snapshot_id) == (x, epoch)
    built = SnapshotReader.open(result.path)
    assert dict(built.items()) == machine.state
    assert built.last_contained_log_timestamp == machine.last_timestamp
    assert len(machine.state) == result.keys
    with pytest.raises(JobError, match="never replaces a snapshot"):
        build_snapshot(spark, str(copy), "kv", 0)

    # kraftd accepts the file and serves it through FetchSnapshot
    started = time.monotonic()
    server = KraftdProcess(copy, env={"KRAFTD_FSYNC_POLICY": "never"}).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            with StateReader(server.bootstrap, "kv", 0, tmp_path / "reader") as reader:
                reader.sync()
                if reader.snapshot_id is not None or time.monotonic() > deadline:
                    break
            shutil.rmtree(tmp_path / "reader")
            time.sleep(0.3)  # the log start moves to the snapshot just after the start
        assert tuple(reader.snapshot_id) == (x, epoch)
        assert reader.state == machine.state
    finally:
        server.kill()
    times["kraftd start + FetchSnapshot"] = time.monotonic() - started
    print(f"\n{updates} updates over {keys} keys: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items()))
