"""Nodes prove who they are (issue 21), against real 3-node clusters with a cluster secret, with
raw Kafka frames as a hostile client would send them:

- forged follower Fetches (each follower's replica id) while both followers are cut off from the
  leader: an acks=all produce is never acknowledged (before, the forged fetches moved the HW);
- forged Vote, BeginQuorumEpoch and EndQuorumEpoch naming every partition and
  `__cluster_metadata`, with higher epochs and a longer log: no leader or epoch changes, and
  acks=all writes go on;
- a forged BrokerRegistration for a real node id changes no address in any node's Metadata;
  AllocateProducerIds from a client is refused;
- a fourth node with another secret never joins, and both sides say why in their logs;
- a --voters cluster without a secret refuses to start, naming cluster_secret.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from tests.cluster.support import gauge, metadata, samples, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "guarded"
PARTITIONS = 3
REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
METADATA_TOPIC = "__cluster_metadata"
FAR_EPOCH = 1_000
FAR_OFFSET = 1_000_000


def _ask(address: str, key: int, version: int, request, client_id: str = "hostile"):
    client = WireClient(address, client_id=client_id, timeout=30)
    try:
        return client.request(key, version, request)
    finally:
        client.close()


def _produce_request(partition: int, acks: int = -1, timeout_ms: int = 20_000):
    batch = build_batch([(b"k", b"v%d" % i, [], 1_000 + i) for i in range(5)])
    return m.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        m.ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=partition, records=batch)])])


def _produce(address: str, partition: int, **kw):
    r = _ask(address, api.PRODUCE, 9, _produce_request(partition, **kw), client_id="producer")
    return r.responses[0].partition_responses[0]


def _forged_fetch(topic_id: uuid.UUID, partition: int, replica_id: int, offset: int, epoch: int, version: int):
    fetch_partition = m.FetchRequest.FetchPartition(partition=partition, current_leader_epoch=epoch,
                                                   fetch_offset=offset, last_fetched_epoch=epoch,
                                                   log_start_offset=0, partition_max_bytes=1 << 20)
    return m.FetchRequest(replica_id=replica_id, replica_state=m.FetchRequest.ReplicaState(
        replica_id=replica_id, replica_epoch=-1), max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic=TOPIC, topic_id=topic_id,
                                                                          partitions=[fetch_partition])])


def _placement(cluster: KraftdCluster) -> dict[int, tuple[int, int]]:
    """{partition: (leader, epoch)} once every node agrees and every ISR is full."""
    def agreed():
        answers = [metadata(cluster.node(i), [TOPIC]).topics.get(TOPIC) for i in cluster.ids]
        if any(a is None or a[0] or len(a[1]) < PARTITIONS for a in answers):
            return None
        views = [{p: (v.leader, v.leader_epoch, len(v.isr)) for p, v in a[1].items()} for a in answers]
        if any(v != views[0] for v in views) or any(e[0] < 0 or e[2] < 3 for e in views[0].values()):
            return None
        return {p: (leader, epoch) for p, (leader, epoch, _) in views[0].items()}
    return wait_until(agreed, 60, "every node to agree on the leaders, with full ISRs")


def _metadata_quorum(cluster: KraftdCluster) -> tuple[int, int]:
    leader = int(gauge(cluster, cluster.ids[0], "kraftd_metadata_leader_id"))
    return leader, int(gauge(cluster, leader, "kraftd_leader_epoch", topic=METADATA_TOPIC, partition=0))


def test_forged_follower_fetches_never_acknowledge_a_write_no_follower_has(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, proxies=True) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        placement = _placement(cluster)
        leader, epoch = placement[0]
        followers = [i for i in cluster.ids if i != leader]
        assert _produce(cluster.node(leader), 0).error_code == 0
        topic_id = metadata_topic_id(cluster.node(leader))
        for follower in followers:
            cluster.partition(leader, follower)

        answer: dict = {}
        producing = threading.Thread(target=lambda: answer.update(r=_produce(cluster.node(leader), 0)))
        producing.start()
        end = wait_until(lambda: _log_end_past(cluster, leader), 10, "the leader to append the new batch")
        refusals = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and producing.is_alive():
            for follower in followers:
                for version in (12, 17):  # replica_id (v12) and ReplicaState (v15+)
                    r = _ask(cluster.node(leader), api.FETCH, version,
                             _forged_fetch(topic_id, 0, follower, end, epoch, version))
                    refusals.append(r.error_code)
            time.sleep(0.05)
        producing.join(30)
        assert refusals and set(refusals) == {REFUSED}, refusals
        assert answer["r"].error_code != 0, f"acks=all write acknowledged with both followers cut off: {answer['r']}"
        hw = gauge(cluster, leader, "kraftd_high_watermark", topic=TOPIC, partition=0)
        assert hw is None or hw < end, f"the leader's HW moved to {hw} over data no follower has (end {end})"
        cluster.heal_all()


def metadata_topic_id(address: str) -> uuid.UUID:
    r = _ask(address, api.METADATA, 12, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                                          allow_auto_topic_creation=False,
                                                          include_topic_authorized_operations=False))
    return r.topics[0].topic_id


def _log_end_past(cluster: KraftdCluster, leader: int) -> int | None:
    end = gauge(cluster, leader, "kraftd_log_end_offset", topic=TOPIC, partition=0)
    hw = gauge(cluster, leader, "kraftd_high_watermark", topic=TOPIC, partition=0)
    return int(end) if end is not None and hw is not None and end > hw else None


def test_forged_elections_and_registrations_change_nothing(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        placement = _placement(cluster)
        quorum = _metadata_quorum(cluster)
        brokers = metadata(cluster.node(1), []).brokers
        groups = [(TOPIC, p) for p in range(PARTITIONS)] + [(METADATA_TOPIC, 0)]

        def by_topic(make):
            topics: dict = {}
            for topic, p in groups:
                topics.setdefault(topic, []).append(make(p))
            return topics

        for target in cluster.ids:
            for claimed in cluster.ids:
                vote = m.VoteRequest(cluster_id=None, voter_id=target, topics=[
                    m.VoteRequest.TopicData(topic_name=t, partitions=ps) for t, ps in by_topic(
                        lambda p, c=claimed: m.VoteRequest.PartitionData(
                            partition_index=p, replica_epoch=FAR_EPOCH, replica_id=c, last_offset_epoch=FAR_EPOCH,
                            last_offset=FAR_OFFSET, pre_vote=False)).items()])
                begin = m.BeginQuorumEpochRequest(cluster_id=None, voter_id=target, topics=[
                    m.BeginQuorumEpochRequest.TopicData(topic_name=t, partitions=ps) for t, ps in by_topic(
                        lambda p, c=claimed: m.BeginQuorumEpochRequest.PartitionData(
                            partition_index=p, leader_id=c, leader_epoch=FAR_EPOCH)).items()])
                end = m.EndQuorumEpochRequest(cluster_id=None, topics=[
                    m.EndQuorumEpochRequest.TopicData(topic_name=t, partitions=ps) for t, ps in by_topic(
                        lambda p, c=claimed: m.EndQuorumEpochRequest.PartitionData(
                            partition_index=p, leader_id=c, leader_epoch=FAR_EPOCH,
                            preferred_successors=[target])).items()])
                for key, version, request in ((api.VOTE, 2, vote), (api.BEGIN_QUORUM_EPOCH, 1, begin),
                                              (api.END_QUORUM_EPOCH, 1, end)):
                    # As a plain client, and as a client claiming to be a node by its client id.
                    for client_id in ("hostile", f"kraftd-node-{claimed}"):
                        r = _ask(cluster.node(target), key, version, request, client_id=client_id)
                        assert r.error_code == REFUSED and r.topics == [], (key, r)
            forged = m.BrokerRegistrationRequest(broker_id=target % 3 + 1, cluster_id=metadata(cluster.node(1)).cluster_id,
                                                 incarnation_id=uuid.uuid4(), listeners=[
                    m.BrokerRegistrationRequest.Listener(name="PLAINTEXT", host="evil.example", port=6666,
                                                         security_protocol=0)], features=[], rack=None,
                                                 is_migrating_zk_broker=False, log_dirs=[], previous_broker_epoch=-1)
            assert _ask(cluster.node(target), api.BROKER_REGISTRATION, 0, forged).error_code == REFUSED
            allocate = m.AllocateProducerIdsRequest(broker_id=target, broker_epoch=-1)
            assert _ask(cluster.node(target), api.ALLOCATE_PRODUCER_IDS, 0, allocate).error_code == REFUSED

        time.sleep(1.0)  # a forged request that was believed would show by now
        assert _placement(cluster) == placement
        assert _metadata_quorum(cluster) == quorum
        for i in cluster.ids:
            assert metadata(cluster.node(i), []).brokers == brokers, f"node {i} gives out another address"
        for p, (leader, _) in placement.items():
            assert _produce(cluster.node(leader), p).error_code == 0, "acks=all writes stopped"
        refused = sum(v for (name, labels), v in samples(cluster, quorum[0]).items()
                      if name == "kraftd_errors_total" and dict(labels).get("code") == str(int(REFUSED)))
        assert refused >= 3 * 2 * 3, "the refusals are counted in kraftd_errors_total"


def test_a_node_with_another_secret_never_joins_and_says_why(tmp_path):
    cluster = KraftdCluster(tmp_path, nodes=4, voter_ids=[1, 2, 3])
    cluster.process(4).env["KRAFTD_CLUSTER_SECRET"] = "not-the-cluster-secret"
    with cluster:
        wait_until(lambda: all(sorted(metadata(cluster.node(i), []).brokers) == [1, 2, 3] for i in (1, 2, 3))
                   and gauge(cluster, 1, "kraftd_metadata_leader_id") in (1.0, 2.0, 3.0), 60,
                   "the three voters to form the cluster")
        # Through the voters: node 4 is no member, and what it is sent it cannot forward.
        admin = AdminClient({"bootstrap.servers": ",".join(cluster.node(i) for i in (1, 2, 3))})
        admin.create_topics([NewTopic(TOPIC, 4, 3)])[TOPIC].result(60)

        def both_sides_logged():
            outsider = cluster.logs(4)
            voters = "\n".join(cluster.logs(i) for i in (1, 2, 3))
            return ("node authentication failed" in outsider and "cluster secret" in outsider
                    and "node authentication refused" in voters and "cluster secret" in voters)

        wait_until(both_sides_logged, 30, "node 4 and the voters to log the failed authentication")
        time.sleep(3)  # registration and fetch retries had time to get through, were they believed
        for i in (1, 2, 3):
            view = metadata(cluster.node(i), [TOPIC])
            assert sorted(view.brokers) == [1, 2, 3], f"node {i} lists node 4"
            assert all(4 not in p.replicas and 4 not in p.isr for p in view.partitions(TOPIC).values())
        leader = int(gauge(cluster, 1, "kraftd_metadata_leader_id"))
        observers = _ask(cluster.node(leader), api.DESCRIBE_QUORUM, 2, m.DescribeQuorumRequest(topics=[
            m.DescribeQuorumRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[
                m.DescribeQuorumRequest.PartitionData(partition_index=0)])])).topics[0].partitions[0]
        assert [o.replica_id for o in observers.observers] == [], "node 4 is counted as an observer"
        assert sorted(v.replica_id for v in observers.current_voters) == [1, 2, 3]
        # Counted wherever node 4 knocked (it asks the voters in turn, not only the leader).
        assert sum((gauge(cluster, i, "kraftd_authentication_failures_total", mechanism="SCRAM-SHA-512") or 0) for i in (1, 2, 3)) >= 1


def test_a_cluster_without_a_secret_refuses_to_start(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kraftd", "serve", "--node-id", "1", "--data-dir", str(tmp_path),
                             "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                             "--voters", "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"],
                            capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in os.environ.items() if k != "KRAFTD_CLUSTER_SECRET"})
    assert result.returncode == 2, result
    assert "cluster_secret" in result.stderr and "KRAFTD_CLUSTER_SECRET" in result.stderr
