"""Issue 21, item 4: every structure a client can grow in the core has a cap, and what the cap
refused is counted (node.refusals -> kraftd_refused_total{what}). Sans-IO, explicit time."""
from __future__ import annotations

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.limits import AutoCreateLimiter, Refusals
from kraftd.quorum.metadata.plane import DelayedForward
from kraftd.quorum.outcomes import Park, Respond
from kraftd.quorum.purgatory import Purgatory
from kraftd.storage.producer_state import BatchMetadata, ProducerStateTable
from tests.quorum.node_context import NodeTestContext, batch_of

PROTOCOLS = [m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")]


def _metadata(ctx, *names, version=12):
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                                allow_auto_topic_creation=True)
    return {t.name: t.error_code for t in ctx.respond(request, version).topics}


# -- fetch sessions: max_incremental_fetch_session_partitions -----------------------------------
def test_a_full_fetch_over_the_partition_cap_opens_no_session(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path).with_topic("t", partitions=2)
           .with_config(max_incremental_fetch_session_partitions=4).build())
    # Unknown partitions count: 2 known + 3 unknown = 5 > 4.
    wanted = {("t", 0): 0, ("t", 1): 0, ("nosuch", 0): 0, ("nosuch", 1): 0, ("nosuch", 2): 0}
    response = ctx.session_fetch(wanted, session_id=0, session_epoch=0)
    assert response.error_code == 0 and response.session_id == 0  # answered in full, sessionless
    assert sum(len(t.partitions) for t in response.responses) == 5
    assert len(ctx.node.fetch_sessions) == 0
    assert ctx.node.refusals["fetch_session_partitions"] == 1
    # At the cap, a session is opened.
    del wanted[("nosuch", 2)]
    assert ctx.session_fetch(wanted, session_id=0, session_epoch=0).session_id != 0
    assert len(ctx.node.fetch_sessions) == 1 and ctx.node.refusals["fetch_session_partitions"] == 1


def test_an_incremental_fetch_growing_a_session_past_the_cap_ends_it(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path).with_topic("t", partitions=2)
           .with_config(max_incremental_fetch_session_partitions=3).build())
    session_id = ctx.session_fetch({("t", 0): 0, ("t", 1): 0}, session_id=0, session_epoch=0).session_id
    assert session_id
    more = ctx.session_fetch({("a", 0): 0}, session_id=session_id, session_epoch=1)
    assert more.error_code == 0 and more.session_id == session_id  # 3 partitions: still allowed
    over = ctx.session_fetch({("b", 0): 0}, session_id=session_id, session_epoch=2)
    assert over.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and over.responses == []
    assert ctx.node.fetch_sessions.get(session_id) is None
    assert ctx.node.refusals["fetch_session_partitions"] == 1


def test_a_followers_session_is_not_capped():
    """Only an authenticated node opens a privileged session (node_claims): a follower fetching
    every partition it replicates from one leader keeps its incremental session."""
    from kraftd.quorum.fetch_sessions import FetchSessionCache
    refusals = Refusals()
    cache = FetchSessionCache(10, 1000, iter(range(1, 100)).__next__, max_partitions=3, refusals=refusals)
    assert cache.too_big(4) and not cache.too_big(3) and not cache.too_big(4, privileged=True)
    assert refusals == {"fetch_session_partitions": 1}


