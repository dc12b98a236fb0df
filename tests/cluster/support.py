"""What the three-node acceptance tests read from a running cluster: Metadata as each node answers
it (raw protocol, so nothing is cached or merged by a client library), /metrics samples, the
`kraftd quorum describe` command line, and the wait for a cluster to be ready for clients."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import NamedTuple

from tests.support.cluster import KraftdCluster
from tests.support.prometheus import scrape_samples
from tests.support.waiting import wait_until


class PartitionView(NamedTuple):
    index: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class MetadataView(NamedTuple):
    """One node's Metadata v12 answer."""
    brokers: dict[int, str]           # node id -> "host:port"
    controller_id: int
    cluster_id: str | None
    topics: dict[str, tuple[int, dict[int, PartitionView]]]  # name -> (error code, partitions)

    def partitions(self, topic: str) -> dict[int, PartitionView]:
        error, partitions = self.topics[topic]
        assert error == 0, f"Metadata error {error} for {topic}"
        return partitions


def metadata(address: str, topics: list[str] | None = None, timeout: float = 10.0) -> MetadataView:
    """Metadata v12 from one node; topics=None asks for every topic. Never auto-creates."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    request = m.MetadataRequest(
        topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    client = WireClient(address, client_id="cluster-tests", timeout=timeout)
    try:
        r = client.request(api.METADATA, 12, request)
    finally:
        client.close()
    return MetadataView(
        brokers={b.node_id: f"{b.host}:{b.port}" for b in r.brokers},
        controller_id=r.controller_id,
        cluster_id=r.cluster_id,
        topics={t.name: (t.error_code, {p.partition_index: PartitionView(
            p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
            tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in t.partitions}) for t in r.topics})


def led_partitions(address: str, topics: list[str]) -> dict | None:
    """{(topic, partition): replicas} once the node's Metadata has every partition of `topics`
    with a leader; None before (a topic its image has not replayed yet, a leader not elected)."""
    view = metadata(address, topics)
    out = {}
    for name in topics:
        error, partitions = view.topics.get(name, (3, {}))
        if error or not partitions or any(p.leader < 0 for p in partitions.values()):
            return None
        out.update({(name, i): list(p.replicas) for i, p in partitions.items()})
    return out


def samples(cluster: KraftdCluster, node: int) -> dict[tuple, float]:
    """Node's /metrics: {(name, sorted label pairs): value}."""
    return scrape_samples(cluster.process(node).metrics_port)


def gauge(cluster: KraftdCluster, node: int, name: str, **labels) -> float | None:
    return samples(cluster, node).get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def describe(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """`kraftd quorum describe ARGS...` as a subprocess."""
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", "describe", *args],
                          capture_output=True, text=True, timeout=timeout)


def describe_json(bootstrap: str, *args: str) -> dict:
    out = describe("--bootstrap-server", bootstrap, "--json", *args)
    assert out.returncode == 0, f"describe {bootstrap} {args} failed ({out.returncode}): {out.stderr}"
    return json.loads(out.stdout)


def parse_status(stdout: str) -> dict[str, str]:
    """The plain (--status) output: {"LeaderId": "1", ...}."""
    fields = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(":")
        assert sep, f"unexpected describe line {line!r}"
        fields[name.strip()] = value.strip()
    return fields


def wait_cluster_ready(cluster: KraftdCluster, timeout: float = 30.0) -> int:
    """Until every running node names the same metadata leader and its Metadata lists every
    running broker (brokers register after the quorum elects, so a CreateTopics with RF=3 sent
    earlier is refused with INVALID_REPLICATION_FACTOR). Returns the metadata leader's id."""
    cluster.wait_ready(timeout)
    running = cluster.running()

    def ready():
        leaders = {gauge(cluster, i, "kraftd_metadata_leader_id") for i in running}
        if len(leaders) != 1 or (leader := int(leaders.pop())) < 0:
            return None
        if any(sorted(metadata(cluster.node(i), []).brokers) != running for i in running):
            return None
        return leader

    try:
        return wait_until(ready, timeout, "every node to agree on a metadata leader and list every broker",
                          interval=0.1)
    except AssertionError:
        raise AssertionError("cluster not ready:\n" + "\n".join(cluster.logs(i, tail=30) for i in cluster.ids)) \
            from None


def describe_quorum(address: str, topic: str, partition: int, timeout: float = 2.0):
    """One node's raw DescribeQuorum v2 answer (the whole response)."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    client = WireClient(address, client_id="cluster-tests", timeout=timeout)
    try:
        return client.request(api.DESCRIBE_QUORUM, 2, m.DescribeQuorumRequest(topics=[
            m.DescribeQuorumRequest.TopicData(topic_name=topic, partitions=[
                m.DescribeQuorumRequest.PartitionData(partition_index=partition)])]))
    finally:
        client.close()


def replica_progress(address: str, topic: str, partition: int, timeout: float = 2.0) -> dict | None:
    """DescribeQuorum (raw) at one node: {voter: (log end, last fetch ms, last caught up ms)} as the
    leader sees them (timestamps are the leader's wall clock, -1 unknown); None if it does not lead."""
    response = describe_quorum(address, topic, partition, timeout)
    p = response.topics[0].partitions[0] if response.error_code == 0 and response.topics else None
    if p is None or p.error_code != 0:
        return None
    return {v.replica_id: (v.log_end_offset, v.last_fetch_timestamp, v.last_caught_up_timestamp)
            for v in p.current_voters}
