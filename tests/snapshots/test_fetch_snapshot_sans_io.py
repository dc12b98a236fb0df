"""FetchSnapshot in the sans-IO core: what a single real node cannot show (NOT_LEADER_OR_FOLLOWER),
and the fair split of MaxBytes as a property."""
from hypothesis import given, strategies as st

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from kraftd.quorum.handlers.fetch_snapshot import fair_shares
from tests.quorum.node_context import START_MS, NodeTestContext

POLICY = {"cleanup.policy": "snapshot"}


def _fetch_snapshot(ctx, sid, position=0, max_bytes=1 << 20):
    request = m.FetchSnapshotRequest(replica_id=-1, max_bytes=max_bytes, topics=[
        m.FetchSnapshotRequest.TopicSnapshot(name="kv", partitions=[m.FetchSnapshotRequest.PartitionSnapshot(
            partition=0, current_leader_epoch=-1, position=position,
            snapshot_id=m.FetchSnapshotRequest.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch))])])
    return ctx.respond(request, 0, api_key=api.FETCH_SNAPSHOT).topics[0].partitions[0]


def test_a_partition_led_by_another_node_answers_not_leader_or_follower(tmp_path):
    # On one real node this node leads every partition, so only the core can show this error.
    ctx = NodeTestContext.builder(tmp_path).with_topic("kv", configs=POLICY).build()
    assert ctx.produce("kv", 0, build_batch([(b"a", b"1", [], START_MS)])).response.responses[0] \
        .partition_responses[0].error_code == 0
    ctx.flush()
    assert ctx.node.snapshots.request("kv", 0)
    (job,) = ctx.node.snapshots.jobs()
    job.run()
    ctx.node.on_snapshot_done(job, ctx.now_ms)
    sid = job.snapshot_id
    served = _fetch_snapshot(ctx, sid)
    assert served.error_code == 0 and len(served.unaligned_records) == served.size > 0

    partition = ctx.node.topics.partition("kv", 0)
    # Node 2 wins a newer epoch (as a BeginQuorumEpoch would tell us): we follow it now.
    assert partition.raft.observe_leader(2, partition.leader_epoch + 1, ctx.now_ms)
    assert partition.leader_id == 2
    p = _fetch_snapshot(ctx, sid)
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # ... and says who leads (it used to leave CurrentLeader unset on this error)
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, partition.leader_epoch)
    assert len(p.unaligned_records) == 0


@given(st.integers(0, 10_000), st.lists(st.integers(1, 5_000), min_size=1, max_size=6))
def test_fair_shares_is_a_max_min_fair_split(budget, wants):
    shares = fair_shares(budget, wants)
    assert len(shares) == len(wants)
    assert all(0 <= s <= w for s, w in zip(shares, wants))
    assert sum(shares) == min(budget, sum(wants))  # nothing wasted while someone wants more
    # Max-min fairness: a partition that got less than it wanted got at least everyone else's
    # share minus one byte (the odd remainder of an even split).
    for s, w in zip(shares, wants):
        if s < w:
            assert all(s >= other - 1 for other in shares)


def test_fair_shares_examples():
    assert fair_shares(2000, [10_000, 10_000]) == [1000, 1000]
    assert sorted(fair_shares(2001, [10_000, 10_000])) == [1000, 1001]
    assert fair_shares(4000, [10_000, 300]) == [3700, 300]
    assert fair_shares(0, [5, 5]) == [0, 0]
