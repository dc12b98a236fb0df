"""Cluster metrics: node.stats.cluster_stats() and .drain_raft_latencies(), read at scrape time."""
from __future__ import annotations

from kraftd.server.metrics_text import render
from prometheus_client.parser import text_string_to_metric_families

from kraftd.server.metrics import RAFT_MS_BUCKETS, ServerMetrics
from server_fake_node import FakeNode

CLUSTER_NAMES = ("kraftd_metadata_leader_id", "kraftd_metadata_epoch", "kraftd_leader_partitions",
                 "kraftd_under_replicated_partitions", "kraftd_offline_partitions", "kraftd_leader_epoch",
                 "kraftd_raft_election_latency_ms", "kraftd_raft_commit_latency_ms")


class ClusterFakeNode(FakeNode):
    """The server's fake node plus the cluster interface; latencies are queued by the test."""

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        self.cluster = {
            "metadata_leader_id": 2, "metadata_epoch": 7, "leader_partitions": 3,
            "under_replicated_partitions": 1, "offline_partitions": 0,
            "partitions": [
                {"topic": "__cluster_metadata", "partition": 0, "leader_epoch": 7, "is_leader": False},
                {"topic": "orders", "partition": 0, "leader_epoch": 4, "is_leader": True},
                {"topic": "orders", "partition": 1, "leader_epoch": 5, "is_leader": False},
            ],
        }
        self.elections: list[float] = []
        self.commits: list[float] = []
        self.drains = 0

    def cluster_stats(self) -> dict:
        return self.cluster

    def drain_raft_latencies(self) -> tuple[list[float], list[float]]:
        self.drains += 1
        out = (self.elections, self.commits)
        self.elections, self.commits = [], []
        return out


def watched(node) -> ServerMetrics:
    metrics = ServerMetrics()
    metrics.watch_node(lambda: node)
    return metrics


def scrape(metrics: ServerMetrics) -> tuple[str, dict[tuple, float]]:
    """The exposition text and its samples {(name, sorted label pairs): value}."""
    text = render(metrics.registry).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    return text, samples


def test_cluster_gauges_appear_with_their_values():
    text, samples = scrape(watched(ClusterFakeNode({})))

    assert "# TYPE kraftd_metadata_leader_id gauge" in text
    assert samples[("kraftd_metadata_leader_id", ())] == 2
    assert samples[("kraftd_metadata_epoch", ())] == 7
    assert samples[("kraftd_leader_partitions", ())] == 3
    assert samples[("kraftd_under_replicated_partitions", ())] == 1
    assert samples[("kraftd_offline_partitions", ())] == 0


def test_leader_epoch_is_per_partition_with_the_offset_gauges_labels():
    text, samples = scrape(watched(ClusterFakeNode({})))

    assert 'kraftd_leader_epoch{topic="__cluster_metadata",partition="0"} 7\n' in text
    assert samples[("kraftd_leader_epoch", (("partition", "0"), ("topic", "orders")))] == 4
    assert samples[("kraftd_leader_epoch", (("partition", "1"), ("topic", "orders")))] == 5
    # The same label names as the existing per-partition offset gauges.
    assert ("kraftd_high_watermark", (("partition", "0"), ("topic", "t"))) in samples


def test_latency_histograms_exist_before_any_sample():
    text, samples = scrape(watched(ClusterFakeNode({})))

    for name in ("kraftd_raft_election_latency_ms", "kraftd_raft_commit_latency_ms"):
        assert f"# TYPE {name} histogram" in text
        assert samples[(f"{name}_count", ())] == 0
        assert samples[(f"{name}_bucket", (("le", "+Inf"),))] == 0
        assert len([k for k in samples if k[0] == f"{name}_bucket"]) == len(RAFT_MS_BUCKETS) + 1


def test_latency_histograms_accumulate_across_scrapes():
    node = ClusterFakeNode({})
    metrics = watched(node)

    node.elections, node.commits = [150.0], [0.5, 3.0, 40.0]
    _, first = scrape(metrics)
    assert first[("kraftd_raft_election_latency_ms_count", ())] == 1
    assert first[("kraftd_raft_commit_latency_ms_count", ())] == 3

    node.elections, node.commits = [900.0, 12_000.0], [3.0]
    _, second = scrape(metrics)
    assert node.drains == 2 and node.elections == [] and node.commits == []

    e, c = "kraftd_raft_election_latency_ms", "kraftd_raft_commit_latency_ms"
    assert second[(f"{e}_count", ())] == 3
    assert second[(f"{e}_sum", ())] == 150.0 + 900.0 + 12_000.0
    assert second[(f"{e}_bucket", (("le", "250.0"),))] == 1
    assert second[(f"{e}_bucket", (("le", "1000.0"),))] == 2
    assert second[(f"{e}_bucket", (("le", "10000.0"),))] == 2  # 12 s lands only in +Inf
    assert second[(f"{e}_bucket", (("le", "+Inf"),))] == 3
    assert second[(f"{c}_count", ())] == 4
    assert second[(f"{c}_sum", ())] == 0.5 + 3.0 + 40.0 + 3.0
    assert second[(f"{c}_bucket", (("le", "1.0"),))] == 1
    assert second[(f"{c}_bucket", (("le", "5.0"),))] == 3
    assert second[(f"{c}_bucket", (("le", "50.0"),))] == 4

    _, third = scrape(metrics)  # nothing new: the counts stay, nothing is counted twice
    assert third[(f"{e}_count", ())] == 3
    assert third[(f"{c}_count", ())] == 4


def test_gauges_follow_the_node_between_scrapes():
    node = ClusterFakeNode({})
    metrics = watched(node)
    scrape(metrics)
    node.cluster = {**node.cluster, "metadata_leader_id": 3, "metadata_epoch": 8, "offline_partitions": 2,
                  "partitions": [{"topic": "orders", "partition": 0, "leader_epoch": 6, "is_leader": False}]}

    _, samples = scrape(metrics)

    assert samples[("kraftd_metadata_leader_id", ())] == 3
    assert samples[("kraftd_metadata_epoch", ())] == 8
    assert samples[("kraftd_offline_partitions", ())] == 2
    assert samples[("kraftd_leader_epoch", (("partition", "0"), ("topic", "orders")))] == 6
    assert [k for k in samples if k[0] == "kraftd_leader_epoch"] == [
        ("kraftd_leader_epoch", (("partition", "0"), ("topic", "orders")))]  # a partition gone is gone


def test_no_leader_is_minus_one():
    node = ClusterFakeNode({})
    node.cluster = {**node.cluster, "metadata_leader_id": -1}

    _, samples = scrape(watched(node))

    assert samples[("kraftd_metadata_leader_id", ())] == -1


def test_a_single_node_exports_them_without_a_metadata_quorum():
    text, samples = scrape(watched(FakeNode({})))

    for name in CLUSTER_NAMES:
        assert name in text
    assert samples[("kraftd_metadata_leader_id", ())] == -1
    assert samples[("kraftd_leader_partitions", ())] == 1
    assert samples[("kraftd_leader_epoch", (("partition", "0"), ("topic", "t")))] == 0
    assert ("kraftd_high_watermark", (("partition", "0"), ("topic", "t"))) in samples


def test_no_node_yet_exports_none_of_them():
    text, _ = scrape(watched(None))

    for name in CLUSTER_NAMES:
        assert name not in text
