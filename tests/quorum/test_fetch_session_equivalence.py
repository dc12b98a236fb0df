"""KIP-227's promise, checked by hypothesis: fetching through an incremental session yields the
same data as fetching without one.

One node, two fetchers that see the same produces, flushes, log-start moves (DeleteRecords) and
subscription changes:

- A uses a session like Kafka's consumer (FetchClient): it tracks (id, epoch), names only
  partitions whose position changed, forgets unsubscribed ones, loses responses now and then,
  and falls back to a full fetch after 70 / 71 or when its session ends or cannot be had.
- B fetches sessionless, every subscribed partition every time.

Meanwhile other clients open sessions (consumers and followers) in a 2-slot cache and time
moves on, so A's session is evicted, refused a slot, and re-created along the way.

What "the same data" means. A single fetch of A and of B cannot be compared one to one: an
incremental response leaves out partitions with nothing new, and under a response max_bytes the
two fill the budget in different orders (A's session rotates partitions that returned records;
B always asks in subscription order), and a fetcher lagging behind a log-start move skips the
deleted records. So:

1. After every step, for each fetcher and partition: the records it holds have strictly
   increasing offsets and each is exactly the record produced at that offset; the high
   watermark and log start it was last told are never ahead of the node's.
2. After a drain (both poll until every subscribed partition's position equals the node's HW
   and the HW and log start each was last told equal the node's), for every subscribed
   partition: A's records at offsets ≥ the current log start == B's == every record produced
   in [log start, HW). That is: nothing visible is missed, nothing is duplicated or reordered,
   and every HW / log-start change reaches the incremental fetcher although it only hears of
   partitions that changed.
"""
import itertools
import math
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode

from .node_context import FetchClient, NodeTestContext

PARTITIONS = 3
TPS = [("t", p) for p in range(PARTITIONS)]
EVICTION_MS = 120_000


