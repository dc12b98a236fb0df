"""Compacted topics through the node (sans-IO, real files): the configs, the cleaner's schedule
(quorum/compaction.py) and what a consumer fetches after a pass."""
import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import Compression, build_batch, decode_records, iter_batch_headers

from .node_context import START_MS, NodeTestContext

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
BACKOFF = 15_000


@pytest.fixture
def ctx(tmp_path):
    return NodeTestContext.builder(tmp_path).with_topic("c", 1, COMPACT).build()


def keyed(pairs, ts=START_MS - 60_000):
    return build_batch([(k, v, None, ts) for k, v in pairs])


def produce(ctx, pairs):
    outcome = ctx.produce("c", 0, keyed(pairs))
    ctx.flush()
    return outcome.response.responses[0].partition_responses[0]


def consume(ctx, offset=0):
    """(offset, key, value) from `offset` to the high watermark, as a consumer reads (control
    batches, such as the leader's LeaderChange record, skipped)."""
    out = []
    while True:
        part = ctx.fetch("c", 0, offset)
        assert part.error_code == 0
        data = bytes(part.records.view()) if hasattr(part.records, "view") else bytes(part.records or b"")
        if not data:
            return out
        for pos, h in iter_batch_headers(data):
            if not h.is_control:
                out += [(r.offset, r.key, r.value) for r in decode_records(data[pos:pos + h.size], h)
                        if r.offset >= offset]
            offset = h.next_offset


def write_updates(ctx, rounds=60, keys=8):
    written = []
    for i in range(rounds):
        pairs = [(b"key-%d" % ((i + j) % keys), b"v%d-%d" % (i, j)) for j in range(4)]
        out = produce(ctx, pairs)
        assert out.error_code == 0
        written += [(out.base_offset + j, k, v) for j, (k, v) in enumerate(pairs)]
    return written


def test_the_cleaner_runs_on_its_schedule_and_a_consumer_reads_the_latest_values(ctx):
    written = write_updates(ctx)
    log = ctx.node.topics.partition("c", 0).log
    active_base = log.segments[-1].base_offset
    assert ctx.run_jobs() == []  # not yet: the first check found the log at its creation
    ctx.advance(BACKOFF)
    assert ctx.node.stats.metrics_values()["log_cleaner_max_dirty_percent"] == 100.0  # never cleaned
    jobs = ctx.run_jobs()
    assert [type(j).__name__ for j in jobs] == ["CleaningJob"]
    got = consume(ctx)
    below = {}
    for r in written:
        if r[0] < active_base:
            below[r[1]] = r
    assert got == sorted(below.values()) + [r for r in written if r[0] >= active_base]
    stats = ctx.node.stats.metrics_values()
    assert stats["log_cleaner_passes_total"] == 1 and stats["log_cleaner_records_removed_total"] > 0
    assert stats["log_cleaner_max_dirty_percent"] == 0.0  # (checked again after the pass: all clean)
    assert stats["log_cleaner_time_since_last_run_ms"] == 0
    ctx.advance(1000)
    assert ctx.node.stats.metrics_values()["log_cleaner_time_since_last_run_ms"] == 1000
    again = ctx.restart()
    assert consume(again) == got


def test_nothing_is_cleaned_below_the_dirty_ratio_or_with_the_cleaner_off(tmp_path):
    lazy = NodeTestContext.builder(tmp_path / "a").with_topic("c", 1, dict(COMPACT, **{
        "min.cleanable.dirty.ratio": "1.0"})).build()
    write_updates(lazy)
    lazy.advance(BACKOFF)
    assert lazy.run_jobs() == []
    off = NodeTestContext.builder(tmp_path / "b").with_config(log_cleaner_enable=False).with_topic(
        "c", 1, COMPACT).build()
    write_updates(off)
    off.advance(BACKOFF)
    assert off.run_jobs() == [] and off.node.next_deadline_ms() is not None


