"""Issue 25 item 3 on real processes: partitions move between nodes online (KIP-455).

- `kraftd cluster reassign` moves every replica off node 1 while an idempotent acks=all
  confluent-kafka producer writes: nothing acknowledged is lost or duplicated, node 1 deletes its
  copies, and `kraftd verify` finds the new replicas identical below the HW.
- The Java Admin (3.9.1): alterPartitionReassignments, listPartitionReassignments, a cancel, and
  Kafka's errors for a cancel with nothing moving and for a bad target; and the same calls as raw
  frames through a node that is not the controller.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.cluster.support import led_partitions, metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients

TOPIC = "moves"
PARTITIONS = 3


def _cluster_cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "cluster", *args], capture_output=True, text=True,
                          timeout=timeout)


def _replicas(cluster: KraftdCluster, node: int) -> dict:
    return {i: list(p.replicas) for i, p in metadata(cluster.node(node), [TOPIC]).partitions(TOPIC).items()}


class _Writer(threading.Thread):
    """An idempotent acks=all producer of numbered values until stopped; `acked` holds the
    values acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120_000})
        self.acked: set = set()
        self.failed: list = []
        self.stop = threading.Event()

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked.add(int(msg.value()))
        else:
            self.failed.append(err)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(TOPIC, value=b"%d" % n, key=b"%d" % (n % 97), on_delivery=self._done)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002 if n % 20 else 0.01)
        self.producer.flush(120)


def _read_all(bootstrap: str, expected: int) -> list[int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "moves-readers", "auto.offset.reset": "earliest",
                         "enable.auto.commit": True})
    consumer.subscribe([TOPIC])
    values: list[int] = []
    deadline = time.monotonic() + 90
    try:
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(int(msg.value()))
    finally:
        consumer.close()
    return values


def test_every_replica_moves_off_a_node_under_load(tmp_path):
    with KraftdCluster(tmp_path, nodes=4, voter_ids=[1, 2, 3]) as cluster:
        wait_cluster_ready(cluster, 30)
        wait_until(lambda: len(metadata(cluster.node(1)).brokers) == 4, 30, "four registered brokers")
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        wait_until(lambda: led_partitions(cluster.node(2), [TOPIC]), 30, "leaders for the topic")
        before = _replicas(cluster, 2)
        plan = {"version": 1, "partitions": [
            {"topic": TOPIC, "partition": i,
             "replicas": [r if r != 1 else next(n for n in (2, 3, 4) if n not in rs) for r in rs]}
            for i, rs in sorted(before.items())]}
        target = {e["partition"]: e["replicas"] for e in plan["partitions"]}
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(json.dumps(plan))

        writer = _Writer(cluster.bootstrap())
        writer.start()
        try:
            wait_until(lambda: len(writer.acked) > 2000, 30, "the producer under way")
            out = _cluster_cli("reassign", "--bootstrap-server", cluster.node(4), "--plan", str(plan_file))
            assert out.returncode == 0, out.stdout + out.stderr
            rollback = json.loads(out.stdout.split("\n\n")[1])
            assert {e["partition"]: e["replicas"] for e in rollback["partitions"]} == before

            def verified():
                out = _cluster_cli("reassign", "--bootstrap-server", cluster.node(2), "--plan", str(plan_file),
                                   "--verify")
                assert out.returncode in (0, 3), out.stdout + out.stderr
                return out.returncode == 0 and out.stdout.count("is completed") == PARTITIONS
            wait_until(verified, 90, "every move completed", interval=1.0)
            assert _replicas(cluster, 3) == target
            wait_until(lambda: not list((tmp_path / "node1").glob(f"{TOPIC}-*")), 30, "node 1 to delete its copies")
            time.sleep(1.0)
        finally:
            writer.stop.set()
            writer.join(150)
        assert not writer.failed, writer.failed[:3]
        acked = writer.acked
        values = _read_all(cluster.bootstrap(), len(acked))
        assert len(values) == len(set(values)), "a value was read twice"
        assert acked <= set(values), f"{len(acked - set(values))} acknowledged values are missing"
        for i in cluster.ids:
            assert cluster.stop(i) == 0, cluster.logs(i, tail=30)
    out = subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir",
                          *(str(tmp_path / f"node{i}") for i in (1, 2, 3, 4))],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "FINDING" not in out.stdout, out.stdout + out.stderr


