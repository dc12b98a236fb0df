"""PartitionSnapshots fixes, in the sans-IO core."""
from kraftd.protocol.records import build_batch
from tests.quorum.node_context import START_MS, NodeTestContext


def test_a_requested_snapshot_after_a_restart_covers_the_high_watermark(tmp_path):
    # Regression: the new epoch's LeaderChange moved the HW at startup without a catch-up, so the
    # requested snapshot ended one offset short of the HW and kraftd_snapshot_lag stayed at 1.
    ctx = NodeTestContext.builder(tmp_path).with_topic("kv", configs={"cleanup.policy": "snapshot"}).build()
    ctx.produce("kv", 0, build_batch([(b"a", b"1", [], START_MS)]))
    ctx.flush()
    ctx = ctx.restart()
    ctx.flush()
    partition = ctx.node.topics.partition("kv", 0)
    assert ctx.node.snapshots.request("kv", 0)
    (job,) = ctx.node.snapshots.jobs()
    job.run()
    ctx.node.on_snapshot_done(job, ctx.now_ms)
    assert job.snapshot_id.end_offset == partition.high_watermark == partition.log_end_offset
    assert job.items == {b"a": b"1"}
    (stats,) = ctx.node.stats.snapshot_stats()
    assert stats["lag"] == 0
    assert partition.log_start_offset == partition.high_watermark


def test_log_bytes_applied_while_a_snapshot_is_written_count_towards_the_next(tmp_path):
    # Regression: finishing a job reset the byte counter to 0, forgetting what arrived meanwhile,
    # so the next snapshot came a whole threshold late (KIP-630: bytes since the latest snapshot).
    configs = {"cleanup.policy": "snapshot", "metadata.log.max.record.bytes.between.snapshots": "5000",
               "metadata.snapshot.min.changed_records.ratio": "0"}
    ctx = NodeTestContext.builder(tmp_path).with_topic("kv", configs=configs).build()

    def put(n, tag):
        ctx.produce("kv", 0, build_batch([(b"k%d" % i, tag * 100, [], START_MS) for i in range(n)]))
        ctx.flush()

    put(60, b"a")  # > 5000 bytes: due
    (job,) = ctx.node.snapshots.jobs()
    put(60, b"b")  # another > 5000 bytes while the job runs
    job.run()
    ctx.node.on_snapshot_done(job, ctx.now_ms)
    (second,) = ctx.node.snapshots.jobs()  # due at once: those bytes are after the first snapshot
    assert second.snapshot_id.end_offset > job.snapshot_id.end_offset
    second.run()
    ctx.node.on_snapshot_done(second, ctx.now_ms)
    put(1, b"c")  # a few bytes only: not due
    assert ctx.node.snapshots.jobs() == []
