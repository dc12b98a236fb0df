"""The sans-IO group coordinator driven through the Node with explicit time: KIP-394 member
ids, the delayed initial rebalance, session expiry, static members (KIP-345), commits answered
once durable, offsets expiry, and the state table."""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.groups.offsets_topic import java_string_hash, partition_for
from kraftd.quorum.groups.state import GroupState, IllegalGroupTransition, check_transition
from kraftd.quorum.outcomes import Park, Respond
from tests.quorum.node_context import NodeTestContext

PROTOCOLS = [m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")]


@pytest.fixture
def ctx(tmp_path) -> NodeTestContext:
    ctx = (NodeTestContext.builder(tmp_path).with_topic("t", partitions=2)
           .with_config(group_initial_rebalance_delay_ms=1000, offsets_topic_num_partitions=4).build())
    assert ctx.respond(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
    ctx.flush()  # the offsets partitions' epoch starts are committed: loading may begin
    return ctx


def join(ctx, member_id="", instance_id=None, version=7, session_ms=10_000):
    return ctx.deliver(m.JoinGroupRequest(group_id="g", session_timeout_ms=session_ms, rebalance_timeout_ms=5000,
                                          member_id=member_id, group_instance_id=instance_id,
                                          protocol_type="consumer", protocols=PROTOCOLS), version,
                       api_key=api.JOIN_GROUP)


def sync(ctx, member_id, generation, assignments=()):
    return ctx.deliver(m.SyncGroupRequest(group_id="g", generation_id=generation, member_id=member_id,
                                          assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(
                                              member_id=a, assignment=b) for a, b in assignments]), 5,
                       api_key=api.SYNC_GROUP)


def heartbeat(ctx, member_id, generation):
    return ctx.respond(m.HeartbeatRequest(group_id="g", generation_id=generation, member_id=member_id), 4,
                       api_key=api.HEARTBEAT).error_code


def test_kafka_hash_partitioning():
    assert java_string_hash("") == 0 and java_string_hash("a") == 97
    # Java: "hello".hashCode() == 99162322, "Hello World".hashCode() == -862545276 (wraps)
    assert java_string_hash("hello") == 99162322 and java_string_hash("Hello World") == -862545276
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


def test_state_table_refuses_illegal_transitions():
    check_transition(GroupState.EMPTY, GroupState.PREPARING_REBALANCE)
    with pytest.raises(IllegalGroupTransition):
        check_transition(GroupState.EMPTY, GroupState.STABLE)
    with pytest.raises(IllegalGroupTransition):
        check_transition(GroupState.DEAD, GroupState.EMPTY)


def test_first_join_needs_a_member_id_then_waits_out_the_initial_delay(ctx):
    first = join(ctx)
    assert isinstance(first, Respond) and first.response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    member_id = first.response.member_id
    parked = join(ctx, member_id)
    assert isinstance(parked, Park)
    ctx.advance(999)
    assert parked.token not in ctx.completions
    ctx.advance(1)  # the initial delay is over: generation 1 with one member, its leader
    answer = ctx.completions[parked.token]
    assert (answer.error_code, answer.generation_id, answer.leader, answer.protocol_name) == (0, 1, member_id, "range")
    assert [mm.member_id for mm in answer.members] == [member_id]

    synced = sync(ctx, member_id, 1, [(member_id, b"assignment")])
    assert isinstance(synced, Park)  # the assignment is stored before anyone hears it
    ctx.flush()
    assert ctx.completions[synced.token].assignment == b"assignment"
    assert heartbeat(ctx, member_id, 1) == 0
    assert heartbeat(ctx, member_id, 0) == ErrorCode.ILLEGAL_GENERATION


def _stable_member(ctx, instance_id=None):
    member_id = join(ctx, instance_id=instance_id).response.member_id if instance_id is None else ""
    parked = join(ctx, member_id, instance_id=instance_id)
    ctx.advance(1000)
    answer = ctx.completions[parked.token]
    synced = sync(ctx, answer.member_id, answer.generation_id, [(answer.member_id, b"a")])
    ctx.flush()
    assert ctx.completions[synced.token].error_code == 0
    return answer.member_id, answer.generation_id


def test_a_silent_member_is_removed_after_its_session(ctx):
    member_id, generation = _stable_member(ctx)
    ctx.advance(9_000)
    assert heartbeat(ctx, member_id, generation) == 0
    ctx.advance(10_001)  # no heartbeat for a whole session
    assert heartbeat(ctx, member_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    described = ctx.respond(m.DescribeGroupsRequest(groups=["g"]), 5, api_key=api.DESCRIBE_GROUPS)
    assert described.groups[0].group_state == "Empty"


def test_a_static_member_rejoining_replaces_its_old_member_id(ctx):
    """KIP-345: a restarted static member joins without its member id and gets a new one; the old
    id is fenced. (It was the leader here, so it leads a new generation, which it reaches at
    once: it is the only member.)"""
    old_id, generation = _stable_member(ctx, instance_id="instance-1")
    again = join(ctx, "", instance_id="instance-1")
    assert isinstance(again, Respond)
    new_id = again.response.member_id
    assert new_id != old_id and new_id.startswith("instance-1-")
    assert (again.response.error_code, again.response.generation_id, again.response.leader) == (0, generation + 1, new_id)
    assert heartbeat(ctx, old_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(ctx, new_id, generation + 1) == 0


def test_a_static_follower_restarting_with_other_metadata_keeps_the_generation(ctx):
    """A restarted Java consumer's subscription no longer lists its owned partitions or its old
    generation, so its metadata bytes differ; the protocol is the same, so (as in Kafka) there
    is no rebalance: it gets the current generation, then its old assignment in SyncGroup."""
    first, second = join(ctx, "", instance_id="instance-1"), join(ctx, "", instance_id="instance-2")
    ctx.advance(1000)
    leader, follower = (ctx.completions[p.token] for p in (first, second))
    generation = leader.generation_id
    assert leader.leader == leader.member_id and follower.generation_id == generation
    synced = [sync(ctx, follower.member_id, generation),
              sync(ctx, leader.member_id, generation, [(leader.member_id, b"a1"), (follower.member_id, b"a2")])]
    ctx.flush()
    assert [ctx.completions[s.token].assignment for s in synced] == [b"a2", b"a1"]

    other = [m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x03other")]
    again = ctx.deliver(m.JoinGroupRequest(group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=5000,
                                           member_id="", group_instance_id="instance-2",
                                           protocol_type="consumer", protocols=other), 7, api_key=api.JOIN_GROUP)
    assert isinstance(again, Respond)
    new_id = again.response.member_id
    assert (again.response.error_code, again.response.generation_id) == (0, generation) and new_id != follower.member_id
    resynced = sync(ctx, new_id, generation)
    ctx.flush()
    answer = resynced.response if isinstance(resynced, Respond) else ctx.completions[resynced.token]
    assert (answer.error_code, answer.assignment) == (0, b"a2")
    assert heartbeat(ctx, leader.member_id, generation) == 0   # the leader was not asked to rejoin
    assert heartbeat(ctx, follower.member_id, generation) == ErrorCode.UNKNOWN_MEMBER_ID


def test_commits_are_answered_once_durable_and_expire_with_the_group(ctx):
    R = m.OffsetCommitRequest
    commit = ctx.deliver(R(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        R.OffsetCommitRequestTopic(name="t", partitions=[R.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_leader_epoch=3, committed_metadata="")])]), 9,
        api_key=api.OFFSET_COMMIT)
    assert isinstance(commit, Park)
    ctx.flush()
    assert ctx.completions[commit.token].topics[0].partitions[0].error_code == 0

    def fetched():
        F = m.OffsetFetchRequest
        out = ctx.respond(F(group_id="g", topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), 7,
                          api_key=api.OFFSET_FETCH)
        p = out.topics[0].partitions[0]
        return p.committed_offset, p.committed_leader_epoch
    assert fetched() == (42, 3)
    ctx.advance(7 * 24 * 3600 * 1000 + 600_000)   # past offsets_retention_minutes, at a check
    assert fetched() == (-1, -1)
