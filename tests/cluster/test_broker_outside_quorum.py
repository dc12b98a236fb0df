"""A node whose id is not in --voters joins as a broker: it finds the metadata leader by asking
the voters, registers, is listed by Metadata, and holds replicas (and leads some)."""
from __future__ import annotations

import time

import pytest

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import build_batch
from tests.support.cluster import KraftdCluster

kafka = pytest.importorskip("kafka")  # dev dependency: installed by `make test`
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402


def _eventually(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except kafka.errors.KafkaError as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def test_a_broker_outside_the_voters_registers_and_holds_replicas(tmp_path):
    with KraftdCluster(tmp_path, nodes=4, voter_ids=[1, 2, 3]) as cluster:
        cluster.wait_ready(30)
        admin = KafkaAdminClient(bootstrap_servers=cluster.node(4), request_timeout_ms=10000)
        _eventually(lambda: sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == [1, 2, 3, 4],
                    30, "four registered brokers, as seen from the non-voter")
        assert admin.describe_cluster()["controller_id"] in (1, 2, 3)
        admin.close()  # a client that bootstrapped before every broker registered caches an old list
        admin = KafkaAdminClient(bootstrap_servers=cluster.node(4), request_timeout_ms=10000)
        _eventually(lambda: admin.create_topics([NewTopic("wide", 4, 3)]) or True, 30, "the topic")
        hosted = _eventually(lambda: [p for p in admin.describe_topics(["wide"])[0]["partitions"]
                                      if 4 in p["replica_nodes"]], 30, "replicas on node 4")
        assert len(hosted) == 3  # 4 partitions x 3 replicas over 4 brokers, spread evenly
        _eventually(lambda: any(p["leader_id"] == 4 for p in admin.describe_topics(["wide"])[0]["partitions"]),
                    30, "node 4 to lead its preferred partition")
        producer = KafkaProducer(bootstrap_servers=cluster.node(4), acks="all", retries=10)
        for i in range(400):
            producer.send("wide", partition=i % 4, value=b"%d" % i)
        producer.flush(30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.node(4), enable_auto_commit=False, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("wide", p) for p in range(4)])
        consumer.seek_to_beginning()
        got = sorted(int(r.value) for r in consumer)
        consumer.close()
        # A partition node 4 holds no replica of: NOT_LEADER_OR_FOLLOWER, so clients refresh
        # their metadata (not UNKNOWN_TOPIC_OR_PARTITION).
        elsewhere = [p["partition_index"] for p in admin.describe_topics(["wide"])[0]["partitions"]
                     if 4 not in p["replica_nodes"]]
        admin.close()
        assert got == list(range(400))
        assert _raw_produce_error(cluster.node(4), "wide", elsewhere[0]) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def _raw_produce_error(address: str, topic: str, partition: int) -> int:
    client = WireClient(address)
    try:
        request = m.ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            m.ProduceRequest.TopicProduceData(name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(
                index=partition, records=build_batch([(None, b"x", None, 1)]))])])
        response = client.request(api.PRODUCE, 9, request)
        return response.responses[0].partition_responses[0].error_code
    finally:
        client.close()
