"""Acceptance 4: a node that was down while topics were created and the metadata log was
snapshotted (and its log start moved past what the node has) catches up by FetchSnapshot of
`__cluster_metadata`, then hosts and serves the new topics."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.cluster import KraftdCluster

kafka = pytest.importorskip("kafka")  # dev dependency: installed by `make test`
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

# Small snapshot thresholds so a few dozen topics make the metadata log snapshot itself.
ENV = {"KRAFTD_SNAPSHOT_MAX_BYTES_BETWEEN": "2000", "KRAFTD_SNAPSHOT_MIN_CHANGED_RECORDS_RATIO": "0.01",
       "KRAFTD_SNAPSHOT_START_OFFSET_LAG_TIME_MAX_MS": "3000"}
METADATA_DIR = "__cluster_metadata-0"


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _log_start(metrics: str) -> int:
    for line in metrics.splitlines():
        if line.startswith("kraftd_log_start_offset") and f'topic="__cluster_metadata"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def test_a_node_that_missed_topics_catches_up_from_a_metadata_snapshot(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        cluster.wait_ready(30)
        leader = _wait(lambda: _metadata_leader(cluster), 30, "a metadata leader")
        first = _wait(lambda: _admin(cluster.node(1)), 30, "an admin client")
        _wait(lambda: len(first.describe_cluster()["brokers"]) == 3, 30, "three registered brokers")
        first.close()
        late = max(i for i in (1, 2, 3) if i != leader)  # a follower goes away (any would do)
        others = [i for i in (1, 2, 3) if i != late]
        cluster.stop(late)
        admin = _wait(lambda: _admin(",".join(cluster.node(i) for i in others)), 30, "an admin client")
        names = [f"late-{i}" for i in range(40)]
        for start in range(0, len(names), 5):
            _create(admin, [NewTopic(n, 1, 2) for n in names[start:start + 5]])
        # The leader snapshots the metadata and, the late node being gone, moves the log start past it.
        leader_dir = None
        for i in others:
            _wait(lambda i=i: list((Path(tmp_path) / f"node{i}" / METADATA_DIR).glob("*.checkpoint")), 30,
                  f"a metadata snapshot on node {i}")
        _wait(lambda: max(_log_start(cluster.metrics(i)) for i in others) > 0, 30, "the metadata log start to move")
        node3_dir = Path(tmp_path) / f"node{late}" / METADATA_DIR
        ends_before = {p.name for p in node3_dir.glob("*.checkpoint")}

        cluster.start(late)
        _wait(lambda: {p.name for p in node3_dir.glob("*.checkpoint")} - ends_before, 30,
              "the late node to install a metadata snapshot")
        assert "fetching snapshot" in cluster.logs(late), cluster.logs(late, tail=40)
        # Node 3 now knows every topic (Metadata answered from its image)...
        admin3 = _wait(lambda: _admin(cluster.node(late)), 30, "an admin client on the late node")
        _wait(lambda: set(names) <= set(admin3.list_topics()), 30, "the late node to list the new topics")
        # ...and serves one it holds a replica of: a new RF=3 topic replicates to it.
        _create(admin, [NewTopic("after", 1, 3)])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", retries=10)
        for i in range(100):
            producer.send("after", key=b"%d" % i, value=b"v%d" % i)
        producer.flush(30)
        producer.close()
        _wait(lambda: (Path(tmp_path) / f"node{late}" / "after-0").is_dir(), 30, "the late node to host after-0")
        consumer = KafkaConsumer(bootstrap_servers=cluster.node(late), enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("after", 0)])
        consumer.seek_to_beginning()
        values = [r.value for r in consumer]
        consumer.close()
        assert values == [b"v%d" % i for i in range(100)]


def _metadata_leader(cluster) -> int | None:
    for i in cluster.running():
        for line in cluster.metrics(i).splitlines():
            if line.startswith("kraftd_metadata_leader_id "):
                leader = int(float(line.split()[1]))
                if leader > 0:
                    return leader
    return None


def _admin(bootstrap: str):
    try:
        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    except Exception:
        return None


def _create(admin, topics) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.create_topics(topics, timeout_ms=10000)
            return
        except kafka.errors.TopicAlreadyExistsError:
            return
        except kafka.errors.KafkaError as exc:  # e.g. a controller move: retriable
            if time.monotonic() > deadline:
                raise AssertionError(f"create failed: {exc!r}") from None
            time.sleep(0.5)
