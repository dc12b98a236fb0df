"""Issue 12, acceptance 3 (second half): after an unclean recovery, a restarted group member that
resumes from a committed offset (and its committed leader epoch, KIP-320) beyond the survivor's
log end learns of the divergence through OffsetForLeaderEpoch instead of reading whatever the
survivor now holds at that offset.

Node X follows both `__consumer_offsets` (led by Y) and a data topic (led by D) and is cut from
D: X keeps receiving every commit but no more of the topic's records. Groups read the records only D and Y have and commit past X's log end. Then D and Y are
lost for good; `kraftd quorum force-leader` makes X the only voter, new records are written at
X's new epoch, and a new member of each group starts from its committed offset:

- Java 3.9 (auto.offset.reset=earliest): validates the committed position (OffsetsForLeaderEpoch
  with the committed epoch), sees the epoch ended at X's log end, and resumes there: it reads
  every new record once and nothing else.
- confluent-kafka 2.16 (librdkafka 2.16) and kafka-python 3.0 do not validate a committed
  position: both start fetching at the committed offset (librdkafka issue #5158, "Assigned
  offsets are not validated"; kafka-python seeks to the committed offset without its epoch), so
  they read the new records at or past it and never see the new ones written below it. What
  they read is still only data the survivor holds, each record once; the test checks that much
  and prints where each started.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.cluster.replica_logs import read_replica_log
from tests.cluster.support import metadata, wait_cluster_ready
from tests.cluster.test_failover import wait_leaders_agreed
from tests.cluster.test_group_coordinator_failover import _find_coordinator
from tests.groups.java_members import JavaMember
from tests.groups.support import Collected, wait_for
from tests.support.cluster import KraftdCluster
from tests.support.java_client import compile_driver
from tests.support.waiting import poll_until, wait_until

pytestmark = [pytest.mark.clients, pytest.mark.timeout(300)]

ENV = {"KRAFTD_GROUP_INITIAL_REBALANCE_DELAY_MS": "300", "KRAFTD_OFFSETS_TOPIC_NUM_PARTITIONS": "1"}
CLIENTS = ("java", "confluent-kafka", "kafka-python")
OLD, LOST, NEW = 50, 20, 30


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "message.timeout.ms": 60000, "retries": 1000})
    failed: list = []
    for v in values:
        producer.produce(topic, value=v.encode(), partition=0,
                         on_delivery=lambda err, msg: err is not None and failed.append(err))
    assert producer.flush(90) == 0 and not failed, failed


def _member(client: str, classes, bootstrap: str, topic: str, collected: Collected, name: str):
    group = f"recovery-{client}"
    if client == "java":
        return JavaMember(classes, name, bootstrap, topic, group, "range", collected)
    if client == "confluent-kafka":
        from tests.groups.test_confluent_groups import Member
        return Member(name, bootstrap, topic, group, collected, "range")
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    from tests.groups.test_kafka_python_groups import Member
    return Member(name, bootstrap, topic, group, collected, RangePartitionAssignor)


def _committed(address: str, group: str, topic: str) -> tuple[int, int]:
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    client = WireClient(address, client_id="recovery-probe", timeout=5)
    try:
        r = client.request(api.OFFSET_FETCH, 8, m.OffsetFetchRequest(groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)]))
    finally:
        client.close()
    parts = [p for t in r.groups[0].topics if t.name == topic for p in t.partitions]
    return (parts[0].committed_offset, parts[0].committed_leader_epoch) if parts else (-1, -1)


def _force_leader(data_dir, spec: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", "force-leader", "--data-dir", str(data_dir),
                           "--voters", spec], capture_output=True, text=True, timeout=120)


def test_restarted_members_detect_the_divergence_of_their_committed_offsets(tmp_path):
    classes = compile_driver("GroupConsumer", tmp_path / "java")
    with KraftdCluster(tmp_path, nodes=3, proxies=True, env=ENV) as cluster:
        controller = wait_cluster_ready(cluster, 60)
        wait_until(lambda: _find_coordinator(cluster.node(1), "recovery-java")[0] == 0, 30, "__consumer_offsets")
        coordinator = wait_leaders_agreed(cluster, "__consumer_offsets", 1, 3, 30)[0]
        # A one-partition topic led by D, neither the coordinator nor (if it can be helped) the
        # controller; X, the third node, follows both and will be cut from D only.
        topic = d = None
        for name in ("ledger-a", "ledger-b", "ledger-c", "ledger-d", "ledger-e"):
            cluster.create_topic(name, 1, 3)
            leader = wait_leaders_agreed(cluster, name, 1, 3, 30)[0]
            if leader != coordinator and (leader != controller or name == "ledger-e"):
                topic, d = name, leader
                break
        assert topic is not None, "no topic placed with a leader other than the coordinator"
        y = coordinator
        x = next(i for i in cluster.ids if i not in (y, d))

        _produce(cluster.bootstrap(), topic, [f"old-{i}" for i in range(OLD)])
        wait_until(lambda: read_replica_log(tmp_path / f"node{x}", topic, 0).end_offset
                   >= read_replica_log(tmp_path / f"node{d}", topic, 0).end_offset, 30, "X to hold the old records")
        cluster.partition(x, d)
        _produce(f"{cluster.node(d)},{cluster.node(y)}", topic, [f"lost-{i}" for i in range(LOST)])
        survivor_end = read_replica_log(tmp_path / f"node{x}", topic, 0).end_offset
        lost_end = read_replica_log(tmp_path / f"node{d}", topic, 0).end_offset
        views = {i: metadata(cluster.node(i), [topic]).partitions(topic)[0] for i in cluster.ids}
        assert lost_end >= survivor_end + LOST, (x, d, y, survivor_end, lost_end, views,
                                                 "\n".join(cluster.logs(i, tail=15) for i in cluster.ids))

        # Each group reads everything and commits past X's log end; X replicates the commits.
        commits = {}
        for client in CLIENTS:
            collected = Collected()
            member = _member(client, classes, cluster.bootstrap(), topic, collected, f"{client}-first")
            try:
                wait_for(lambda: collected.count() >= OLD + LOST, 60, f"{client} to read the lost records")
            finally:
                member.close()
            commits[client] = poll_until(lambda c=client: (got := _committed(cluster.node(y), f"recovery-{c}", topic))[0]
                                         == lost_end and got, 30) or _committed(cluster.node(y), f"recovery-{client}", topic)
            if commits[client][0] != lost_end:
                print("\n".join(getattr(member, "other", [])), "\n".join(cluster.logs(i, tail=40) for i in cluster.ids))
            assert commits[client][0] == lost_end, (client, commits[client], lost_end)
            assert commits[client][1] >= 0, (client, commits[client])   # the leader epoch is committed

        assert metadata(cluster.node(y), ["__consumer_offsets"]).partitions("__consumer_offsets")[0].leader == y
        wait_until(lambda: read_replica_log(tmp_path / f"node{x}", "__consumer_offsets", 0).end_offset
                   >= read_replica_log(tmp_path / f"node{y}", "__consumer_offsets", 0).end_offset, 30,
                   "X to replicate the commits")

        # D and Y are lost for good; X leads alone after force-leader.
        cluster.kill(x)   # SIGTERM here can exit 1 ("persisting the election state failed": the fsync pool is already shut down)
        cluster.kill(d)
        cluster.kill(y)
        cluster.heal_all()
        cluster.change_voters([x])
        forced = _force_leader(tmp_path / f"node{x}", cluster.voters_spec(x))
        assert forced.returncode == 0, forced.stderr
        assert json.loads(forced.stdout.strip().splitlines()[-1])["voters"] == [x]
        cluster.start(x)
        _produce(cluster.node(x), topic, [f"new-{i}" for i in range(NEW)])
        survivor = read_replica_log(tmp_path / f"node{x}", topic, 0)
        new_offsets = {e.value.decode(): e.offset for e in survivor.records() if e.value.decode().startswith("new-")}
        assert min(new_offsets.values()) < lost_end < max(new_offsets.values())   # new data at the old offsets
        for client in CLIENTS:   # the commits survived on X
            assert _committed(cluster.node(x), f"recovery-{client}", topic) == commits[client]

        # A new member of each group resumes from its committed offset.
        read = {}
        for client in CLIENTS:
            collected = Collected()
            member = _member(client, classes, cluster.node(x), topic, collected, f"{client}-after")
            try:
                wait_for(lambda: any(v == b"new-%d" % (NEW - 1) for _, v in collected.values()), 60,
                         f"{client} to read the last new record")
                time.sleep(1)
            finally:
                member.close()
            read[client] = sorted((o, v.decode()) for _, _, o, v in collected.items)
        print({c: (read[c][0], len(read[c])) for c in read})

        every_new = sorted((o, v) for v, o in new_offsets.items())
        # Java: OffsetsForLeaderEpoch(committed epoch) -> the epoch ended at the survivor's old log
        # end -> "Truncation detected", resume there: every new record, once, none skipped.
        assert read["java"] == every_new, read["java"][:5]
        assert every_new[0][0] < lost_end
        for client in ("confluent-kafka", "kafka-python"):
            # No validation: a suffix of the new records, each once, from the committed offset on.
            assert read[client] and read[client] == every_new[-len(read[client]):], (client, read[client][:5])
            assert read[client][0][0] >= lost_end, (client, read[client][:3])
        assert metadata(cluster.node(x), [topic]).partitions(topic)[0].leader_epoch > 1000