def test_the_java_admin_and_raw_frames_reassign_list_and_cancel(tmp_path):
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import ErrorCode
    from tests.support.java_client import compile_driver, java_command

    classes = compile_driver("Reassign", tmp_path / "java")
    with KraftdCluster(tmp_path / "c", nodes=4, voter_ids=[1, 2, 3]) as cluster:
        wait_cluster_ready(cluster, 30)
        wait_until(lambda: len(metadata(cluster.node(1)).brokers) == 4, 30, "four registered brokers")
        cluster.create_topic(TOPIC, 2, 2)
        wait_until(lambda: led_partitions(cluster.node(1), [TOPIC]), 30, "leaders for the topic")
        before = _replicas(cluster, 1)
        controller = metadata(cluster.node(1)).controller_id
        through = next(i for i in cluster.ids if i != controller)

        def java(*args, ok=True):
            out = subprocess.run(java_command("Reassign", classes, cluster.node(through), *args),
                                 capture_output=True, text=True, timeout=120)
            if ok:
                assert out.returncode == 0 and out.stdout.rstrip().endswith("done"), out.stdout + out.stderr
            return out.stdout.splitlines()

        spare = [n for n in cluster.ids if n not in before[0]]
        moved = [spare[0], before[0][0]]
        assert java("alter", TOPIC, "0", ",".join(map(str, moved)))[0] == "altered"
        wait_until(lambda: _replicas(cluster, through)[0] == moved and not any(
            line.startswith("ongoing") for line in java("list")), 60, "partition 0 moved")
        # Nothing moves: a cancel is Kafka's NO_REASSIGNMENT_IN_PROGRESS, as the Java client says it.
        out = java("cancel", TOPIC, "1", ok=False)
        assert "NoReassignmentInProgressException" in " ".join(out), out
        out = java("alter", TOPIC, "1", "1,9", ok=False)
        assert "InvalidReplicaAssignmentException" in " ".join(out), out

        client = WireClient(cluster.node(through), client_id="raw-reassign", timeout=30)
        try:
            versions = {k.api_key: (k.min_version, k.max_version)
                        for k in client.request(api.API_VERSIONS, 0, m.ApiVersionsRequest()).api_keys}
            assert versions[api.ALTER_PARTITION_REASSIGNMENTS] == (0, 0)
            assert versions[api.LIST_PARTITION_REASSIGNMENTS] == (0, 0)
            A = m.AlterPartitionReassignmentsRequest

            def alter(topic, index, replicas):
                r = client.request(api.ALTER_PARTITION_REASSIGNMENTS, 0, A(timeout_ms=10_000, topics=[
                    A.ReassignableTopic(name=topic, partitions=[A.ReassignablePartition(partition_index=index,
                                                                                       replicas=replicas)])]))
                return r.responses[0].partitions[0].error_code

            assert alter("no-such-topic", 0, [1, 2]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert alter(TOPIC, 1, []) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            assert alter(TOPIC, 1, [2, 2]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
            # A move to a node that stopped (and is not fenced yet: 9 s) cannot finish: it is
            # listed, with what it adds, until cancelled; the cancel puts the replicas back.
            stopped = next(n for n in cluster.ids if n not in before[1] and n not in (through, controller))
            cluster.kill(stopped)
            assert alter(TOPIC, 1, [*before[1][1:], stopped]) == ErrorCode.NONE
            listed = client.request(api.LIST_PARTITION_REASSIGNMENTS, 0, m.ListPartitionReassignmentsRequest(
                timeout_ms=10_000, topics=None))
            assert listed.error_code == 0
            ongoing = {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                                     list(p.removing_replicas))
                       for t in listed.topics for p in t.partitions}
            assert ongoing == {(TOPIC, 1): ([*before[1][1:], stopped, before[1][0]], [stopped], [before[1][0]])}
            lines = java("list")
            assert f"ongoing {TOPIC}-1 {[*before[1][1:], stopped, before[1][0]]} adding [{stopped}] removing " \
                   f"[{before[1][0]}]".replace("'", "") in lines, lines
            assert java("cancel", TOPIC, "1")[0] == "cancelled"
            assert not any(line.startswith("ongoing") for line in java("list"))
            # (as on Kafka, the original replicas come back in the order the move listed them)
            wait_until(lambda: sorted(_replicas(cluster, through)[1]) == sorted(before[1]), 10, "the replicas back")
        finally:
            client.close()