# -- auto-created topics: auto_create_topics_rate/_burst/_max, max_partitions ------------------
def test_auto_creation_is_rate_limited_then_refills(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path)
           .with_config(auto_create_topics_rate=2.0, auto_create_topics_burst=3).build())
    got = _metadata(ctx, "a", "b", "c", "d")
    assert got == {"a": 0, "b": 0, "c": 0, "d": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert ctx.node.topics.get("d") is None and ctx.node.refusals["auto_create_rate"] == 1
    assert _metadata(ctx, "a") == {"a": 0}  # an existing topic costs nothing
    ctx.advance(499)
    assert _metadata(ctx, "d") == {"d": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    ctx.advance(1)  # 500 ms at 2/s: one token
    assert _metadata(ctx, "d", "e") == {"d": 0, "e": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # Produce auto-creates through the same bucket, and says why it did not.
    out = ctx.produce("f", 0, batch_of(["v"])).response.responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and "auto_create_topics_rate" in out.error_message
    assert ctx.node.refusals["auto_create_rate"] == 4


def test_auto_creation_stops_at_the_topic_total_but_create_topics_does_not(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("x").with_config(auto_create_topics_max=3).build()
    assert _metadata(ctx, "a", "b", "c") == {"a": 0, "b": 0, "c": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert ctx.node.refusals["auto_create_total"] == 1
    assert ctx.create_topic("c").error_code == 0  # an explicit CreateTopics is not auto-creation


def test_max_partitions_refuses_create_topics_and_auto_creation(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("x", partitions=6).with_config(max_partitions=10).build()
    refused = ctx.create_topic("big", partitions=5)
    assert refused.error_code == ErrorCode.POLICY_VIOLATION and "max_partitions" in refused.error_message
    assert ctx.node.topics.get("big") is None
    assert ctx.create_topic("fits", partitions=4).error_code == 0  # 10 in all
    assert _metadata(ctx, "auto") == {"auto": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert ctx.node.refusals["partitions"] == 2


def test_the_token_bucket_never_holds_more_than_its_burst():
    limiter = AutoCreateLimiter(rate_per_s=1.0, burst=2, max_topics=100, refusals=Refusals())
    assert [limiter.admit(0, 0) for _ in range(3)] == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert [limiter.admit(3_600_000, 0) for _ in range(3)] == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


# -- producer states: producer_id_expiration_ms -------------------------------------------------
def test_idle_producer_states_expire_and_active_ones_stay(tmp_path):
    ctx = (NodeTestContext.builder(tmp_path).with_topic("t")
           .with_config(producer_id_expiration_ms=60_000, producer_id_expiration_check_interval_ms=10_000).build())
    state = ctx.node.topics.partition("t", 0).log.producer_state
    for pid in (7, 8):
        out = ctx.produce("t", 0, batch_of(["v"], producer_id=pid, producer_epoch=0, base_sequence=0))
        assert out.response.responses[0].partition_responses[0].error_code == 0
    assert 7 in state and 8 in state
    for second in range(1, 9):  # producer 8 keeps producing every 10 s; producer 7 is idle
        ctx.advance(10_000)
        out = ctx.produce("t", 0, batch_of(["v"], producer_id=8, producer_epoch=0, base_sequence=second))
        assert out.response.responses[0].partition_responses[0].error_code == 0
    assert 7 not in state and 8 in state  # idle 80 s > 60 s (checked every 10 s)
    assert ctx.node.stats.metrics_values()["producer_ids_expired_total"] == 1
    assert ctx.node.stats.metrics_values()["producer_ids_expired_total"] == 1
    # Forgotten: its next batch must start again at sequence 0.
    late = ctx.produce("t", 0, batch_of(["v"], producer_id=7, producer_epoch=0, base_sequence=1))
    assert late.response.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_PRODUCER_ID


def test_expiry_comes_between_the_expiration_and_one_interval_later():
    table = ProducerStateTable()
    table.update(5, 0, BatchMetadata(0, 0, 0, 0, 1))
    assert table.expire_idle(1_000, 500) == 0  # stamped 1_000 here: the batch came before that
    assert table.expire_idle(1_499, 500) == 0 and 5 in table
    assert table.expire_idle(1_500, 500) == 1 and 5 not in table
    # The stamp survives a clean shutdown's snapshot; an unstamped entry is stamped after a load.
    table.update(6, 0, BatchMetadata(0, 0, 1, 1, 1))
    table.expire_idle(2_000, 500)
    table.update(9, 0, BatchMetadata(0, 0, 2, 2, 1))
    again = ProducerStateTable.from_snapshot(table.snapshot())
    assert again.expire_idle(2_400, 500) == 0
    assert again.expire_idle(2_500, 500) == 1 and 6 not in again and 9 in again


# -- groups: max_groups, group_max_size -----------------------------------------------------------
def _group_ctx(tmp_path, **config):
    ctx = (NodeTestContext.builder(tmp_path).with_topic("t")
           .with_config(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0, **config).build())
    assert ctx.respond(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
    ctx.flush()
    return ctx


def _join(ctx, group, member_id=""):
    return ctx.deliver(m.JoinGroupRequest(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=5000,
                                          member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                          protocols=PROTOCOLS), 7, api_key=api.JOIN_GROUP)


def _commit(ctx, group):
    request = m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                    group_instance_id=None, topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(
                                        name="t", partitions=[m.OffsetCommitRequest.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                            committed_metadata="")])])
    return ctx.deliver(request, 8, api_key=api.OFFSET_COMMIT)


def test_no_group_is_created_past_max_groups(tmp_path):
    ctx = _group_ctx(tmp_path, max_groups=2)
    assert _join(ctx, "g1").response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert isinstance(_commit(ctx, "g2"), Park)  # an offsets-only group
    ctx.flush()
    assert _join(ctx, "g3").response.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    committed = _commit(ctx, "g4")
    assert isinstance(committed, Respond)
    assert committed.response.topics[0].partitions[0].error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert ctx.node.refusals["groups"] == 2
    assert _join(ctx, "g1").response.error_code == ErrorCode.MEMBER_ID_REQUIRED  # existing groups go on
    assert isinstance(_commit(ctx, "g2"), Park)


def test_group_max_size_counts_pending_members(tmp_path):
    ctx = _group_ctx(tmp_path, group_max_size=2)
    assert _join(ctx, "g").response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert _join(ctx, "g").response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert _join(ctx, "g").response.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert ctx.node.refusals["group_members"] == 1


# -- parked requests: request_timeout_cap_ms, cancelled when the connection closes -------------
def test_a_parked_produce_waits_at_most_the_cap(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("t").with_config(request_timeout_cap_ms=1000).build()
    parked = ctx.produce("t", 0, batch_of(["v"]), acks=-1, timeout_ms=600_000)
    assert isinstance(parked, Park)
    assert ctx.node.refusals["request_timeout"] == 1
    ctx.advance(999)
    assert parked.token not in ctx.completions
    ctx.advance(1)  # not flushed (no fsync ran): timed out at the cap, not after 10 minutes
    out = ctx.completions[parked.token].responses[0].partition_responses[0]
    assert out.error_code == ErrorCode.REQUEST_TIMED_OUT


def test_parked_produces_and_fetches_of_a_closed_connection_are_cancelled(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("t").build()
    produce = ctx.produce("t", 0, batch_of(["v"]), acks=-1)
    hw = ctx.node.topics.partition("t", 0).high_watermark  # (the produce is not durable yet)
    fetch = ctx.deliver(ctx.fetch_request("t", 0, hw, max_wait_ms=30_000, min_bytes=1 << 20), 12)
    assert isinstance(produce, Park) and isinstance(fetch, Park)
    assert ctx.node.stats.metrics_values()["parked_requests"] == 2
    assert ctx.node.cancel_parked({produce.token, fetch.token, 12345}, ctx.now_ms) == 2
    assert ctx.node.stats.metrics_values()["parked_requests"] == 0
    ctx.flush()
    ctx.advance(30_000)
    assert produce.token not in ctx.completions and fetch.token not in ctx.completions
    assert ctx.node.next_deadline_ms() is not None  # (the heap entries are skipped once due)


def test_a_cancelled_forward_stops_going_to_the_controller():
    class Plane:
        def __init__(self):
            self._forwards, self.calls = {}, 0

        def call_controller(self, *args):
            self.calls += 1
            return False  # no controller known: tried again later

    plane, purgatory = Plane(), Purgatory()
    op = DelayedForward(plane, 1, api.CREATE_TOPICS, 5, object(), lambda r, e: e, deadline_ms=60_000)
    plane._forwards[1] = op
    token = purgatory.park(op)
    assert purgatory.cancel([token]) == 1
    assert plane._forwards == {} and len(purgatory) == 0
    assert purgatory.expire(60_000) == []


def test_other_parked_requests_are_not_cancelled(tmp_path):
    """A group write's completion changes the coordinator's state: it runs to its end."""
    ctx = _group_ctx(tmp_path)
    committed = _commit(ctx, "g")
    assert isinstance(committed, Park)
    assert ctx.node.cancel_parked([committed.token], ctx.now_ms) == 0
    ctx.flush()
    assert ctx.completions[committed.token].topics[0].partitions[0].error_code == 0
