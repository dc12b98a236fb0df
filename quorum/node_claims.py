"""Requests only a node may send, and the node ids a request claims to speak for (issue 21).

Kafka guards replica fetches and the controller and Raft APIs with CLUSTER_ACTION (and a separate
controller listener). kraftd has one listener: a connection that authenticated as node N may
send these requests naming N only. Anything else gets CLUSTER_AUTHORIZATION_FAILED and changes
nothing: a forged follower Fetch used to move the high watermark over data no follower had.

- Node-only APIs: Vote, BeginQuorumEpoch, EndQuorumEpoch, AlterPartition, BrokerRegistration,
  AllocateProducerIds, UpdateRaftVoter.
- Open APIs with a replica id: Fetch and FetchSnapshot are open to clients (replica id -1, no
  ReplicaState); a replica id >= 0 is a claim to be that node.
- DescribeQuorum is open (read only).
"""
from __future__ import annotations

from ..protocol import api
from ..protocol import messages as m
from ..protocol.errors import ErrorCode

from .peer import Peer

NODE_ONLY = frozenset({api.VOTE, api.BEGIN_QUORUM_EPOCH, api.END_QUORUM_EPOCH, api.ALTER_PARTITION,
                       api.BROKER_REGISTRATION, api.ALLOCATE_PRODUCER_IDS, api.UPDATE_RAFT_VOTER})
REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
FIRST_REPLICA_STATE_VERSION = 15
FIRST_TOP_LEVEL_FETCH_ERROR_VERSION = 7


def fetch_replica_id(request, version: int) -> int:
    return request.replica_state.replica_id if version >= FIRST_REPLICA_STATE_VERSION else request.replica_id


def claimed_node_ids(api_key: int, version: int, request) -> list[int]:
    """The node ids the sender claims to be (a Vote's candidate, a leader's id, a replica id…)."""
    if api_key == api.FETCH:
        return [fetch_replica_id(request, version)]
    if api_key == api.FETCH_SNAPSHOT:
        return [request.replica_id]
    if api_key == api.VOTE:
        return [p.replica_id for t in request.topics for p in t.partitions]
    if api_key in (api.BEGIN_QUORUM_EPOCH, api.END_QUORUM_EPOCH):
        return [p.leader_id for t in request.topics for p in t.partitions]
    if api_key in (api.ALTER_PARTITION, api.BROKER_REGISTRATION, api.ALLOCATE_PRODUCER_IDS):
        return [request.broker_id]
    if api_key == api.UPDATE_RAFT_VOTER:
        return [request.voter_id]
    return []


def is_refused(api_key: int, version: int, request, peer: Peer) -> bool:
    claims = claimed_node_ids(api_key, version, request)
    if api_key in NODE_ONLY:
        return peer.node_id is None or any(claim != peer.node_id for claim in claims)
    return any(claim >= 0 and claim != peer.node_id for claim in claims)


def refusal(api_key: int, version: int, request):
    """The answer to a refused request: CLUSTER_AUTHORIZATION_FAILED, for the whole request where
    the response has a top-level error code, else for every partition it names (Fetch v4-6)."""
    if api_key == api.FETCH and version < FIRST_TOP_LEVEL_FETCH_ERROR_VERSION:
        return m.FetchResponse(throttle_time_ms=0, responses=[
            m.FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=[
                m.FetchResponse.PartitionData(partition_index=p.partition, error_code=REFUSED, high_watermark=-1,
                                              last_stable_offset=-1, log_start_offset=-1, records=b"")
                for p in t.partitions]) for t in request.topics])
    return api.KNOWN_API_BY_KEY[api_key].response_cls(error_code=REFUSED)
