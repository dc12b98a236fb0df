"""Pre-vote and check-quorum with one link cut (KIP-996): a voter that cannot reach its leader,
while the third voter still can, must not take the leadership. The third keeps fetching from
the leader and refuses the isolated voter's pre-votes, so the leader and its epoch stay as they
were: first for the metadata quorum, then (links healed) for a data partition whose leader and
follower are the two other nodes. (A partition leader cut from the *controller* is another
matter: like Kafka, the controller fences a broker it does not hear from, and Metadata stops
naming it.)"""
from __future__ import annotations

import time

import pytest

from tests.cluster.support import gauge, metadata, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "steady"
WATCH_S = 7.0  # more than three fetch timeouts (2 s) and election timeouts (1-2 s)


def _watch(read) -> set:
    seen = set()
    deadline = time.monotonic() + WATCH_S
    while time.monotonic() < deadline:
        seen.add(read())
        time.sleep(0.2)
    return seen


def test_cutting_one_voter_from_its_leader_moves_no_leadership(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, proxies=True) as cluster:
        leader = wait_cluster_ready(cluster, 60)
        follower, third = [i for i in cluster.ids if i != leader]
        cluster.partition(leader, follower)
        seen = _watch(lambda: gauge(cluster, third, "kraftd_metadata_leader_id"))
        assert seen == {leader}, f"metadata leader {leader}, cut from {follower}: node {third} saw {seen}"
        cluster.heal_all()

        # The data partition: led by `follower` (first in the assignment stands first), followed
        # by `third`; the metadata leader, reachable from both, is the third replica.
        controller = leader
        data_leader, data_follower = follower, third
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[data_leader, data_follower, controller]])]
                            )[TOPIC].result(30)

        def view(node: int):
            error, parts = metadata(cluster.node(node), [TOPIC]).topics[TOPIC]
            p = parts.get(0)
            return (p.leader, p.leader_epoch) if error == 0 and p is not None and len(p.isr) == 3 else None

        def agreed():
            views = {view(i) for i in cluster.ids}
            return len(views) == 1 and (only := views.pop()) is not None and only[0] == data_leader

        wait_until(agreed, 40, f"{data_leader} to lead with a full ISR, in every node's Metadata")
        leader, epoch = view(1)
        follower, third = data_follower, controller
        cluster.partition(leader, follower)
        seen = _watch(lambda: metadata(cluster.node(third), [TOPIC]).topics[TOPIC][1][0][2:4])  # (leader, epoch)
        assert seen == {(leader, epoch)}, f"{TOPIC}-0 leader {leader}@{epoch}, cut from {follower}: node {third} saw {seen}"

