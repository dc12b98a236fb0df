"""Raw Kafka-protocol helpers for the snapshot wire tests (WireClient requests, bounded waits)."""
from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from pathlib import Path

from kraftd.client import StateReader, WireClient
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.records import build_batch
from kraftd.storage.snapshots import SnapshotId, SnapshotReader, SnapshotStore
from tests.support.prometheus import scrape_samples
from tests.support.waiting import wait_until  # noqa: F401  (used by the tests via this module)

SNAPSHOT_POLICY = {"cleanup.policy": "snapshot"}
# The snapshots of the `served` fixture (tests/snapshots/conftest.py).
BIG = SnapshotId(1000, 1)
SMALL = SnapshotId(400, 1)


def create_topic(client: WireClient, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    request = m.CreateTopicsRequest(timeout_ms=10_000, topics=[m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v))
                 for k, v in (configs or {}).items()])])
    result = client.request(api.CREATE_TOPICS, 7, request).topics[0]
    assert result.error_code == 0, (name, result.error_code, result.error_message)


def produce(client: WireClient, topic: str, partition: int, batch: bytes, acks: int = -1):
    request = m.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30_000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    out = client.request(api.PRODUCE, 9, request).responses[0].partition_responses[0]
    assert out.error_code == 0, out
    return out


def put_many(client: WireClient, topic: str, partition: int, pairs, per_batch: int = 1000,
             model: dict | None = None, timestamp: int | None = None) -> None:
    """Produce (key, value|None) pairs in pre-built batches; apply them to `model`."""
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    pairs = list(pairs)
    for i in range(0, len(pairs), per_batch):
        chunk = pairs[i:i + per_batch]
        produce(client, topic, partition, build_batch([(k, v, [], ts) for k, v in chunk]))
    if model is not None:
        for k, v in pairs:
            if v is None:
                model.pop(k, None)
            else:
                model[k] = v


def random_updates(rng: random.Random, n: int, keys: int, delete_ratio: float = 0.1, value_size: int = 16):
    for i in range(n):
        key = b"key-%06d" % rng.randrange(keys)
        if rng.random() < delete_ratio:
            yield key, None
        else:
            yield key, (b"v%d-" % i).ljust(value_size, b".")


def fetch_snapshot(client: WireClient, parts, *, max_bytes: int = 1 << 30, cluster_id: str | None = None,
                   version: int = 0):
    """parts: [(topic, partition, SnapshotId, position, current_leader_epoch), ...] → the response."""
    by_topic: dict = {}
    for topic, partition, sid, position, epoch in parts:
        by_topic.setdefault(topic, []).append(m.FetchSnapshotRequest.PartitionSnapshot(
            partition=partition, current_leader_epoch=epoch, position=position,
            snapshot_id=m.FetchSnapshotRequest.SnapshotId(end_offset=sid[0], epoch=sid[1])))
    request = m.FetchSnapshotRequest(cluster_id=cluster_id, replica_id=-1, max_bytes=max_bytes, topics=[
        m.FetchSnapshotRequest.TopicSnapshot(name=t, partitions=ps) for t, ps in by_topic.items()])
    return client.request(api.FETCH_SNAPSHOT, version, request)


def one_partition(response, topic: str | None = None, partition: int = 0):
    for t in response.topics:
        if topic is None or t.name == topic:
            for p in t.partitions:
                if p.index == partition:
                    return p
    raise AssertionError(f"{topic}-{partition} not in {response}")


def fetch(client: WireClient, topic: str, partition: int, offset: int, *, version: int = 12,
          last_fetched_epoch: int = -1, replica_id: int = -1, max_bytes: int = 1 << 20):
    """One partition's FetchResponse.PartitionData (v13+ name the topic by its id)."""
    request = m.FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[
            m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                partition_max_bytes=max_bytes)])])
    if version >= 13:
        request.topics[0].topic_id = topic_id(client, topic)
    return client.request(api.FETCH, version, request).responses[0].partitions[0]


def topic_id(client: WireClient, topic: str):
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)])
    (found,) = client.request(api.METADATA, 12, request).topics
    return found.topic_id


def leader_epoch(client: WireClient, topic: str, partition: int = 0) -> int:
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)])
    for t in client.request(api.METADATA, 12, request).topics:
        for p in t.partitions:
            if p.partition_index == partition:
                return p.leader_epoch
    raise AssertionError(f"{topic}-{partition} not in metadata")


def write_snapshot(directory: Path, sid: SnapshotId, items, *, timestamp: int = 1_700_000_000_000,
                   max_batch_bytes: int = 1 << 20) -> Path:
    store = SnapshotStore(directory)
    writer = store.writer(sid, last_contained_log_timestamp=timestamp, max_batch_bytes=max_batch_bytes)
    writer.append_many(items)
    return Path(writer.freeze())


def snapshot_state(path) -> dict:
    return {bytes(k): bytes(v) for k, v in SnapshotReader.open(path).items()}


def checkpoints(directory: Path) -> list[SnapshotId]:
    return SnapshotStore(directory).ids() if directory.exists() else []




def http(method: str, url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def metrics(server) -> dict:
    """The server's samples: {(name, sorted label pairs): value}."""
    return scrape_samples(server.metrics_port)


def partition_files(directory: Path) -> dict[str, list[str]]:
    names = sorted(os.listdir(directory))
    return {"log": [n for n in names if n.endswith(".log")],
            "checkpoint": [n for n in names if n.endswith(".checkpoint")],
            "part": [n for n in names if n.endswith(".part")]}


def snapshot_json(body: bytes) -> dict:
    return json.loads(body.decode())


class RecordingStateReader(StateReader):
    """Records every FetchSnapshot chunk it asks for; `replace_at` fakes the leader replacing the
    snapshot (the chunk with that index asks for a snapshot id the leader does not have)."""

    def __init__(self, *args, replace_at: int = -1, **kwargs) -> None:
        self.chunks: list[tuple[SnapshotId, int]] = []
        self.replace_at = replace_at
        super().__init__(*args, **kwargs)

    def _fetch_snapshot_chunk(self, sid, position):
        self.chunks.append((sid, position))
        if len(self.chunks) - 1 == self.replace_at:
            return super()._fetch_snapshot_chunk(SnapshotId(sid.end_offset, sid.epoch + 7), position)
        return super()._fetch_snapshot_chunk(sid, position)

