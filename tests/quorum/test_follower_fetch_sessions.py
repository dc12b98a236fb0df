"""Follower (privileged) fetch sessions read only their active partitions, as consumer sessions
do: a leader append marks the partition (the node records it in its ChangeJournal), and a
partition stays active while the follower is below the log end (a follower reads up to it, not
to the high watermark). Before, a follower session read every partition on every fetch, which
made an incremental replication round cost as much as a full one (bench/raft_round.py).

Two direct checks, then the equivalence oracle (test_fetch_session_equivalence.py) for
followers: the same state machine, but A and B fetch as a replica (ReplicaId 2: an observer of the
single-node topic), so they read up to the log end rather than the high watermark. A follower's
incremental session reads only its active partitions: an append must mark the partition (the
node records leader appends in its ChangeJournal), and a partition must stay active while the
fetcher is below the log end. After a drain both fetchers must hold exactly the records produced
in [log start, log end), and have been told the node's HW and log start.
"""
import itertools

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from . import test_fetch_session_equivalence as base
from .node_context import FetchClient, NodeTestContext, values_in

REPLICA_ID = 2
T = [("t", 0), ("t", 1), ("t", 2)]
ALL = {tp: 1 for tp in T}  # past the LeaderChange batch at offset 0


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_session_ids(itertools.count(1001)).with_topic("t", 3).build()


def _parts(response) -> dict:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def _fetch(ctx, positions, session_id, epoch, **kw):
    response = ctx.session_fetch(positions, session_id=session_id, session_epoch=epoch, replica_id=REPLICA_ID, **kw)
    assert response.error_code == 0
    return response


def _session(ctx):
    return next(iter(ctx.node.fetch_sessions))


def test_an_append_wakes_an_idle_follower_slot_without_a_hw_move(ctx):
    sid = _fetch(ctx, ALL, 0, 0).session_id
    assert _parts(_fetch(ctx, {}, sid, 1)) == {}
    assert not _session(ctx)._active  # idle: the next fetch reads nothing
    ctx.produce_ok(*T[1], ["a"])       # not flushed: the HW stays at 1, the log end is 2
    assert ctx.node.topics.partition(*T[1]).high_watermark == 1
    got = _parts(_fetch(ctx, {}, sid, 2))
    assert list(got) == [T[1]] and values_in(got[T[1]]) == [b"a"] and got[T[1]].high_watermark == 1


def test_a_follower_slot_stays_active_below_the_log_end(ctx):
    for tp in T[:2]:
        ctx.produce_ok(*tp, ["x"])     # not flushed: log end 2, HW 1
    # max_bytes 1: the first partition gets its batch (KIP-74), the second nothing this time.
    first = _fetch(ctx, ALL, 0, 0, max_bytes=1)
    sid = first.session_id
    assert values_in(_parts(first)[T[0]]) == [b"x"] and values_in(_parts(first)[T[1]]) == []
    # The second is still below the log end although at the HW: the next fetch must read it.
    got = _parts(_fetch(ctx, {T[0]: 2}, sid, 1, max_bytes=1))
    assert values_in(got[T[1]]) == [b"x"]


class FollowerIncrementalEqualsSessionless(base.IncrementalEqualsSessionless):
    @initialize(max_bytes=st.sampled_from([1, 300, 50 << 20]), version=st.sampled_from([12, 13]),
                subscribed=st.sets(st.sampled_from(base.TPS), min_size=1))
    def start(self, max_bytes, version, subscribed):
        self.a = FetchClient(self.ctx, client_id="a", use_sessions=True, version=version, max_bytes=max_bytes,
                             replica_id=REPLICA_ID)
        self.b = FetchClient(self.ctx, client_id="b", use_sessions=False, version=version, max_bytes=max_bytes,
                             replica_id=REPLICA_ID)
        for tp in sorted(subscribed):
            self.a.subscribe(*tp)
            self.b.subscribe(*tp)

    @rule()
    def drain_and_compare(self):
        self.drains += 1
        node_view = {}
        for _ in range(200):
            node_view = {tp: (self.partition(tp).log_end_offset, self.partition(tp).high_watermark,
                              self.partition(tp).log_start_offset) for tp in base.TPS}
            if self._caught_up_to_end(self.a, node_view) and self._caught_up_to_end(self.b, node_view):
                break
            self.a.poll()
            self.b.poll()
        else:
            raise AssertionError(f"no convergence: a={self._state(self.a)} b={self._state(self.b)} node={node_view}")
        assert set(self.a.positions) == set(self.b.positions)
        for tp in self.a.positions:
            end, _, log_start = node_view[tp]
            expected = [(o, v) for o, v in sorted(self.produced[tp].items()) if log_start <= o < end]
            from_a = [r for r in self.a.records[tp] if r[0] >= log_start]
            from_b = [r for r in self.b.records[tp] if r[0] >= log_start]
            assert from_a == from_b == expected, tp

    @staticmethod
    def _caught_up_to_end(client, node_view) -> bool:
        return all(pos == node_view[tp][0] and client.high_watermark.get(tp) == node_view[tp][1]
                   and client.log_start.get(tp) == node_view[tp][2] for tp, pos in client.positions.items())


FollowerIncrementalEqualsSessionless.TestCase.settings = settings(
    base.IncrementalEqualsSessionless.TestCase.settings, max_examples=75)
TestFollowerIncrementalEqualsSessionless = FollowerIncrementalEqualsSessionless.TestCase