class IncrementalEqualsSessionless(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.mkdtemp(prefix="kraftd-sessions-")
        self.ctx = (NodeTestContext.builder(self._dir)
                    .with_config(max_incremental_fetch_session_cache_slots=2)
                    # Deterministic ids: eviction ties break by id, and a replay must run the same way.
                    .with_session_ids(itertools.count(7919, 7919))
                    .with_topic("t", PARTITIONS).build())
        self.produced: dict = {tp: {} for tp in TPS}  # tp -> {offset: value}
        self.counter = 0
        self.intruders = 0
        self.drains = 0

    @initialize(max_bytes=st.sampled_from([1, 300, 50 << 20]), version=st.sampled_from([12, 13]),
                subscribed=st.sets(st.sampled_from(TPS), min_size=1))
    def start(self, max_bytes, version, subscribed):
        self.a = FetchClient(self.ctx, client_id="a", use_sessions=True, version=version, max_bytes=max_bytes)
        self.b = FetchClient(self.ctx, client_id="b", use_sessions=False, version=version, max_bytes=max_bytes)
        for tp in sorted(subscribed):
            self.a.subscribe(*tp)
            self.b.subscribe(*tp)

    def partition(self, tp):
        return self.ctx.node.topics.partition(*tp)

    # -- the log changes ----------------------------------------------------------------
    @rule(p=st.integers(0, PARTITIONS - 1), n=st.integers(1, 3), size=st.sampled_from([1, 40, 250]),
          flush=st.booleans())
    def produce(self, p, n, size, flush):
        tp = TPS[p]
        values = []
        for _ in range(n):
            self.counter += 1
            values.append(f"{self.counter}:".ljust(size, "v"))
        base = self.ctx.produce_ok(*tp, values).base_offset
        for i, v in enumerate(values):
            self.produced[tp][base + i] = v.encode()
        if flush:
            self.ctx.flush()

    @rule()
    def flush(self):
        self.ctx.flush()

    @rule(p=st.integers(0, PARTITIONS - 1), fraction=st.sampled_from([0.5, 1.0]), then_drain=st.booleans())
    def delete_records(self, p, fraction, then_drain):
        part = self.partition(TPS[p])
        offset = part.log_start_offset + math.ceil(fraction * (part.high_watermark - part.log_start_offset))
        request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
            name="t", partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=offset)])])
        out = self.ctx.respond(request, 2).topics[0].partitions[0]
        assert out.error_code == 0 and out.low_watermark == max(offset, part.log_start_offset)
        if then_drain:  # a log-start move with nothing else new: the session must still tell A
            self.drain_and_compare()

    @rule(ms=st.sampled_from([1_000, 60_000, EVICTION_MS + 1]))
    def advance_time(self, ms):
        self.ctx.advance(ms)

    # -- subscriptions (the same for both fetchers) ---------------------------------------
    @rule(p=st.integers(0, PARTITIONS - 1))
    def subscribe(self, p):
        self.a.subscribe(*TPS[p])
        self.b.subscribe(*TPS[p])

    @rule(p=st.integers(0, PARTITIONS - 1))
    def unsubscribe(self, p):
        self.a.unsubscribe(*TPS[p])
        self.b.unsubscribe(*TPS[p])

    # -- fetching ---------------------------------------------------------------------------
    @rule()
    def poll_a(self):
        self.a.poll()

    @rule()
    def poll_b(self):
        self.b.poll()

    @rule()
    def poll_both(self):
        self.a.poll()
        self.b.poll()

    @rule()
    def a_loses_a_response(self):
        self.a.lose_response()

    @rule(privileged=st.booleans(), n=st.integers(1, PARTITIONS))
    def another_client_opens_a_session(self, privileged, n):
        self.intruders += 1
        response = self.ctx.session_fetch({tp: 0 for tp in TPS[:n]}, session_id=0, session_epoch=0,
                                          replica_id=1 if privileged else -1, client_id=f"x{self.intruders}",
                                          version=self.a.version)
        assert response.error_code == 0

    @precondition(lambda self: getattr(self, "a", None) is not None and self.a.session_id != 0 and self.a.epoch > 0)
    @rule(same_client_other_host=st.booleans())
    def someone_else_uses_as_session(self, same_client_other_host):
        client_id, peer = ("a", "10.1.1.1:4000") if same_client_other_host else ("mallory", "127.0.0.1:50000")
        response = self.ctx.session_fetch({}, session_id=self.a.session_id, session_epoch=self.a.epoch,
                                          client_id=client_id, peer=peer, version=self.a.version)
        assert (response.error_code, response.session_id, response.responses) == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])

    @rule()
    def drain_and_compare(self):
        self.drains += 1
        node_view = {}
        for _ in range(200):
            node_view = {tp: (self.partition(tp).high_watermark, self.partition(tp).log_start_offset) for tp in TPS}
            if self._caught_up(self.a, node_view) and self._caught_up(self.b, node_view):
                break
            self.a.poll()
            self.b.poll()
        else:
            raise AssertionError(f"no convergence: a={self._state(self.a)} b={self._state(self.b)} node={node_view}")
        assert set(self.a.positions) == set(self.b.positions)
        for tp in self.a.positions:
            hw, log_start = node_view[tp]
            expected = [(o, v) for o, v in sorted(self.produced[tp].items()) if log_start <= o < hw]
            from_a = [r for r in self.a.records[tp] if r[0] >= log_start]
            from_b = [r for r in self.b.records[tp] if r[0] >= log_start]
            assert from_a == from_b == expected, tp

    @staticmethod
    def _caught_up(client, node_view) -> bool:
        return all(pos == node_view[tp][0] and client.high_watermark.get(tp) == node_view[tp][0]
                   and client.log_start.get(tp) == node_view[tp][1] for tp, pos in client.positions.items())

    @staticmethod
    def _state(client):
        return {tp: (pos, client.high_watermark.get(tp), client.log_start.get(tp)) for tp, pos in client.positions.items()}

    # -- after every step -----------------------------------------------------------------
    @invariant()
    def records_are_the_produced_ones_in_order_and_knowledge_never_runs_ahead(self):
        for client in (getattr(self, "a", None), getattr(self, "b", None)):
            if client is None:
                continue
            for tp, records in client.records.items():
                offsets = [o for o, _ in records]
                assert offsets == sorted(set(offsets)), (client.client_id, tp, offsets)
                for offset, value in records:
                    assert self.produced[tp].get(offset) == value, (client.client_id, tp, offset)
            for tp, hw in client.high_watermark.items():
                assert hw <= self.partition(tp).high_watermark
                assert client.log_start[tp] <= self.partition(tp).log_start_offset
        if getattr(self, "b", None) is not None:
            assert self.a.unexpected == [] and self.b.unexpected == []
            assert self.b.top_errors == []
            errors = self.a.top_errors
            assert set(errors) <= {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
            # A wrong epoch only follows a lost response; an unknown id only an eviction or a lost
            # response (the lost answer may have ended the session).
            assert errors.count(ErrorCode.INVALID_FETCH_SESSION_EPOCH) <= self.a.lost_responses
            assert errors.count(ErrorCode.FETCH_SESSION_ID_NOT_FOUND) <= (
                self.ctx.node.fetch_sessions.evictions + self.a.lost_responses)

    def teardown(self):
        try:
            if getattr(self, "a", None) is not None:
                self.drain_and_compare()
                # What the run went through (see --hypothesis-show-statistics).
                event(f"A's top-level errors: {sorted(set(int(e) for e in self.a.top_errors))}")
                event(f"evictions: {min(self.ctx.node.fetch_sessions.evictions, 2)}+")
                event(f"log start moved: {any(self.partition(tp).log_start_offset > 0 for tp in TPS)}")
        finally:
            self.ctx.node.close()
            shutil.rmtree(self._dir, ignore_errors=True)


IncrementalEqualsSessionless.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestIncrementalEqualsSessionless = IncrementalEqualsSessionless.TestCase


@pytest.mark.soak
def test_incremental_equals_sessionless_long_run():
    """`make soak`: the same machine, many more and longer runs (minutes, not seconds)."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(IncrementalEqualsSessionless, settings=settings(
        max_examples=3000, stateful_step_count=80, deadline=None,
        suppress_health_check=list(HealthCheck)))
