"""KIP-227 fetch sessions through the sans-IO Node: the (SessionId, SessionEpoch) table, errors,
incremental responses, rotation, eviction seen by clients, long polls."""
import itertools

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.fetch_sessions import FetchSession
from kraftd.quorum.fetch_sessions.session import MAX_EPOCH
from tests.quorum.fetch_helpers import fetched

from .node_context import FetchClient, NodeTestContext, Park, batch_of, values_in

T = [("t", 0), ("t", 1), ("t", 2)]
ALL = {tp: 1 for tp in T}  # past the LeaderChange batch at offset 0


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    return NodeTestContext.builder(tmp_path).with_session_ids(itertools.count(1001)).with_topic("t", 3).build()


def parts(response) -> dict:
    """{(topic, partition): PartitionData} of a response (v < 13)."""
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def open_session(ctx, positions=None, **kw):
    response = ctx.session_fetch(positions or ALL, session_id=0, session_epoch=0, **kw)
    assert response.error_code == 0 and response.session_id != 0
    return response.session_id, response


def produce_flushed(ctx, tp, values):
    ctx.produce_ok(*tp, values)
    ctx.flush()


def delete_records(ctx, tp, offset):
    request = m.DeleteRecordsRequest(timeout_ms=1000, topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(
        name=tp[0], partitions=[m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=tp[1], offset=offset)])])
    assert ctx.respond(request, 2).topics[0].partitions[0].error_code == 0


def assert_top_level_error(response, code):
    assert (response.error_code, response.session_id, response.responses) == (code, 0, [])


# -- the (SessionId, SessionEpoch) table ----------------------------------------------------

def test_zero_minus_one_is_a_sessionless_full_fetch(ctx):
    produce_flushed(ctx, T[0], ["a"])
    response = ctx.session_fetch(ALL, session_id=0, session_epoch=-1)
    assert response.session_id == 0 and set(parts(response)) == set(T)
    assert values_in(parts(response)[T[0]]) == [b"a"]
    assert len(ctx.node.fetch_sessions) == 0


def test_zero_zero_creates_a_session_expecting_epoch_one(ctx):
    produce_flushed(ctx, T[0], ["a"])
    session_id, response = open_session(ctx)
    assert session_id == 1001 and set(parts(response)) == set(T)  # a full response
    assert values_in(parts(response)[T[0]]) == [b"a"]
    session = ctx.node.fetch_sessions.get(session_id)
    assert session.epoch == 1 and len(session) == 3
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=1).error_code == 0
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=2).error_code == 0


def test_a_wrong_epoch_is_invalid_and_does_not_advance_the_session(ctx):
    session_id, _ = open_session(ctx)
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=1).error_code == 0
    for wrong in (1, 3, MAX_EPOCH):
        assert_top_level_error(ctx.session_fetch({}, session_id=session_id, session_epoch=wrong),
                               ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=2).session_id == session_id


def test_an_unknown_session_id_is_not_found(ctx):
    assert_top_level_error(ctx.session_fetch(ALL, session_id=424242, session_epoch=1),
                           ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert_top_level_error(ctx.session_fetch(ALL, session_id=0, session_epoch=3),
                           ErrorCode.FETCH_SESSION_ID_NOT_FOUND)


def test_epochs_wrap_from_max_int_to_one(ctx):
    session_id, _ = open_session(ctx)
    ctx.node.fetch_sessions.get(session_id).epoch = MAX_EPOCH
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=MAX_EPOCH).error_code == 0
    assert_top_level_error(ctx.session_fetch({}, session_id=session_id, session_epoch=MAX_EPOCH),
                           ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=1).error_code == 0
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=2).error_code == 0


@pytest.mark.parametrize("client_id, peer, principal", [("intruder", "127.0.0.1:50000", "User:ANONYMOUS"),
                                                        ("test", "10.9.9.9:50000", "User:ANONYMOUS"),
                                                        ("test", "127.0.0.1:50000", "User:mallory")])
