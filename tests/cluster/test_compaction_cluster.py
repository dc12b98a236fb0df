"""A compacted topic on three nodes (issue 26): each replica runs its own cleaner; a follower
that was down while the leader cleaned catches up across the cleaned ranges (their offset
gaps); the leader is killed in the middle of writes and nothing acknowledged is lost; and
`kraftd verify` finds every replica's latest value per key below the HW the same."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.cluster.support import gauge, metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

pytestmark = pytest.mark.clients

TOPIC = "kv"
KEYS = 1_000
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": str(64 << 10), "segment.ms": "1000",
           "min.cleanable.dirty.ratio": "0.01"}
ENV = {"KRAFTD_LOG_CLEANER_BACKOFF_MS": "250"}


def latest(records):
    last = {}
    for offset, key, value in records:
        last[key] = (offset, key, value)
    return sorted(last.values())


def leader_of(cluster) -> int | None:
    """The live leader of the topic's partition some live node names (None: none yet)."""
    for i in cluster.running():
        topics = metadata(cluster.node(i), [TOPIC]).topics
        error, partitions = topics.get(TOPIC, (3, {}))
        if error == 0 and 0 in partitions and partitions[0].leader in cluster.running():
            return partitions[0].leader
    return None


def write(bootstrap, start, count, *, during=None):
    """`count` acks=all updates over KEYS keys from update number `start` (an idempotent producer
    that retries through a leader change); `during(i)` is called before update i. Returns the
    acknowledged (offset, key, value)."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60_000})
    acked = []

    def report(err, msg):
        if err is None:
            acked.append((msg.offset(), msg.key(), msg.value()))

    for i in range(start, start + count):
        if during is not None:
            during(i)
        while True:
            try:
                producer.produce(TOPIC, key=b"k%04d" % (i % KEYS), value=b"v%d" % i, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(90) == 0
    return acked


def read_all(bootstrap, end):
    from tests.clients.test_compaction import read_with_kafka_python
    return read_with_kafka_python(bootstrap, TOPIC, end)


def test_replicas_compact_on_their_own_catch_up_across_cleaned_ranges_and_verify_agrees(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        wait_cluster_ready(cluster, 60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config=CONFIGS)])[TOPIC].result(30)
        leader = wait_until(lambda: leader_of(cluster), 30, "a leader for the topic")
        behind = next(i for i in cluster.ids if i != leader)
        cluster.stop(behind)  # down while the leader writes and cleans

        acked = write(cluster.bootstrap(), 0, 20_000)
        time.sleep(1.2)  # a segment.ms later: the next write rolls the segment, and a pass cleans the rest
        acked += write(cluster.bootstrap(), 20_000, 1)
        wait_until(lambda: (gauge(cluster, leader, "kraftd_log_cleaner_passes_total") or 0) > 0, 30,
                   "a cleaning pass on the leader")

        # The follower catches up across the leader's cleaned (gapped) range.
        cluster.start(behind)
        end = max(a[0] for a in acked) + 1
        wait_until(lambda: (gauge(cluster, behind, "kraftd_log_end_offset", topic=TOPIC, partition=0) or 0) >= end,
                   60, "the follower that was down to catch up")

        # The leader dies in the middle of the next writes: nothing acknowledged is lost.
        killed = []

        def kill_the_leader(i):
            if i == 25_000 and not killed:
                killed.append(wait_until(lambda: leader_of(cluster), 30, "the leader"))
                cluster.kill(killed[0])
        acked += write(cluster.bootstrap(), 21_000, 8_000, during=kill_the_leader)
        time.sleep(1.2)
        acked += write(cluster.bootstrap(), 29_000, 1)
        cluster.start(killed[0])
        end = max(a[0] for a in acked) + 1
        wait_until(lambda: all((gauge(cluster, i, "kraftd_high_watermark", topic=TOPIC, partition=0) or 0) >= end
                               for i in cluster.ids), 60, "every replica to learn the HW")
        wait_until(lambda: all((gauge(cluster, i, "kraftd_log_cleaner_passes_total") or 0) > 0 for i in cluster.ids),
                   60, "a cleaning pass on every replica")
        got = read_all(cluster.bootstrap(), end)
        assert latest(got) == latest(acked)  # every acknowledged write's key holds its latest value
        for i in cluster.ids:
            assert cluster.stop(i) == 0, cluster.logs(i, tail=30)

    dirs = [tmp_path / f"node{i}" for i in (1, 2, 3)]
    audit = subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir", *map(str, dirs)],
                           capture_output=True, text=True, timeout=300)
    assert audit.returncode == 0 and "FINDING" not in audit.stdout, audit.stdout[-3000:] + audit.stderr[-2000:]
    assert "2 partitions compared" in audit.stdout.splitlines()[-1], audit.stdout[-500:]


def test_a_topic_altered_to_compact_through_any_node_is_compacted_on_every_replica(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        controller = wait_cluster_ready(cluster, 60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"segment.bytes": str(64 << 10)})])[TOPIC].result(30)
        acked = write(cluster.bootstrap(), 0, 10_000)
        other = next(i for i in cluster.ids if i != controller)  # forwarded to the controller
        through = AdminClient({"bootstrap.servers": cluster.node(other)})
        change = ConfigResource("TOPIC", TOPIC, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
        through.incremental_alter_configs([change])[change].result(30)
        for i in cluster.ids:  # every node answers with the committed configs
            node_admin = AdminClient({"bootstrap.servers": cluster.node(i)})
            resource = ConfigResource("TOPIC", TOPIC)
            wait_until(lambda: node_admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value
                       == "compact", 30, f"node {i} to describe the new policy")
        acked += write(cluster.bootstrap(), 10_000, 2_000)  # (rolls segments past the alteration)
        wait_until(lambda: all((gauge(cluster, i, "kraftd_log_cleaner_passes_total") or 0) > 0 for i in cluster.ids),
                   60, "a cleaning pass on every replica")
        end = max(a[0] for a in acked) + 1
        assert latest(read_all(cluster.bootstrap(), end)) == latest(acked)
