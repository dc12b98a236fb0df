"""Producer ids in a cluster come in blocks from the controller (AllocateProducerIds, committed
as ProducerIdsRecords): unique across nodes, across block boundaries and across restarts, on
the controller itself (a local write) and on other nodes (a request to it)."""
from __future__ import annotations

import time

from kraftd.client import WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from tests.support.cluster import KraftdCluster

PER_NODE = 1100  # more than one block (1000) per node


def _metadata_leader(cluster) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for i in cluster.running():
            for line in cluster.metrics(i).splitlines():
                if line.startswith("kraftd_metadata_leader_id ") and float(line.split()[1]) > 0:
                    return int(float(line.split()[1]))
        time.sleep(0.2)
    raise AssertionError("no metadata leader")


def _producer_ids(address: str, count: int) -> list[int]:
    client = WireClient(address, timeout=30)
    try:
        ids = []
        request = m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        while len(ids) < count:
            response = client.request(api.INIT_PRODUCER_ID, 4, request)
            if response.error_code == 0:
                ids.append(response.producer_id)
            else:  # COORDINATOR_NOT_AVAILABLE while a block is on its way: retriable
                time.sleep(0.05)
        return ids
    finally:
        client.close()


def test_producer_ids_are_unique_across_the_cluster_and_restarts(tmp_path):
    with KraftdCluster(tmp_path, nodes=3) as cluster:
        cluster.wait_ready(30)
        leader = _metadata_leader(cluster)
        ids = []
        for i in cluster.ids:  # the controller allocates locally, the others ask it
            ids += _producer_ids(cluster.node(i), PER_NODE)
        cluster.restart(leader, crash=True)
        cluster.wait_ready(30)
        _metadata_leader(cluster)
        for i in cluster.ids:
            ids += _producer_ids(cluster.node(i), 50)
        assert len(ids) == len(set(ids)), "a producer id was handed out twice"