def test_only_the_creating_principal_may_use_or_close_a_session(ctx, client_id, peer, principal):
    """Bound to the client id, the host and the connection's principal (issue 24, item 5): the
    same client id from the same host, logged in as another user, cannot use it either."""
    session_id, _ = open_session(ctx)
    for epoch in (1, 0, -1):  # use, close-and-reopen, close
        response = ctx.session_fetch(ALL, session_id=session_id, session_epoch=epoch, client_id=client_id, peer=peer,
                                     principal=principal)
        if epoch > 0:
            assert_top_level_error(response, ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert ctx.node.fetch_sessions.get(session_id) is not None
    # The owner (same client id and host, another port) carries on at the epoch it expects.
    response = ctx.session_fetch({}, session_id=session_id, session_epoch=1, peer="127.0.0.1:61000")
    assert (response.error_code, response.session_id) == (0, session_id)


@pytest.mark.parametrize("created_at, used_at", [(12, 13), (13, 12), (7, 16), (17, 11)])
def test_a_session_used_across_the_topic_id_boundary_is_a_topic_id_error(ctx, created_at, used_at):
    session_id, _ = open_session(ctx, version=created_at)
    assert_top_level_error(ctx.session_fetch({}, session_id=session_id, session_epoch=1, version=used_at),
                           ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    # Like Kafka, a wrong epoch is reported first.
    assert_top_level_error(ctx.session_fetch({}, session_id=session_id, session_epoch=5, version=used_at),
                           ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=1, version=created_at).error_code == 0


def test_id_zero_closes_the_session_and_opens_a_new_one(ctx):
    old, _ = open_session(ctx)
    response = ctx.session_fetch(ALL, session_id=old, session_epoch=0)
    assert response.session_id not in (0, old) and set(parts(response)) == set(T)
    assert ctx.node.fetch_sessions.get(old) is None and len(ctx.node.fetch_sessions) == 1
    assert_top_level_error(ctx.session_fetch({}, session_id=old, session_epoch=1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    assert ctx.session_fetch({}, session_id=response.session_id, session_epoch=1).error_code == 0
    assert ctx.node.fetch_sessions.evictions == 0


def test_id_minus_one_closes_the_session_and_fetches_sessionless(ctx):
    produce_flushed(ctx, T[1], ["b"])
    old, _ = open_session(ctx)
    response = ctx.session_fetch(ALL, session_id=old, session_epoch=-1)
    assert response.session_id == 0 and values_in(parts(response)[T[1]]) == [b"b"]
    assert len(ctx.node.fetch_sessions) == 0 and ctx.node.fetch_sessions.evictions == 0
    assert_top_level_error(ctx.session_fetch({}, session_id=old, session_epoch=1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND)


def test_removing_every_partition_ends_the_session(ctx):
    session_id, _ = open_session(ctx)
    response = ctx.session_fetch({}, session_id=session_id, session_epoch=1, forgotten=T[:2])
    assert response.session_id == session_id
    assert len(ctx.node.fetch_sessions.get(session_id)) == 1
    response = ctx.session_fetch({}, session_id=session_id, session_epoch=2, forgotten=T[2:])
    assert (response.error_code, response.session_id, response.responses) == (0, 0, [])
    assert len(ctx.node.fetch_sessions) == 0
    assert not ctx.node.fetch_sessions.journal.recording  # no session left to read changes


def test_forgotten_partitions_are_no_longer_answered_and_can_come_back(ctx):
    session_id, _ = open_session(ctx)
    ctx.session_fetch({}, session_id=session_id, session_epoch=1, forgotten=[T[1]])
    produce_flushed(ctx, T[1], ["b"])
    assert parts(ctx.session_fetch({}, session_id=session_id, session_epoch=2)) == {}
    back = parts(ctx.session_fetch({T[1]: 1}, session_id=session_id, session_epoch=3))
    assert list(back) == [T[1]] and values_in(back[T[1]]) == [b"b"]


def test_by_topic_id_from_v13(ctx):
    produce_flushed(ctx, T[2], ["c"])
    session_id, response = open_session(ctx, version=13)
    topic_id = ctx.node.topics.get("t").topic_id
    assert [t.topic_id for t in response.responses] == [topic_id]
    ctx.session_fetch({}, session_id=session_id, session_epoch=1, version=13, forgotten=T[:2])
    assert len(ctx.node.fetch_sessions.get(session_id)) == 1
    produce_flushed(ctx, T[2], ["d"])
    out = ctx.session_fetch({}, session_id=session_id, session_epoch=2, version=13)
    assert out.responses[0].topic_id == topic_id and [p.partition_index for p in out.responses[0].partitions] == [2]


# -- what an incremental response carries ---------------------------------------------------

def test_an_incremental_response_carries_only_changed_partitions(ctx):
    client = FetchClient(ctx, client_id="test")
    for tp in T:
        client.subscribe(*tp)
    assert set(parts(client.poll())) == set(T)          # full
    assert parts(client.poll()) == {}                    # nothing new
    ctx.produce_ok(*T[1], ["x"])
    assert parts(client.poll()) == {}                    # appended, HW not moved: not visible
    ctx.flush()
    changed = parts(client.poll())
    assert list(changed) == [T[1]] and values_in(changed[T[1]]) == [b"x"] and changed[T[1]].high_watermark == 2
    assert parts(client.poll()) == {}                    # new position named, nothing else changed
    delete_records(ctx, T[1], 2)
    moved = parts(client.poll())
    assert list(moved) == [T[1]] and moved[T[1]].log_start_offset == 2 and values_in(moved[T[1]]) == []
    assert client.records[T[1]] == [(1, b"x")]


def test_a_hw_move_without_new_records_is_sent(ctx):
    client = FetchClient(ctx, client_id="test")
    client.subscribe(*T[0])
    client.poll()
    ctx.produce_ok(*T[0], ["a"])
    ctx.flush()
    # The fetcher's position stays behind (it did not ask for more); only the HW moved.
    client.positions[T[0]] = 1
    assert parts(client.poll())[T[0]].high_watermark == 2


def test_error_partitions_are_resent_until_fixed_and_then_sent_once_more(ctx):
    session_id, _ = open_session(ctx)
    # Offset 9 is past the HW: the error is sent, and sent again while the session still holds it.
    for epoch in (1, 2):
        named = {T[0]: 9} if epoch == 1 else {}
        out = parts(ctx.session_fetch(named, session_id=session_id, session_epoch=epoch))
        assert list(out) == [T[0]] and out[T[0]].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Back to a valid offset with nothing new: the cached HW was reset by the error, so the
    # partition comes back once with its HW.
    out = parts(ctx.session_fetch({T[0]: 1}, session_id=session_id, session_epoch=3))
    assert list(out) == [T[0]] and (out[T[0]].error_code, out[T[0]].high_watermark) == (0, 1)
    assert parts(ctx.session_fetch({}, session_id=session_id, session_epoch=4)) == {}


def test_a_fenced_partition_is_answered_on_every_incremental_fetch(ctx):
    epoch = ctx.node.leader_epoch
    session_id, _ = open_session(ctx, {T[0]: 1}, current_leader_epoch=epoch)
    stale = parts(ctx.session_fetch({T[0]: 1}, session_id=session_id, session_epoch=1, current_leader_epoch=epoch - 1))
    assert stale[T[0]].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert stale[T[0]].current_leader.leader_epoch == epoch
    again = parts(ctx.session_fetch({}, session_id=session_id, session_epoch=2))
    assert again[T[0]].error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_a_diverging_epoch_is_sent_until_the_fetcher_moves(tmp_path):
    ctx = NodeTestContext.builder(tmp_path).with_topic("t").build()
    ctx.produce_ok("t", 0, ["a"])
    ctx.flush()
    old_epoch = ctx.node.leader_epoch
    ctx = ctx.restart()
    ctx.produce_ok("t", 0, ["b"])
    ctx.flush()
    session_id, response = open_session(ctx, {T[0]: 5}, last_fetched_epoch=old_epoch)
    assert parts(response)[T[0]].diverging_epoch.end_offset == 2
    again = parts(ctx.session_fetch({}, session_id=session_id, session_epoch=1))
    assert (again[T[0]].diverging_epoch.epoch, again[T[0]].diverging_epoch.end_offset) == (old_epoch, 2)
    fixed = parts(ctx.session_fetch({T[0]: 2}, session_id=session_id, session_epoch=2,
                                    last_fetched_epoch=old_epoch))
    assert fixed[T[0]].diverging_epoch == m.FetchResponse.EpochEndOffset()
    assert values_in(fixed[T[0]], from_offset=2) == [b"b"]


def test_must_send_reports_a_snapshot_id_or_diverging_epoch_even_without_the_stop_flag():
    session = FetchSession(1, privileged=True, principal=None, uses_topic_ids=False, now_ms=0)
    slot = session.upsert(fetched(("t", 0), "t", 0, fetch_offset=5))
    data = m.FetchResponse.PartitionData(partition_index=0, high_watermark=5, last_stable_offset=5,
                                         log_start_offset=0, records=b"")
    session.record_sent(slot, data)
    assert not session.must_send(slot, data, False)
    data.snapshot_id = m.FetchResponse.SnapshotId(end_offset=4, epoch=1)
    assert session.must_send(slot, data, False)
    data.snapshot_id = m.FetchResponse.SnapshotId()
    data.diverging_epoch = m.FetchResponse.EpochEndOffset(epoch=1, end_offset=3)
    assert session.must_send(slot, data, False)


def test_partitions_that_returned_records_rotate_so_none_starves(ctx):
    for tp in T:
        for i in range(3):
            ctx.produce_ok(*tp, [f"{tp[1]}-{i}" * 20])
    ctx.flush()
    # A response limit of 1 byte: each fetch carries exactly one batch (KIP-74), from the first
    # partition in the session's order that has data.
    client = FetchClient(ctx, client_id="test", max_bytes=1)
    for tp in T:
        client.subscribe(*tp, offset=1)
    served = []
    for _ in range(9):
        with_records = [tp for tp, d in parts(client.poll()).items() if values_in(d)]
        assert len(with_records) == 1
        served += with_records
    assert served == T * 3
    assert all(len(client.records[tp]) == 3 for tp in T)


def test_a_sessionless_client_with_the_same_limit_would_starve_later_partitions(ctx):
    """The control for the rotation test: without a session the order is the request's."""
    for tp in T:
        for i in range(2):
            ctx.produce_ok(*tp, [f"{tp[1]}-{i}" * 20])
    ctx.flush()
    client = FetchClient(ctx, client_id="test", max_bytes=1, use_sessions=False)
    for tp in T:
        client.subscribe(*tp, offset=1)
    served = [next(tp for tp, d in parts(client.poll()).items() if values_in(d)) for _ in range(2)]
    assert served == [T[0], T[0]]


# -- the cache as clients see it ------------------------------------------------------------

def slots_ctx(tmp_path, slots):
    return (NodeTestContext.builder(tmp_path).with_config(max_incremental_fetch_session_cache_slots=slots)
            .with_topic("t", 3).build())


def test_with_no_free_slot_a_full_fetch_still_returns_data_without_a_session(tmp_path):
    ctx = slots_ctx(tmp_path, 1)
    produce_flushed(ctx, T[0], ["a"])
    first, _ = open_session(ctx, client_id="one")
    response = ctx.session_fetch(ALL, session_id=0, session_epoch=0, client_id="two")
    assert response.session_id == 0 and values_in(parts(response)[T[0]]) == [b"a"]
    assert ctx.node.fetch_sessions.evictions == 0 and ctx.node.fetch_sessions.get(first) is not None


def test_a_follower_evicts_a_consumer_which_then_falls_back_to_full_fetches(tmp_path):
    ctx = slots_ctx(tmp_path, 1)
    consumer = FetchClient(ctx, client_id="consumer")
    consumer.subscribe(*T[0])
    consumer.poll()
    assert consumer.session_id != 0
    follower = FetchClient(ctx, client_id="follower", replica_id=2)
    follower.subscribe(*T[1])
    follower.poll()
    assert follower.session_id != 0 and ctx.node.fetch_sessions.evictions == 1
    produce_flushed(ctx, T[0], ["late"])
    consumer.poll()
    assert consumer.top_errors == [ErrorCode.FETCH_SESSION_ID_NOT_FOUND]
    response = consumer.poll()  # (0, 0): no slot (the follower is young and privileged), data anyway
    assert response.session_id == 0 and consumer.records[T[0]] == [(1, b"late")]
    assert ctx.node.stats.fetch_session_stats() == {"sessions": 1, "partitions_cached": 1, "evictions": 1}


@pytest.mark.parametrize("used_in_between", [False, True])
def test_using_a_session_keeps_it_from_idle_eviction(tmp_path, used_in_between):
    ctx = slots_ctx(tmp_path, 1)
    owner = FetchClient(ctx, client_id="owner")
    owner.subscribe(*T[0])
    owner.poll()
    ctx.advance(100_000)
    if used_in_between:
        owner.poll()  # an incremental fetch counts as a use (KAFKA-9137)
    ctx.advance(50_000)
    newcomer = ctx.session_fetch({T[1]: 1}, session_id=0, session_epoch=0, client_id="newcomer")
    if not used_in_between:  # idle for 150 s: evicted
        assert newcomer.session_id != 0 and ctx.node.fetch_sessions.get(owner.session_id) is None
        return
    assert newcomer.session_id == 0 and ctx.node.fetch_sessions.get(owner.session_id) is not None
    # Older than the eviction time: a newcomer with more partitions evicts it even when busy.
    bigger = ctx.session_fetch({T[1]: 1, T[2]: 1}, session_id=0, session_epoch=0, client_id="bigger")
    assert bigger.session_id != 0
    assert ctx.node.fetch_sessions.get(owner.session_id) is None


def test_a_lost_response_makes_the_next_incremental_fetch_an_epoch_error_then_full(ctx):
    client = FetchClient(ctx, client_id="test")
    client.subscribe(*T[0])
    client.poll()
    produce_flushed(ctx, T[0], ["a"])
    client.lose_response()  # the server sent "a" and moved its epoch; the client never saw it
    client.poll()
    assert client.top_errors == [ErrorCode.INVALID_FETCH_SESSION_EPOCH]
    client.poll()  # (id, 0): a full fetch re-sends what was lost
    assert client.records[T[0]] == [(1, b"a")] and client.session_id != 0


# -- long polls -------------------------------------------------------------------------------

def test_an_incremental_fetch_with_nothing_new_long_polls_instead_of_returning_at_once(ctx):
    session_id, _ = open_session(ctx)
    request = ctx.session_fetch_request({}, session_id=session_id, session_epoch=1, max_wait_ms=500)
    outcome = ctx.deliver(request, 12)
    assert isinstance(outcome, Park)
    ctx.advance(499)
    assert outcome.token not in ctx.completions
    ctx.advance(1)
    response = ctx.completions[outcome.token]
    assert (response.error_code, response.session_id, response.responses) == (0, session_id, [])


def test_a_parked_incremental_fetch_wakes_for_any_partition_of_its_session(ctx):
    session_id, _ = open_session(ctx)
    # T[0] is named (so it is read at park time); T[2] is idle in the session.
    request = ctx.session_fetch_request({T[0]: 1}, session_id=session_id, session_epoch=1, max_wait_ms=5000)
    outcome = ctx.deliver(request, 12)
    assert isinstance(outcome, Park)
    produce_flushed(ctx, T[2], ["woke"])
    response = ctx.completions[outcome.token]
    out = parts(response)
    assert list(out) == [T[2]] and values_in(out[T[2]]) == [b"woke"]
    assert ctx.session_fetch({}, session_id=session_id, session_epoch=2).error_code == 0


def test_a_follower_session_sees_data_above_the_high_watermark_like_a_sessionless_follower(ctx):
    with_session = FetchClient(ctx, client_id="f1", replica_id=1)
    without = FetchClient(ctx, client_id="f2", replica_id=2, use_sessions=False)
    for client in (with_session, without):
        client.subscribe(*T[0])
        client.poll()
        client.poll()
    ctx.produce_ok(*T[0], ["unflushed"])
    for client in (with_session, without):
        client.poll()
    assert with_session.records == without.records == {T[0]: [(1, b"unflushed")]}
    assert with_session.session_id != 0


def test_below_v7_there_are_no_sessions(ctx):
    response = ctx.session_fetch(ALL, session_id=0, session_epoch=0, version=6)
    assert response.session_id == 0 and len(ctx.node.fetch_sessions) == 0
    produce_flushed(ctx, T[0], [batch_of(["z"]) and "z"])
    assert values_in(parts(ctx.session_fetch(ALL, version=4))[T[0]]) == [b"z"]


# -- partitions cached before their topic existed ------------------------------------------------

NEW = ("new", 0)


def session_on_a_missing_topic(ctx):
    client = FetchClient(ctx, client_id="test")
    client.subscribe(*T[0], offset=1)
    client.subscribe(*NEW)
    first = parts(client.poll())
    assert first[NEW].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and client.session_id != 0
    ctx.produce_ok(*NEW, ["x"])  # auto-creates the topic
    ctx.flush()
    return client


def test_a_partition_cached_before_its_topic_existed_is_answered_once_per_change(ctx):
    client = session_on_a_missing_topic(ctx)
    assert list(parts(client.poll())) == [NEW] and client.records[NEW] == [(1, b"x")]
    session = ctx.node.fetch_sessions.get(client.session_id)
    # Keyed like any other known partition now, so its journal entries find its slot.
    assert ctx.node.topics.partition(*NEW).session_key in session
    # The client now names it with a new position: the same slot, not a second one.
    assert parts(client.poll()) == {}
    assert len(ctx.node.fetch_sessions.get(client.session_id)) == 2
    ctx.produce_ok(*NEW, ["y"])
    ctx.flush()
    response = client.poll()
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in response.responses] == [("new", [0])]
    assert client.records[NEW] == [(1, b"x"), (2, b"y")] and client.unexpected == []


def test_updating_such_a_partition_in_the_first_fetch_after_creation_reuses_its_slot(ctx):
    client = session_on_a_missing_topic(ctx)
    client.positions[NEW] = 1  # say, reset by the application: named in the next request
    response = client.poll()
    assert [(t.topic, len(t.partitions)) for t in response.responses] == [("new", 1)]
    assert len(ctx.node.fetch_sessions.get(client.session_id)) == 2


@pytest.mark.parametrize("fetch_in_between", [False, True])
def test_such_a_partition_can_be_forgotten(ctx, fetch_in_between):
    client = session_on_a_missing_topic(ctx)
    if fetch_in_between:
        client.poll()
    client.unsubscribe(*NEW)
    client.poll()
    session = ctx.node.fetch_sessions.get(client.session_id)
    assert len(session) == 1
    ctx.produce_ok(*NEW, ["z"])
    ctx.flush()
    assert parts(client.poll()) == {} and client.unexpected == []
    assert ctx.node.topics.partition(*NEW).session_key not in session
