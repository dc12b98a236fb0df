"""Issue 20, part 3: `kraftd quorum describe` through any node, as `kafka-metadata-quorum
--bootstrap-server` works through any broker.

On a three-node cluster, for the metadata partition and for a partition of an RF=3 topic, the
command is given only a follower's address (which refuses a topic partition's DescribeQuorum
with NOT_LEADER_OR_FOLLOWER, and forwards the metadata partition's to the leader, as a Kafka
broker does for the Java Admin). It finds the leader through that follower's Metadata and prints what
the leader's own DescribeQuorum answers: LeaderId, LeaderEpoch, HighWatermark and the voters
[1,2,3], plain and --json. Through a TCP proxy in front of a follower, only the Metadata goes
through the proxy: the leader is asked at the address it advertises.
"""
from __future__ import annotations

import json
import time

import pytest

from tests.cluster.support import describe, describe_quorum, metadata, parse_status, wait_cluster_ready
from tests.support.cluster import HOST, KraftdCluster
from tests.support.tcp_proxy import TcpProxy

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Producer  # noqa: E402

pytestmark = [pytest.mark.clients, pytest.mark.timeout(240)]

TOPIC = "described-anywhere"
RECORDS = 20
METADATA = ("__cluster_metadata", 0)
PARTITIONS = {"metadata": (METADATA, ()), "topic": ((TOPIC, 0), ("--partition", f"{TOPIC}:0"))}
NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KraftdCluster(tmp_path_factory.mktemp("describe-anywhere"), nodes=3) as cluster:
        wait_cluster_ready(cluster, 60)
        cluster.create_topic(TOPIC, 1, 3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "enable.idempotence": False,
                             "message.timeout.ms": 60000})
        failed: list = []
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"v%d" % i, partition=0,
                             on_delivery=lambda err, msg: err is not None and failed.append(err))
        assert producer.flush(60) == 0 and not failed, failed
        yield cluster


def raw_describe(address: str, topic: str, partition: int):
    """One node's raw DescribeQuorum v2 answer for the partition (its PartitionData)."""
    response = describe_quorum(address, topic, partition, timeout=10)
    assert response.error_code == 0, response
    return response.topics[0].partitions[0]


def leader_answer(cluster: KraftdCluster, topic: str, partition: int):
    """(leader id, its raw DescribeQuorum answer): the node every answer without an error names."""
    answers = {i: raw_describe(cluster.node(i), topic, partition) for i in cluster.ids}
    leaders = {p.leader_id for p in answers.values() if p.error_code == 0}
    assert len(leaders) == 1, {i: (p.error_code, p.leader_id, p.leader_epoch) for i, p in answers.items()}
    leader = leaders.pop()
    return leader, answers[leader]


def described(bootstrap: str, args: tuple, as_json: bool) -> dict:
    """The CLI's LeaderId, LeaderEpoch, HighWatermark and voters, plain or --json."""
    out = describe("--bootstrap-server", bootstrap, *args, *(("--json",) if as_json else ()), "--timeout", "10")
    assert out.returncode == 0 and out.stderr == "", f"through {bootstrap} {args}: {out}"
    if as_json:
        d = json.loads(out.stdout)
        return {"LeaderId": d["leaderId"], "LeaderEpoch": d["leaderEpoch"], "HighWatermark": d["highWatermark"],
                "CurrentVoters": [v["replicaId"] for v in d["voters"]], "where": (d["topic"], d["partition"])}
    fields = parse_status(out.stdout)
    return {"LeaderId": int(fields["LeaderId"]), "LeaderEpoch": int(fields["LeaderEpoch"]),
            "HighWatermark": int(fields["HighWatermark"]),
            "CurrentVoters": [int(v) for v in fields["CurrentVoters"].strip("[]").split(",")], "where": None}


def check_through_follower(cluster: KraftdCluster, which: str, as_json: bool, via_proxy: bool = False) -> None:
    """Describe with only a follower's address (or a proxy in front of it) as bootstrap; compare
    with the leader's raw DescribeQuorum just before and just after. A leadership that moves
    in between (an election, a preferred-leader handover) makes the comparison start over."""
    (topic, partition), args = PARTITIONS[which]
    tries: list = []
    for _ in range(5):
        leader, before = leader_answer(cluster, topic, partition)
        for follower in (i for i in cluster.ids if i != leader):
            answer = raw_describe(cluster.node(follower), topic, partition)
            if which == "metadata":  # forwarded to the leader: its answer
                assert answer.error_code in (0, NOT_LEADER_OR_FOLLOWER) and answer.leader_id == leader, (follower, answer)
            else:
                assert answer.error_code == NOT_LEADER_OR_FOLLOWER, (follower, answer)
            proxy = TcpProxy((HOST, int(cluster.node(follower).rpartition(":")[2]))) if via_proxy else None
            try:
                got = described(proxy.address if proxy else cluster.node(follower), args, as_json)
                if proxy:
                    # Only the Metadata went through the proxy: the leader was asked at its advertised address.
                    assert proxy.accepted == 1, proxy.accepted
            finally:
                if proxy:
                    proxy.close()
            after = raw_describe(cluster.node(leader), topic, partition)
            tries.append((follower, before, got, after))
            if after.error_code or (after.leader_id, after.leader_epoch) != (before.leader_id, before.leader_epoch):
                break  # the leadership moved meanwhile: look for the leader again
            assert (got["LeaderId"], got["LeaderEpoch"]) == (leader, before.leader_epoch), tries[-1]
            assert before.high_watermark <= got["HighWatermark"] <= after.high_watermark, tries[-1]
            assert got["HighWatermark"] >= (1 + RECORDS if which == "topic" else 1), tries[-1]
            assert got["CurrentVoters"] == [v.replica_id for v in before.current_voters] == [1, 2, 3], tries[-1]
            if as_json:
                assert got["where"] == (topic, partition), tries[-1]
            before = after
        else:
            return
        time.sleep(0.5)
    raise AssertionError(f"the leadership of {topic}:{partition} kept moving: {tries}")


@pytest.mark.parametrize("which", list(PARTITIONS))
@pytest.mark.parametrize("as_json", [False, True], ids=["plain", "json"])
def test_describe_through_a_follower(cluster, which, as_json):
    check_through_follower(cluster, which, as_json)


@pytest.mark.parametrize("which", list(PARTITIONS))
def test_describe_through_a_proxy_in_front_of_a_follower(cluster, which):
    check_through_follower(cluster, which, as_json=True, via_proxy=True)


def test_every_node_advertises_the_address_describe_uses(cluster):
    """The broker list the command reads: each node's advertised address is its real listener."""
    for i in cluster.ids:
        assert metadata(cluster.node(i), []).brokers == {j: cluster.node(j) for j in cluster.ids}, f"node {i}"
