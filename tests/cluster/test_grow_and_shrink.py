"""Issue 25's acceptance run on real processes: a cluster grows from three nodes to five and
retires one, online, under load.

Three nodes (the metadata voters) hold a 12-partition RF=3 topic and a snapshot-policy topic
(small snapshot thresholds, so its log start moves and a new replica needs FetchSnapshot). An
idempotent acks=all producer writes to both and a consumer group reads the first throughout.
Two brokers join; `kraftd cluster rebalance` spreads replicas and preferred leaders over the five
(each node within one replica of even); node 4 becomes a metadata voter; node 1 (a voter leading
partitions) is decommissioned and stopped, and Metadata stops listing it. Nothing acknowledged is
lost or duplicated, the group reads every record exactly once, and `kraftd verify` over the data
dirs finds every replica identical below the HW."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from tests.cluster.support import led_partitions, metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients

ORDERS, STATE = "orders", "state"
ENV = {"KRAFTD_SNAPSHOT_MAX_BYTES_BETWEEN": "20000", "KRAFTD_SNAPSHOT_MIN_CHANGED_RECORDS_RATIO": "0.01",
       "KRAFTD_SNAPSHOT_START_OFFSET_LAG_TIME_MAX_MS": "2000"}


def _kraftd(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", *args], capture_output=True, text=True, timeout=timeout)


class _Load:
    """An idempotent acks=all producer (both topics) and a consumer group member (orders)."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer, Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 180_000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "grow", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": True, "auto.commit.interval.ms": 500})
        self.consumer.subscribe([ORDERS])
        self.acked: set = set()
        self.failed: list = []
        self.read: list[int] = []
        self.stop_writing = threading.Event()
        self.stop_reading = threading.Event()
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.reader = threading.Thread(target=self._read, daemon=True)

    def start(self) -> None:
        self.writer.start()
        self.reader.start()

    def _done(self, err, msg) -> None:
        if err is not None:
            self.failed.append(err)
        elif msg.topic() == ORDERS:
            self.acked.add(int(msg.value()))

    def _write(self) -> None:
        n = 0
        while not self.stop_writing.is_set():
            try:
                self.producer.produce(ORDERS, value=b"%d" % n, key=b"%d" % (n % 101), on_delivery=self._done)
                if n % 4 == 0:
                    self.producer.produce(STATE, value=b"v%d" % n, key=b"k%d" % (n % 40), on_delivery=self._done)
                n += 1
            except BufferError:
                self.producer.poll(0.05)
            self.producer.poll(0.003 if n % 10 else 0.01)
        self.producer.flush(180)

    def _read(self) -> None:
        while not self.stop_reading.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.read.append(int(msg.value()))
        self.consumer.close()


def _spread(cluster: KraftdCluster, via: int, topics=None) -> tuple[Counter, Counter]:
    """(replicas per node, preferred leaders per node) over `topics` (default: every topic)."""
    view = metadata(cluster.node(via), topics)
    replicas, leaders = Counter(), Counter()
    for name in view.topics:
        for p in view.partitions(name).values():
            replicas.update(p.replicas)
            leaders[p.replicas[0]] += 1
    return replicas, leaders


def _even(counts: Counter, nodes) -> bool:
    return set(counts) <= set(nodes) and max(counts[n] for n in nodes) - min(counts[n] for n in nodes) <= 1


def test_two_nodes_join_the_cluster_rebalances_and_node_1_is_decommissioned_under_load(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    with KraftdCluster(tmp_path, nodes=5, voter_ids=[1, 2, 3], started=[1, 2, 3], env=ENV) as cluster:
        wait_cluster_ready(cluster, 30)
        bootstrap3 = ",".join(cluster.node(i) for i in (1, 2, 3))
        admin = AdminClient({"bootstrap.servers": bootstrap3})
        for name, count, configs in ((ORDERS, 12, {}), (STATE, 1, {"cleanup.policy": "snapshot"})):
            admin.create_topics([NewTopic(name, count, 3, config=configs)], operation_timeout=20)[name].result(30)
        wait_until(lambda: led_partitions(cluster.node(2), [ORDERS, STATE]), 30, "leaders")
        load = _Load(bootstrap3)
        load.start()
        try:
            wait_until(lambda: len(load.acked) > 3000 and len(load.read) > 1000, 60, "the load under way")
            cluster.start(4)
            cluster.start(5)
            wait_until(lambda: len(metadata(cluster.node(1)).brokers) == 5, 30, "five live brokers")

            out = _kraftd("cluster", "rebalance", "--bootstrap-server", cluster.node(5), "--dry-run")
            assert out.returncode == 0 and "(dry run: nothing changed)" in out.stdout, out.stdout + out.stderr
            assert " -> " in out.stdout and _spread(cluster, 5)[0].keys() <= {1, 2, 3}  # printed, not moved
            out = _kraftd("cluster", "rebalance", "--bootstrap-server", cluster.node(5))
            assert out.returncode == 0 and "rebalanced" in out.stdout, out.stdout + out.stderr
            five = (1, 2, 3, 4, 5)
            replicas, leaders = _spread(cluster, 5)  # (every topic: orders, state, __consumer_offsets)
            assert _even(replicas, five) and _even(leaders, five), (replicas, leaders, out.stdout)
            assert _even(_spread(cluster, 5, [ORDERS])[0], five)  # and each topic on its own

            out = _kraftd("quorum", "add-voter", "--bootstrap-server", cluster.node(2), "--node-id", "4")
            assert out.returncode == 0, out.stdout + out.stderr
            leading_1 = [p for p in metadata(cluster.node(2), [ORDERS]).partitions(ORDERS).values() if p.leader == 1]
            assert leading_1, "node 1 leads no partition: the decommission would not move a leader"

            out = _kraftd("cluster", "decommission", "--bootstrap-server", cluster.node(3), "--node-id", "1")
            assert out.returncode == 0 and "node 1 can be stopped" in out.stdout, out.stdout + out.stderr
            assert "node 1 (directory" in out.stdout and "is no longer a voter" in out.stdout
            replicas, leaders = _spread(cluster, 3)
            assert _even(replicas, (2, 3, 4, 5)) and _even(leaders, (2, 3, 4, 5)), (replicas, leaders)
            assert cluster.stop(1) == 0, cluster.logs(1, tail=40)
            wait_until(lambda: 1 not in metadata(cluster.node(2)).brokers, 30, "Metadata to stop listing node 1")
            wait_until(lambda: len(load.acked) > 0 and max(load.acked) > 0, 10, "")
            time.sleep(2.0)
        finally:
            load.stop_writing.set()
            load.writer.join(200)
        assert not load.failed, load.failed[:3]
        wait_until(lambda: set(load.read) >= load.acked, 120, "the group to read every acknowledged record")
        load.stop_reading.set()
        load.reader.join(30)
        counts = Counter(load.read)
        assert not [v for v, n in counts.items() if n > 1], "records read twice"
        for i in (2, 3, 4, 5):
            assert cluster.stop(i) == 0, cluster.logs(i, tail=30)
    out = _kraftd("verify", "--data-dir", *(str(tmp_path / f"node{i}") for i in (1, 2, 3, 4, 5)))
    assert out.returncode == 0 and "FINDING" not in out.stdout, out.stdout + out.stderr
