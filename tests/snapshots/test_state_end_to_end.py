"""Acceptance items 1 and 2: a snapshot-policy topic under a stream of updates (with deletes).

Snapshots appear per the policy (bytes between snapshots AND changed-records ratio), the log start
follows the latest snapshot, old segments and snapshots are deleted, and the state that a
StateReader loads (latest snapshot + log tail) equals a model dict, before and after a restart
(which loads snapshot + tail; its load time is observed in the kraftd_load_snapshot_latency_ms
histogram). The default suite runs the issue's full 1,000,000 updates over 50,000 keys.
"""
import os
import random
import time

import pytest

from kraftd.client import WireClient
from kraftd.protocol.errors import ErrorCode
from kraftd.storage.snapshots import parse_snapshot_filename

from .wire import (SNAPSHOT_POLICY, RecordingStateReader, create_topic, fetch, http, metrics, put_many,
                   random_updates, snapshot_state, wait_until)

MIB = 1 << 20
POLICY = {**SNAPSHOT_POLICY, "metadata.log.max.record.bytes.between.snapshots": str(MIB),
          "metadata.snapshot.min.changed_records.ratio": "0.5", "segment.bytes": str(MIB)}
KEYS = 50_000


def _labels(topic="kv", partition=0):
    return (("partition", str(partition)), ("topic", topic))


def _metric(server, name, default=None):
    return metrics(server).get((name, _labels()), default)


def _load_seconds(server):
    """LoadSnapshotLatencyMs: observed once at startup for this partition."""
    if _metric(server, "kraftd_load_snapshot_latency_ms_count") != 1:
        return None
    return _metric(server, "kraftd_load_snapshot_latency_ms_sum") / 1000.0


def _written(server) -> float:
    return metrics(server).get(("kraftd_snapshots_written_total", ()), 0.0)


def _segments(directory):
    return sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log"))


def _snapshot_ids(directory):
    return sorted(sid for n in os.listdir(directory) if (sid := parse_snapshot_filename(n)))


def _settled(server, directory, hw):
    """After a requested snapshot: it covers the HW, it is the only one, nothing is half-written."""
    names = os.listdir(directory)
    ids = _snapshot_ids(directory)
    return (len(ids) == 1 and ids[0].end_offset == hw
            and not any(n.endswith(".part") or n.endswith(".deleted") for n in names)
            and _metric(server, "kraftd_snapshot_end_offset") == hw)


