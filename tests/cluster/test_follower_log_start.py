"""KIP-630 on followers of an idle snapshot-policy partition: the leader snapshots and moves its
log start; each follower takes its own snapshot and moves its log start there too. Before, the
follower's last Fetch answer naming the leader's new log start could come before the follower's
own snapshot existed, and an idle partition is not named again in an incremental session, so
the followers kept their whole log forever."""
from __future__ import annotations

import pytest

from tests.cluster.support import samples, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")  # dev dependency: installed by `make test`
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ENV = {"KRAFTD_SNAPSHOT_MAX_BYTES_BETWEEN": "4000", "KRAFTD_SNAPSHOT_MIN_CHANGED_RECORDS_RATIO": "0.01",
       "KRAFTD_SNAPSHOT_START_OFFSET_LAG_TIME_MAX_MS": "2000"}


def test_followers_of_an_idle_snapshot_policy_partition_move_their_log_start(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env=ENV) as cluster:
        wait_cluster_ready(cluster, 60)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic("kv", 1, 3, config={"cleanup.policy": "snapshot"})])["kv"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
        for i in range(600):
            producer.produce("kv", key=b"k%d" % (i % 50), value=b"v" * 100)
        assert producer.flush(30) == 0

        def offsets(node: int) -> dict:
            return {name: int(v) for (name, labels), v in samples(cluster, node).items()
                    if dict(labels).get("topic") == "kv"
                    and name in ("kraftd_log_start_offset", "kraftd_high_watermark")}

        def every_log_start_moved():
            views = [offsets(n) for n in cluster.ids]
            return all(v and v["kraftd_log_start_offset"] > 0 for v in views) and views

        wait_until(every_log_start_moved, 30, "every replica's log start to move past 0 (nothing is produced)")
