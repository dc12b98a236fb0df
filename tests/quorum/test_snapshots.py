"""KIP-630 in the core: when to snapshot, log start advancement, loading, fetch redirection."""
import random

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from kraftd.server.node_files import open_node_on_files
from kraftd.quorum.snapshots.partition_snapshots import SnapshotInvariantError
from kraftd.storage.snapshots import SnapshotStore

from .node_context import START_MS, NodeTestContext

SMALL = {"cleanup.policy": "snapshot", "metadata.log.max.record.bytes.between.snapshots": "20000",
         "metadata.snapshot.min.changed_records.ratio": "0.5", "segment.bytes": "16384"}


def run_snapshot_jobs(ctx) -> list:
    done = []
    for job in ctx.node.snapshots.jobs():
        job.run()
        ctx.node.on_snapshot_done(job, ctx.now_ms)
        done.append(job)
    return done


def put(ctx, model, pairs):
    batch = build_batch([(k, v, [], START_MS) for k, v in pairs])
    out = ctx.produce("kv", 0, batch).response.responses[0].partition_responses[0]
    assert out.error_code == 0
    for k, v in pairs:
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    ctx.flush()


@pytest.fixture
def ctx(tmp_path):
    return NodeTestContext.builder(tmp_path).with_topic("kv", configs=SMALL).build()


def test_snapshots_follow_the_policy_and_the_log_start_follows_them(ctx, tmp_path):
    rng = random.Random(7)
    model: dict = {}
    snapshots_taken = []
    for round_ in range(60):
        pairs = [(b"k%d" % rng.randrange(200), None if rng.random() < 0.1 else b"v%d" % round_ * 10)
                 for _ in range(50)]
        put(ctx, model, pairs)
        snapshots_taken += run_snapshot_jobs(ctx)
    assert len(snapshots_taken) >= 3
    partition = ctx.node.topics.partition("kv", 0)
    snapshots = ctx.node.snapshots[("kv", 0)]
    latest = snapshots.latest
    assert partition.log_start_offset == latest.end_offset > 0
    assert SnapshotStore(tmp_path / "kv-0").ids() == [latest]  # older snapshots are gone
    assert snapshots.machine.state == model
    # The state from the latest snapshot plus the log after it equals the model.
    from kraftd.quorum.snapshots.state_machine import KeyValueStateMachine
    reader = SnapshotStore(tmp_path / "kv-0").reader(latest)
    rebuilt = KeyValueStateMachine()
    rebuilt.load(reader.items(), latest.end_offset, reader.last_contained_log_timestamp)
    rebuilt.catch_up(partition.log, partition.high_watermark)
    assert rebuilt.state == model
    ctx = ctx.restart()
    assert ctx.node.snapshots[("kv", 0)].machine.state == model


def test_no_snapshot_until_both_conditions_hold(ctx):
    model: dict = {}
    put(ctx, model, [(b"a", b"x" * 30000)])  # bytes threshold met, no snapshot yet: ratio counts as met
    assert len(run_snapshot_jobs(ctx)) == 1
    # New keys only: bytes pass the threshold but no snapshot record changed (ratio 0).
    put(ctx, model, [(b"new%d" % i, b"y" * 1000) for i in range(30)])
    assert run_snapshot_jobs(ctx) == []
    put(ctx, model, [(b"a", b"z")])  # the one snapshot record changed: ratio 1.0
    assert len(run_snapshot_jobs(ctx)) == 1


def test_requested_snapshot_and_delete_records_policy(ctx):
    put(ctx, {}, [(b"a", b"1")])
    assert ctx.node.snapshots.request("kv", 0)
    (job,) = run_snapshot_jobs(ctx)
    assert ctx.node.topics.partition("kv", 0).log_start_offset == job.snapshot_id.end_offset
    request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name="kv", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])])
    assert ctx.respond(request, 2).topics[0].partitions[0].error_code == ErrorCode.POLICY_VIOLATION


def test_fetch_below_the_log_start_points_at_the_snapshot(ctx):
    put(ctx, {}, [(b"a", b"1"), (b"b", b"2")])
    ctx.node.snapshots.request("kv", 0)
    (job,) = run_snapshot_jobs(ctx)
    data = ctx.fetch("kv", 0, 0, version=12)
    assert data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (data.snapshot_id.end_offset, data.snapshot_id.epoch) == job.snapshot_id
    old = ctx.fetch("kv", 0, 0, version=11)
    assert old.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    follower = ctx.fetch_request("kv", 0, 0, version=12)
    follower.replica_id = 2
    data = ctx.respond(follower, 12, node_id=2).responses[0].partitions[0]
    assert data.error_code == 0 and data.snapshot_id.end_offset == job.snapshot_id.end_offset


def test_startup_refuses_a_log_start_without_a_snapshot(ctx, tmp_path):
    put(ctx, {}, [(b"a", b"1")])
    ctx.node.snapshots.request("kv", 0)
    (job,) = run_snapshot_jobs(ctx)
    ctx.node.close()
    import os
    os.unlink(SnapshotStore(tmp_path / "kv-0").path(job.snapshot_id))
    with pytest.raises(SnapshotInvariantError, match="no snapshot reaches it"):
        open_node_on_files(ctx.config, ctx.now_ms)


def test_startup_removes_leftovers_and_truncates_to_a_newer_snapshot(ctx, tmp_path):
    model: dict = {}
    put(ctx, model, [(b"a", b"1")])
    ctx.node.close()
    store = SnapshotStore(tmp_path / "kv-0")
    (tmp_path / "kv-0" / "00000000000000000003-0000000001.checkpoint.part").write_bytes(b"junk")
    from kraftd.storage.snapshots import SnapshotId
    writer = store.writer(SnapshotId(50, 1), last_contained_log_timestamp=START_MS)
    writer.append(b"z", b"26")
    writer.freeze()
    node = open_node_on_files(ctx.config, ctx.now_ms)
    partition = node.topics.partition("kv", 0)
    assert partition.log_start_offset == 50 and partition.log_end_offset == 51  # + this epoch's LeaderChange
    assert node.snapshots[("kv", 0)].machine.state == {b"z": b"26"}
    assert not list((tmp_path / "kv-0").glob("*.part"))
