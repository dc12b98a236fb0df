"""Followers refuse like Kafka on a real 3-node cluster (issue 20): ListOffsets (replica id -1),
OffsetForLeaderEpoch and DeleteRecords sent to each follower of a partition get
NOT_LEADER_OR_FOLLOWER and change nothing there; the same requests to the leader get 0. Produce v10
to a follower names the leader and its endpoint (KIP-951). ListOffsets from a debugging consumer
(replica id -2) is answered by a follower from its own log, as on Kafka."""
from __future__ import annotations

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from tests.cluster.support import gauge, metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

TOPIC = "refusals"
RECORDS = 20
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def _ask(address: str, key: int, version: int, request):
    client = WireClient(address, client_id="refusal-tests", timeout=10)
    try:
        return client.request(key, version, request)
    finally:
        client.close()


def _list_offsets(address: str, replica_id: int = -1, timestamp: int = -1):
    r = _ask(address, api.LIST_OFFSETS, 7, m.ListOffsetsRequest(replica_id=replica_id, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))
    return r.topics[0].partitions[0]


def _end_offset(address: str, epoch: int):
    r = _ask(address, api.OFFSET_FOR_LEADER_EPOCH, 4, m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=TOPIC, partitions=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                   leader_epoch=epoch)])]))
    return r.topics[0].partitions[0]


def _delete_records(address: str, offset: int):
    r = _ask(address, api.DELETE_RECORDS, 2, m.DeleteRecordsRequest(timeout_ms=10_000, topics=[
        m.DeleteRecordsRequest.DeleteRecordsTopic(name=TOPIC, partitions=[
            m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=offset)])]))
    return r.topics[0].partitions[0]


def _produce(address: str, version: int):
    batch = build_batch([(b"k%d" % i, b"v%d" % i, [], 1_000 + i) for i in range(RECORDS)])
    r = _ask(address, api.PRODUCE, version, m.ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000,
                                                              topic_data=[m.ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
    return r, r.responses[0].partition_responses[0]


def _replica_state(cluster: KraftdCluster, node: int) -> tuple:
    """What a refused request must not change: the node's log start, log end and HW of the partition."""
    return tuple(gauge(cluster, node, name, topic=TOPIC, partition=0)
                 for name in ("kraftd_log_start_offset", "kraftd_log_end_offset", "kraftd_high_watermark"))


def test_followers_refuse_leader_only_requests_and_the_leader_answers(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, 1, 3)

        def placed():
            answers = [metadata(cluster.node(i), [TOPIC]).topics[TOPIC] for i in cluster.ids]
            if any(error or 0 not in partitions for error, partitions in answers):
                return None  # a node has not replayed the topic's creation yet
            views = [partitions[0] for _, partitions in answers]
            p = views[0]
            return p if p.leader >= 0 and len(p.isr) == 3 and all(v == p for v in views) else None

        p = wait_until(placed, 30, "every node to agree on the partition's leader with a full ISR")
        leader, epoch = p.leader, p.leader_epoch
        followers = [i for i in cluster.ids if i != leader]
        _, produced = _produce(cluster.node(leader), 9)
        assert produced.error_code == 0, produced
        end = produced.base_offset + RECORDS
        wait_until(lambda: all(_replica_state(cluster, i)[1:] == (end, end) for i in cluster.ids), 30,
                   "every replica to hold the batch and know it is committed")

        for follower in followers:
            address = cluster.node(follower)
            before = _replica_state(cluster, follower)
            assert _list_offsets(address).error_code == NOT_LEADER
            out = _end_offset(address, epoch)
            assert (out.error_code, out.leader_epoch, out.end_offset) == (NOT_LEADER, -1, -1)
            deleted = _delete_records(address, end - 5)
            assert (deleted.error_code, deleted.low_watermark) == (NOT_LEADER, -1)
            response, refused = _produce(address, 10)
            assert refused.error_code == NOT_LEADER
            assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (leader, epoch)
            [endpoint] = response.node_endpoints
            assert (endpoint.node_id, f"{endpoint.host}:{endpoint.port}") == (leader, cluster.node(leader))
            debugging = _list_offsets(address, replica_id=-2)  # the one exception: its own log end
            assert (debugging.error_code, debugging.offset) == (0, end)
            assert _replica_state(cluster, follower) == before, f"a refused request changed node {follower}"

        address = cluster.node(leader)
        latest = _list_offsets(address)
        assert (latest.error_code, latest.offset, latest.leader_epoch) == (0, end, epoch)
        out = _end_offset(address, epoch)
        assert (out.error_code, out.leader_epoch, out.end_offset) == (0, epoch, end)
        deleted = _delete_records(address, end - 5)
        assert (deleted.error_code, deleted.low_watermark) == (0, end - 5)
        wait_until(lambda: all(_replica_state(cluster, i)[0] == end - 5 for i in cluster.ids), 30,
                   "the followers to follow the leader's new log start")
