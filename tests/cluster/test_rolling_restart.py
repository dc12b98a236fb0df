"""Issue "Recovery", item 3: restart the three nodes one by one with SIGTERM while an idempotent
acks=all producer runs. The producer sees no error (retriable ones stay inside the client), no
acknowledged record is lost or duplicated, and the longest write stall is printed (the bench
reports it against its 1 s target: graceful resignation hands leadership over before exit)."""
from __future__ import annotations

import threading
import time

import pytest

from tests.cluster.replica_logs import Ack, assert_acked_exactly_once, assert_replicas_identical_below_hw, \
    high_watermark, read_replica_log
from tests.cluster.support import metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Producer  # noqa: E402

TOPIC = "rolling"
PARTITIONS = 6


class PacedProducer:
    """One record every `interval` s, acks=all, idempotent; notes each ack's time and content."""

    def __init__(self, bootstrap: str, interval: float = 0.002) -> None:
        self.acks: list[Ack] = []
        self.ack_times: list[float] = []
        self.errors: list[str] = []
        self._interval = interval
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 1})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        now = time.monotonic()
        self.ack_times.append(now)
        self.acks.append(Ack(msg.key(), msg.partition(), msg.offset(), now))

    def _run(self) -> None:
        n = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._producer.produce(TOPIC, key=b"k%d" % n, value=b"v%d" % n, on_delivery=self._on_delivery)
            n += 1
            next_at += self._interval
            self._producer.poll(max(0.0, next_at - time.monotonic()))

    def start(self) -> "PacedProducer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(60) == 0

    def longest_stall(self) -> float:
        times = sorted(self.ack_times)
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def _isr_full(cluster: KraftdCluster, node: int) -> bool:
    try:
        error, partitions = metadata(cluster.node(node), [TOPIC], timeout=2).topics[TOPIC]
    except Exception:  # noqa: BLE001 - a node starting up may not answer yet
        return False
    return error == 0 and len(partitions) == PARTITIONS and all(len(p.isr) == 3 and p.leader > 0
                                                                for p in partitions.values())


def test_rolling_restart_under_an_acks_all_producer(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        wait_cluster_ready(cluster, 30)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        wait_until(lambda: _isr_full(cluster, 1), 30, "every partition's ISR to be full")
        producer = PacedProducer(cluster.bootstrap()).start()
        wait_until(lambda: len(producer.acks) >= 200, 30, "the producer's first acks")
        stalls = []
        for node in cluster.ids:
            before = len(producer.acks)
            t0 = time.monotonic()
            assert cluster.stop(node) == 0, cluster.logs(node, tail=30)
            cluster.start(node)
            other = next(i for i in cluster.ids if i != node)
            wait_until(lambda: _isr_full(cluster, other), 60, f"node {node} back in every ISR")
            wait_until(lambda: len(producer.acks) >= before + 200, 30, "acks after the restart")
            window = [t for t in producer.ack_times if t >= t0 - 1]
            stalls.append(max((b - a for a, b in zip(window, window[1:])), default=0.0))
        producer.stop()
        print(f"\nrolling restart: {len(producer.acks)} records acknowledged; longest write stall per "
              f"restart (s): {', '.join(f'{s:.2f}' for s in stalls)}; overall {producer.longest_stall():.2f}")
        assert not producer.errors, producer.errors[:5]

        dirs = {i: cluster.process(i).data_dir for i in cluster.ids}
        logs = {}
        for partition in range(PARTITIONS):
            _, hw = wait_until(lambda p=partition: high_watermark([cluster.node(i) for i in cluster.ids], TOPIC, p),
                               30, f"{TOPIC}-{partition}'s leader")
            wait_until(lambda p=partition, h=hw: all(read_replica_log(d, TOPIC, p).end_offset >= h
                                                     for d in dirs.values()), 30, "replicas to reach the HW")
            logs[partition] = assert_replicas_identical_below_hw(dirs, TOPIC, partition, hw)
        assert_acked_exactly_once(logs, producer.acks)
