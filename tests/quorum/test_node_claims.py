"""Node-only requests and replica-id claims (issue 21), at the sans-IO core: a Fetch naming a
replica id counts as that replica's progress only from a connection authenticated as it; the
Raft and controller RPCs are refused from clients and from a node naming another node."""
from __future__ import annotations

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.quorum.node_claims import NODE_ONLY, claimed_node_ids, is_refused
from kraftd.quorum.peer import Peer

from .raft.raft_context import RaftTestContext

REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture
def leader() -> RaftTestContext:
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).append_to_log(3, 3).build()
    assert ctx.win_election() == 5
    ctx.clear_sent()
    return ctx


def _deliver(ctx: RaftTestContext, request, key: int, version: int, peer: Peer):
    from kraftd.protocol import messages
    header = messages.RequestHeader(request_api_key=key, request_api_version=version, correlation_id=1,
                                    client_id="kraftd-node-2")  # a client id proves nothing
    return ctx.node.handle(header, request, ctx.now_ms, peer)


def test_a_forged_follower_fetch_is_refused_and_counts_for_nothing(leader):
    assert leader.partition.is_leader
    request = m.FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic="t", partitions=[
                                 m.FetchRequest.FetchPartition(partition=0, current_leader_epoch=5, fetch_offset=3,
                                                               last_fetched_epoch=3, log_start_offset=0,
                                                               partition_max_bytes=1 << 20)])])
    progress = leader.group.role.progress
    for peer in (Peer("10.0.0.9:1"), Peer("10.0.0.9:1", 3)):  # a client; node 3 claiming to be 2
        out = _deliver(leader, request, api.FETCH, 12, peer)
        assert out.response.error_code == REFUSED
        assert progress.by_voter[2].end_offset == -1 and progress.by_voter[2].last_fetch_ms == -1
        assert not progress.observers
    accepted = _deliver(leader, request, api.FETCH, 12, Peer("10.0.0.2:1", 2))
    assert accepted.response.error_code == 0
    assert progress.by_voter[2].end_offset == 3  # node 2 itself: its progress counts


@pytest.mark.parametrize("version", [4, 6])
def test_old_fetch_versions_are_refused_per_partition(leader, version):
    request = m.FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                             topics=[m.FetchRequest.FetchTopic(topic="t", partitions=[
                                 m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, log_start_offset=0,
                                                               partition_max_bytes=1 << 20)])])
    out = _deliver(leader, request, api.FETCH, version, Peer("x:1")).response
    assert [p.error_code for t in out.responses for p in t.partitions] == [REFUSED]


def test_node_only_apis_need_a_node_naming_itself():
    vote = m.VoteRequest(cluster_id=None, voter_id=1, topics=[m.VoteRequest.TopicData(topic_name="t", partitions=[
        m.VoteRequest.PartitionData(partition_index=0, replica_epoch=9, replica_id=2, last_offset_epoch=9,
                                    last_offset=99)])])
    assert claimed_node_ids(api.VOTE, 2, vote) == [2]
    assert is_refused(api.VOTE, 2, vote, Peer("x:1"))          # a client
    assert is_refused(api.VOTE, 2, vote, Peer("x:1", 3))       # node 3 claiming to be 2
    assert not is_refused(api.VOTE, 2, vote, Peer("x:1", 2))   # node 2 itself
    assert NODE_ONLY == {api.VOTE, api.BEGIN_QUORUM_EPOCH, api.END_QUORUM_EPOCH, api.ALTER_PARTITION,
                         api.BROKER_REGISTRATION, api.ALLOCATE_PRODUCER_IDS, api.UPDATE_RAFT_VOTER}
    for key in NODE_ONLY:  # no claim at all is still node-only
        assert is_refused(key, 0, _empty(key), Peer("x:1"))


def test_open_apis_stay_open_to_clients():
    snapshot = m.FetchSnapshotRequest(cluster_id=None, replica_id=-1, max_bytes=1, topics=[])
    assert not is_refused(api.FETCH_SNAPSHOT, 0, snapshot, Peer("x:1"))
    snapshot.replica_id = 2
    assert is_refused(api.FETCH_SNAPSHOT, 0, snapshot, Peer("x:1"))
    describe = m.DescribeQuorumRequest(topics=[])
    assert not is_refused(api.DESCRIBE_QUORUM, 2, describe, Peer("x:1"))


def _empty(key: int):
    return {
        api.VOTE: lambda: m.VoteRequest(cluster_id=None, voter_id=1, topics=[]),
        api.BEGIN_QUORUM_EPOCH: lambda: m.BeginQuorumEpochRequest(cluster_id=None, voter_id=1, topics=[]),
        api.END_QUORUM_EPOCH: lambda: m.EndQuorumEpochRequest(cluster_id=None, topics=[]),
        api.ALTER_PARTITION: lambda: m.AlterPartitionRequest(broker_id=1, broker_epoch=-1, topics=[]),
        api.BROKER_REGISTRATION: lambda: m.BrokerRegistrationRequest(broker_id=1, cluster_id="c", listeners=[],
                                                                     features=[], rack=None),
        api.ALLOCATE_PRODUCER_IDS: lambda: m.AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1),
        api.UPDATE_RAFT_VOTER: lambda: m.UpdateRaftVoterRequest(cluster_id=None, current_leader_epoch=-1, voter_id=1,
                                                                listeners=[]),
    }[key]()
