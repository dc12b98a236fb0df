"""Issue 12, acceptance 2 on a cluster: groups commit, their consumers stop, and the node that
coordinates them is SIGKILLed. Another node takes over the `__consumer_offsets` partition, loads
the groups' committed offsets (from the replicated snapshot and log) and answers OffsetFetch
within 30 s of the kill; new members of each group (kafka-python and confluent-kafka), started
right after the kill, find the new coordinator through whatever the nodes answer on the way
(connection refused, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)
and read exactly the records written after the last commit: nothing lost, nothing read again.

`__consumer_offsets` has one partition here, so every group has the same coordinator."""
from __future__ import annotations

import threading
import time

import pytest

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from tests.cluster.support import metadata, wait_cluster_ready
from tests.cluster.test_failover import wait_leaders_agreed
from tests.groups.support import Collected, assert_exactly_once
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

TOPIC = "orders"
PARTITIONS = 6
GROUPS = {"kafka-python": "cg-kafka-python", "confluent-kafka": "cg-confluent"}
ENV = {"KRAFTD_GROUP_INITIAL_REBALANCE_DELAY_MS": "300", "KRAFTD_OFFSETS_TOPIC_NUM_PARTITIONS": "1"}


def _produce(bootstrap: str, start: int, count: int, sent: set) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                         "retries": 1000, "retry.backoff.ms": 100})
    failed: list = []
    for i in range(start, start + count):
        p = i % PARTITIONS
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=p,
                         on_delivery=lambda err, msg: err is not None and failed.append(err))
        sent.add((p, b"v%d" % i))
    assert producer.flush(90) == 0 and not failed, failed


def _members(client: str, bootstrap: str, collected: Collected, names: list[str]) -> list:
    if client == "kafka-python":
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        from tests.groups.test_kafka_python_groups import Member
        return [Member(n, bootstrap, TOPIC, GROUPS[client], collected, RangePartitionAssignor) for n in names]
    from tests.groups.test_confluent_groups import Member
    return [Member(n, bootstrap, TOPIC, GROUPS[client], collected, "range") for n in names]


def _raw(address: str):
    from kraftd.client import WireClient
    return WireClient(address, client_id="coordinator-probe", timeout=3)


def _find_coordinator(address: str, group: str) -> tuple[int, int]:
    client = _raw(address)
    try:
        r = client.request(api.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
    finally:
        client.close()
    return r.coordinators[0].error_code, r.coordinators[0].node_id


def _offset_fetch(address: str, group: str) -> tuple[int, dict]:
    """(group error, {partition: committed offset}) from OffsetFetch v8."""
    client = _raw(address)
    try:
        r = client.request(api.OFFSET_FETCH, 8, m.OffsetFetchRequest(groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]))
    finally:
        client.close()
    g = r.groups[0]
    return g.error_code, {p.partition_index: p.committed_offset for t in g.topics if t.name == TOPIC
                          for p in t.partitions}


def _end_offsets(address: str) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": address, "group.id": "end-offsets-probe"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


class CoordinatorProbe:
    """From the kill on: every error the surviving nodes answer FindCoordinator and OffsetFetch
    with, until one names a live coordinator whose OffsetFetch returns the commits."""

    def __init__(self, cluster: KraftdCluster, survivors: list[int], group: str, want: dict) -> None:
        self.cluster, self.survivors, self.group, self.want = cluster, survivors, group, want
        self.seen: set = set()
        self.loaded_after: float | None = None
        self.coordinator: int | None = None
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while time.monotonic() - self.started < 60:
            for i in self.survivors:
                try:
                    code, node = _find_coordinator(self.cluster.node(i), self.group)
                    self.seen.add(("FindCoordinator", ErrorCode(code).name))
                    if code or node not in self.survivors:
                        continue
                    code, offsets = _offset_fetch(self.cluster.node(node), self.group)
                    self.seen.add(("OffsetFetch", ErrorCode(code).name))
                    if code == 0 and offsets == self.want:
                        self.loaded_after, self.coordinator = time.monotonic() - self.started, node
                        return
                except OSError as exc:
                    self.seen.add(("connect", type(exc).__name__))
            time.sleep(0.05)


def test_groups_resume_from_their_commits_after_the_coordinator_is_killed(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, PARTITIONS, 3)
        wait_leaders_agreed(cluster, TOPIC, PARTITIONS, 3, 30)
        sent: set = set()
        _produce(cluster.bootstrap(), 0, 600, sent)

        # Phase 1: each group reads everything and commits (close() commits, then leaves).
        for client in GROUPS:
            collected = Collected()
            members = _members(client, cluster.bootstrap(), collected, [f"{client}-{i}" for i in range(2)])
            try:
                wait_until(lambda: collected.count() >= 600, 60, f"{client} to read the first 600 records")
            finally:
                for member in members:
                    member.close()
            assert_exactly_once(collected, sent)

        code, coordinator = _find_coordinator(cluster.node(1), GROUPS["kafka-python"])
        assert code == 0 and coordinator in cluster.ids
        wait_leaders_agreed(cluster, "__consumer_offsets", 1, 3, 30)   # RF=3, full ISR
        ends = _end_offsets(cluster.bootstrap())
        for group in GROUPS.values():
            assert _offset_fetch(cluster.node(coordinator), group) == (0, ends), group

        # The coordinator's node crashes; new members start at once.
        survivors = [i for i in cluster.ids if i != coordinator]
        cluster.kill(coordinator)
        probe = CoordinatorProbe(cluster, survivors, GROUPS["confluent-kafka"], ends)
        later: set = set()
        collected = {client: Collected() for client in GROUPS}
        members = [member for client in GROUPS
                   for member in _members(client, cluster.bootstrap(), collected[client],
                                          [f"{client}-after-{i}" for i in range(2)])]
        try:
            _produce(",".join(cluster.node(i) for i in survivors), 600, 300, later)
            for client in GROUPS:
                wait_until(lambda c=collected[client]: c.count() >= 300, 90,
                           f"{client} to read the 300 records written after the kill")
            time.sleep(1)   # anything read twice would show up by now
        finally:
            for member in members:
                member.close()
        for client in GROUPS:
            assert_exactly_once(collected[client], later)   # from the commits: no re-reads, no loss

        probe.thread.join(5)
        assert probe.loaded_after is not None and probe.loaded_after < 30, (probe.loaded_after, probe.seen)
        print(f"coordinator {coordinator} killed; node {probe.coordinator} served the commits after "
              f"{probe.loaded_after:.1f}s; answers on the way: {sorted(probe.seen)}")
        view = metadata(cluster.node(probe.coordinator), ["__consumer_offsets"]).partitions("__consumer_offsets")
        assert view[0].leader == probe.coordinator
        text = cluster.metrics(probe.coordinator)
        assert "kraftd_coordinator_load_time_ms_count" in text
        count = [line for line in text.splitlines() if line.startswith("kraftd_coordinator_load_time_ms_count")]
        assert count and float(count[0].split()[-1]) >= 1, count