def test_max_compaction_lag_cleans_a_log_below_its_dirty_ratio(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("c", 1, dict(COMPACT, **{
        "min.cleanable.dirty.ratio": "1.0", "max.compaction.lag.ms": "10000"})).build()
    write_updates(ctx)
    ctx.advance(BACKOFF)
    # The first dirty segment's first batch (the leader's LeaderChange, at creation) is 15 s old.
    assert len(ctx.run_jobs()) == 1


def test_records_younger_than_min_compaction_lag_stay(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("c", 1, dict(COMPACT, **{
        "min.compaction.lag.ms": str(3_600_000)})).build()
    write_updates(ctx)
    ctx.advance(BACKOFF)
    assert ctx.run_jobs() == []


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_record_without_a_key_is_refused_by_a_compacted_topic(ctx, codec):
    end = ctx.node.topics.partition("c", 0).log.log_end_offset  # (the leader's LeaderChange record)
    out = ctx.produce("c", 0, build_batch([(b"k", b"v", None, START_MS), (None, b"v", None, START_MS)],
                                          compression=codec))
    part = out.response.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.INVALID_RECORD
    assert part.error_message == "Compacted topic cannot accept message without key in topic partition c-0."
    assert ctx.node.topics.partition("c", 0).log.log_end_offset == end
    out = ctx.produce("c", 0, build_batch([(b"k", b"v", None, START_MS)], compression=codec))
    assert out.response.responses[0].partition_responses[0].error_code == 0


def test_policies_and_configs(ctx):
    made = ctx.create_topic("both", configs={"cleanup.policy": "delete,compact", "delete.retention.ms": "5",
                                             "segment.ms": "60000", "min.compaction.lag.ms": "7"})
    assert made.error_code == 0
    configs = {c.name: c.value for c in made.configs}
    assert configs["cleanup.policy"] == "compact,delete" and configs["delete.retention.ms"] == "5"
    assert configs["min.cleanable.dirty.ratio"] == "0.5" and configs["max.compaction.lag.ms"] == str(2**63 - 1)
    for bad in ({"cleanup.policy": "compact,snapshot"}, {"min.cleanable.dirty.ratio": "2"},
                {"segment.ms": "0"}, {"cleanup.policy": "squash"}):
        assert ctx.create_topic("bad", configs=bad).error_code == ErrorCode.INVALID_CONFIG, bad


def test_delete_records_is_a_policy_violation_on_a_compact_only_topic(ctx):
    produce(ctx, [(b"a", b"1")])
    request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name="c", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=1)])])
    out = ctx.respond(request, 2).topics[0].partitions[0]
    assert out.error_code == ErrorCode.POLICY_VIOLATION


def test_an_idempotent_producers_retry_after_a_cleaning_pass_is_still_a_duplicate(ctx):
    def idempotent(pairs, seq):
        return build_batch([(k, v, None, START_MS - 60_000) for k, v in pairs], producer_id=5, producer_epoch=0,
                           base_sequence=seq)

    first = ctx.produce("c", 0, idempotent([(b"key-0", b"1"), (b"key-1", b"1")], 0)).response
    original = first.responses[0].partition_responses[0].base_offset
    write_updates(ctx, rounds=40)  # every key overwritten: the producer's batch has nothing left
    ctx.advance(BACKOFF)
    assert len(ctx.run_jobs()) == 1
    assert all(r[0] != original for r in consume(ctx))  # its records are gone ...
    for context in (ctx, ctx.restart()):
        end = context.node.topics.partition("c", 0).log.log_end_offset  # (a restart adds a LeaderChange)
        retry = context.produce("c", 0, idempotent([(b"key-0", b"1"), (b"key-1", b"1")], 0)).response
        out = retry.responses[0].partition_responses[0]
        assert out.error_code == 0 and out.base_offset == original  # ... but it is still known
        assert context.node.topics.partition("c", 0).log.log_end_offset == end
    nxt = context.produce("c", 0, idempotent([(b"key-0", b"3")], 2)).response.responses[0].partition_responses[0]
    assert nxt.error_code == 0 and nxt.base_offset == end
