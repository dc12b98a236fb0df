"""fsync_policy=never in a cluster: followers must not wait for flushes that never come (the
benchmark found every node alone after 15 s: followers stopped fetching after their first
append, leaders lost check-quorum, elections climbed). Idle partitions keep their followers in
the ISR (their session fetches do not name them; the benchmark saw them drop out)."""
from __future__ import annotations

import time

import pytest

from tests.support.cluster import KraftdCluster

kafka = pytest.importorskip("kafka")  # dev dependency: installed by `make test`
from kafka import KafkaProducer  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return -1.0


def test_a_cluster_without_fsync_stays_formed_and_replicates(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env={"KRAFTD_FSYNC_POLICY": "never", "KRAFTD_REPLICA_LAG_TIME_MAX_MS": "2000"}) as cluster:
        cluster.wait_ready(30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=5000)
            if len(admin.describe_cluster()["brokers"]) == 3:
                break
            admin.close()
            time.sleep(0.5)
        # Not admin.create_topics: kafka-python routes it by the broker list of its bootstrap
        # Metadata, which can predate the controller's registration even though DescribeCluster
        # (above) already lists it (CI saw UnknownBrokerIdError). The harness retries.
        cluster.create_topic("nofsync", 3, 3)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", retries=10)
        futures = [producer.send("nofsync", value=b"%d" % i) for i in range(3000)]
        producer.flush(60)
        assert all(f.succeeded() for f in futures)
        epoch = _metric(cluster.metrics(1), "kraftd_metadata_epoch")
        time.sleep(6)  # several check-quorum periods (nobody resigns or stands) and 3x the ISR lag time
        assert _metric(cluster.metrics(1), "kraftd_metadata_epoch") == epoch
        for i in (1, 2, 3):
            assert len(KafkaAdminClient(bootstrap_servers=cluster.node(i)).describe_cluster()["brokers"]) == 3
        isrs = [p["isr_nodes"] for p in admin.describe_topics(["nofsync"])[0]["partitions"]]
        assert all(sorted(isr) == [1, 2, 3] for isr in isrs), isrs
