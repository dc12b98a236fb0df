"""Two clocks (quorum/wall_clock.py): timers run on `now_ms`, what is written down or compared with
record timestamps uses the injected wall clock. Here the wall clock reads 10 days after the
timer clock, so every assertion tells which clock a stamp came from."""
from __future__ import annotations

import time

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.records import iter_batch_headers
from kraftd.quorum.wall_clock import WallClock
from kraftd.server import clocks

from .node_context import START_MS, NodeTestContext

DAY_MS = 86_400_000
WALL_MS = START_MS + 10 * DAY_MS


def _batches(ctx, topic: str):
    """Every batch header of the partition, from a Fetch from offset 0."""
    records = ctx.fetch(topic, 0, 0, partition_max_bytes=1 << 20).records
    raw = records.view() if hasattr(records, "view") else records
    return [h for _, h in iter_batch_headers(bytes(raw))]


def test_log_append_time_and_the_leader_change_batch_take_the_wall_clock(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path).with_wall_clock(lambda: WALL_MS)
           .with_topic("t", configs={"message.timestamp.type": "LogAppendTime"}).build())
    out = ctx.produce_ok("t", 0, ["a", "b"])
    assert out.log_append_time_ms == WALL_MS
    ctx.flush()
    headers = _batches(ctx, "t")
    assert headers[0].is_control and headers[0].max_timestamp == WALL_MS  # LeaderChange
    assert headers[-1].max_timestamp == WALL_MS  # the produced batch, stamped on append


def test_offset_commit_timestamps_take_the_wall_clock(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path).with_wall_clock(lambda: WALL_MS).with_topic("t")
           .with_config(offsets_topic_num_partitions=1).build())
    assert ctx.respond(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
    ctx.flush()
    request = m.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                    group_instance_id=None, retention_time_ms=-1, topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=0, committed_leader_epoch=-1, commit_timestamp=-1,
                committed_metadata="")])])
    ctx.deliver(request, 2, api_key=api.OFFSET_COMMIT)
    ctx.flush()
    entry = ctx.node._ctx.groups.committed("g", "t", 0)
    assert entry is not None and entry.commit_timestamp == WALL_MS


def test_retention_by_time_compares_record_timestamps_with_the_wall_clock(tmp_path):
    """Records stamped at START_MS; then the wall clock reads 10 days later while the timer clock
    moved 1.5 s: a 1-day retention deletes their closed segments."""
    wall = [START_MS]
    ctx = (NodeTestContext.builder(tmp_path).with_wall_clock(lambda: wall[0])
           .with_config(retention_check_interval_ms=1000)
           .with_topic("t", configs={"retention.ms": str(DAY_MS), "segment.bytes": "1024"}).build())
    for _ in range(20):
        ctx.produce_ok("t", 0, ["x" * 200])
        ctx.flush()
    ctx.advance(1500)
    assert ctx.earliest_offset("t", 0) == 0
    wall[0] = WALL_MS
    ctx.advance(1500)
    assert ctx.earliest_offset("t", 0) > 0


def test_a_wall_clock_step_moves_no_timer(tmp_path):
    """A parked long-poll Fetch expires by the timer clock, whatever the wall clock does."""
    wall = [WALL_MS]
    ctx = NodeTestContext.builder(tmp_path).with_wall_clock(lambda: wall[0]).with_topic("t").build()
    parked = ctx.deliver(ctx.fetch_request("t", 0, 1, max_wait_ms=500), 12)
    wall[0] += DAY_MS  # the operator sets the clock a day ahead
    ctx.advance(100)
    assert parked.token not in ctx.completions
    wall[0] -= 2 * DAY_MS  # and then a day behind
    ctx.advance(450)
    assert parked.token in ctx.completions


def test_wall_clock_conversions():
    assert WallClock().at(123) == 123 and WallClock().of(100, 123) == 100
    clock = WallClock(lambda: 10_000)
    assert clock.at(5) == 10_000
    assert clock.of(3, 5) == 9_998            # 2 ms ago by the timer clock
    assert clock.of(-1, 5) == -1              # "never" stays "never"
    assert clock.to_core(9_998, 5) == 3       # and back


def test_the_servers_timer_clock_does_not_step_with_the_system_clock(monkeypatch):
    before_now, before_wall = clocks.now_ms(), clocks.wall_ms()
    assert abs(before_now - before_wall) < 60_000  # anchored at the wall time at start
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + 3_600 * 10**9)  # the clock jumps an hour
    assert clocks.wall_ms() - before_wall >= 3_600_000
    assert clocks.now_ms() - before_now < 60_000