def run_updates(kraftd_factory, tmp_path, updates: int, report: dict):
    server = kraftd_factory()
    directory = server.data_dir / "kv-0"
    client = WireClient(server.bootstrap)
    create_topic(client, "kv", 1, POLICY)
    rng = random.Random(20)
    model: dict = {}
    seen_snapshots, log_starts = set(), []
    started = time.monotonic()
    pending = list(random_updates(rng, updates, KEYS, delete_ratio=0.1, value_size=20))
    step = 20_000
    for i in range(0, len(pending), step):
        put_many(client, "kv", 0, pending[i:i + step], per_batch=2000, model=model)
        seen_snapshots.update(_snapshot_ids(directory))
        log_starts.append(fetch(client, "kv", 0, 0, version=11).log_start_offset)
    report["produce_s"] = time.monotonic() - started
    hw = fetch(client, "kv", 0, 0, version=4).high_watermark  # any offset: OOR answers carry the HW
    log_bytes = sum(os.path.getsize(directory / n) for n in os.listdir(directory) if n.endswith(".log"))

    # -- snapshots appeared per the policy while we produced --------------------------------
    wait_until(lambda: not list(directory.glob("*.part")), 30, "the running snapshot job")
    written = _written(server)
    report["snapshots_during_produce"] = written
    total_log_bytes = updates * 40  # ≈ bytes per record in the log, checked below
    assert 3 <= written <= total_log_bytes / MIB + 1, (written, total_log_bytes)
    assert len(seen_snapshots) >= 2
    # The log start moved up with the snapshots, never down, and only to snapshot end offsets.
    assert log_starts == sorted(log_starts) and log_starts[-1] > 0
    ends = {sid.end_offset for sid in seen_snapshots}
    assert {s for s in log_starts if s > 0} <= ends
    # Every snapshot is at least 1 MiB of log after the previous one (the bytes condition).
    offsets = sorted(ends)
    bytes_per_offset = log_bytes / max(1, hw - log_starts[-1]) if hw > log_starts[-1] else 30
    for a, b in zip(offsets, offsets[1:]):
        assert (b - a) * bytes_per_offset >= 0.9 * MIB, (a, b, bytes_per_offset)

    # -- the state a reader loads from the latest snapshot + tail is the model ----------------
    t = time.monotonic()
    with RecordingStateReader(server.bootstrap, "kv", 0, tmp_path / "reader1", chunk_bytes=256 << 10) as reader:
        reader.sync(timeout=60)
        assert reader.snapshot_id is not None and reader.chunks, "the reader should start from a snapshot"
        assert reader.state == model
    report["reader_sync_s"] = time.monotonic() - t

    # -- a requested snapshot at the HW: only it remains, the log starts at it ----------------
    status, _ = http("POST", f"http://127.0.0.1:{server.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    wait_until(lambda: _settled(server, directory, hw), 30, "the requested snapshot at the HW")
    (latest,) = _snapshot_ids(directory)
    assert snapshot_state(next(directory.glob("*.checkpoint"))) == model
    data = fetch(client, "kv", 0, 0, version=12)
    assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert data.log_start_offset == latest.end_offset == hw
    assert (data.snapshot_id.end_offset, data.snapshot_id.epoch) == latest
    segments = _segments(directory)
    assert segments[0] > 0  # the first segments are gone ...
    assert len(segments) == 1 or segments[1] > latest.end_offset  # ... all wholly below the log start
    client.close()

    # -- restart: the server loads snapshot + tail -------------------------------------------
    client = WireClient(server.bootstrap)
    tail: list = list(random_updates(rng, 3000, KEYS, delete_ratio=0.1))
    put_many(client, "kv", 0, tail, per_batch=1000, model=model)
    client.close()
    t = time.monotonic()
    server.restart(crash=True)
    report["restart_s"] = time.monotonic() - t  # includes process start; the load alone is a metric
    load_s = _load_seconds(server)
    assert load_s is not None and 0 < load_s < report["restart_s"]
    report["server_load_s"] = load_s
    with RecordingStateReader(server.bootstrap, "kv", 0, tmp_path / "reader2") as reader:
        reader.sync(timeout=60)
        assert reader.snapshot_id == latest
        assert reader.state == model
    # The server's own state (not just its files) is the model: a snapshot of it says so.
    hw2 = _metric(server, "kraftd_snapshot_lag") + latest.end_offset
    status, _ = http("POST", f"http://127.0.0.1:{server.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    wait_until(lambda: _settled(server, directory, hw2), 30, "the snapshot after the restart")
    assert snapshot_state(next(directory.glob("*.checkpoint"))) == model
    report["total_s"] = time.monotonic() - started
    return report


def test_restart_reports_the_snapshot_load_time(kraftd_factory):
    server = kraftd_factory()
    client = WireClient(server.bootstrap)
    create_topic(client, "kv", 1, SNAPSHOT_POLICY)
    put_many(client, "kv", 0, random_updates(random.Random(3), 20_000, 5_000), per_batch=2000)
    client.close()
    status, _ = http("POST", f"http://127.0.0.1:{server.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    wait_until(lambda: _metric(server, "kraftd_snapshot_end_offset", 0) > 0, 30, "the snapshot")
    server.restart()
    load_s = _load_seconds(server)
    assert load_s is not None and 0 < load_s < 30


def test_1m_updates_snapshots_log_start_and_state(kraftd_factory, tmp_path):
    report = run_updates(kraftd_factory, tmp_path, 1_000_000, {})
    print("1M updates:", {k: round(v, 2) for k, v in report.items()})
