"""A builder-style context for driving the sans-IO Node in tests: no sockets, explicit time."""
from __future__ import annotations

import dataclasses

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.records import build_batch, decode_records
from kraftd.quorum.node import Node
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.outcomes import NoResponse, Park, Respond

START_MS = 1_700_000_000_000


class NodeTestContext:
    def __init__(self, node: Node, config: NodeConfig, now_ms: int) -> None:
        self.node = node
        self.config = config
        self.now_ms = now_ms
        self.completions: dict[int, object] = {}
        self._correlation = 0

    @staticmethod
    def builder(data_dir) -> "NodeTestContextBuilder":
        return NodeTestContextBuilder(data_dir)

    # -- time and durability -------------------------------------------------------------
    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self._collect(self.node.poll(self.now_ms))

    def flush(self) -> None:
        """What the server's group-commit flusher does."""
        for key, log in self.node.logs_to_flush():
            offset = log.flush()
            self._collect(self.node.on_flushed(key, offset, self.now_ms))
        self._collect(self.node.poll(self.now_ms))

    def _collect(self, completions) -> None:
        for c in completions:
            self.completions[c.token] = c.response

    def restart(self) -> "NodeTestContext":
        self.node.close()
        node = Node.open(self.config, self.now_ms)
        return NodeTestContext(node, self.config, self.now_ms)

    # -- requests ------------------------------------------------------------------------
    def deliver(self, request, version: int, api_key: int | None = None):
        self._correlation += 1
        key = api_key if api_key is not None else _API_OF[type(request).__name__]
        header = m.RequestHeader(request_api_key=key, request_api_version=version,
                                 correlation_id=self._correlation, client_id="test")
        outcome = self.node.handle(header, request, self.now_ms, "127.0.0.1")
        self._collect(self.node.poll(self.now_ms))
        return outcome

    def respond(self, request, version: int):
        outcome = self.deliver(request, version)
        assert isinstance(outcome, Respond), f"expected an immediate response, got {outcome}"
        return outcome.response

    def produce(self, topic: str, partition: int, batch: bytes, *, acks: int = 1, version: int = 9,
                timeout_ms: int = 30_000):
        request = m.ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
            m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                m.ProduceRequest.PartitionProduceData(index=partition, records=memoryview(batch))])])
        return self.deliver(request, version)

    def produce_ok(self, topic: str, partition: int, values, **kw):
        outcome = self.produce(topic, partition, batch_of(values), **kw)
        assert isinstance(outcome, Respond), outcome
        out = outcome.response.responses[0].partition_responses[0]
        assert out.error_code == 0, out
        return out

    def fetch_request(self, topic: str, partition: int, offset: int, *, version: int = 12, max_wait_ms: int = 0,
                      min_bytes: int = 1, current_leader_epoch: int = -1, last_fetched_epoch: int = -1,
                      partition_max_bytes: int = 1 << 20, max_bytes: int = 50 << 20):
        topic_id = self.node.topics.get(topic).topic_id if self.node.topics.get(topic) else None
        fetch_topic = m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=partition_max_bytes)])
        if topic_id is not None:
            fetch_topic.topic_id = topic_id
        return m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                              isolation_level=0, session_id=0, session_epoch=-1, topics=[fetch_topic])

    def fetch(self, topic: str, partition: int, offset: int, *, version: int = 12, **kw):
        response = self.respond(self.fetch_request(topic, partition, offset, version=version, **kw), version)
        return response.responses[0].partitions[0]

    def create_topic(self, name: str, partitions: int = 1, configs: dict | None = None, version: int = 7):
        request = m.CreateTopicsRequest(timeout_ms=1000, validate_only=False, topics=[
            m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                  assignments=[], configs=[
                    m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in (configs or {}).items()])])
        return self.respond(request, version).topics[0]


class NodeTestContextBuilder:
    def __init__(self, data_dir) -> None:
        self._config = NodeConfig(data_dir=str(data_dir), fsync_policy="acks_all")
        self._topics: list[tuple[str, int, dict]] = []
        self._now = START_MS

    def with_config(self, **overrides) -> "NodeTestContextBuilder":
        self._config = dataclasses.replace(self._config, **overrides)
        return self

    def with_topic(self, name: str, partitions: int = 1, configs: dict | None = None) -> "NodeTestContextBuilder":
        self._topics.append((name, partitions, configs or {}))
        return self

    def build(self) -> NodeTestContext:
        ctx = NodeTestContext(Node.open(self._config, self._now), self._config, self._now)
        for name, partitions, configs in self._topics:
            assert ctx.create_topic(name, partitions, configs).error_code == 0
        ctx.flush()
        return ctx


def batch_of(values, *, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
             timestamp: int = START_MS) -> bytes:
    records = [(None if v is None else f"k{i}".encode(), v if isinstance(v, (bytes, type(None))) else v.encode(),
                [], timestamp) for i, v in enumerate(values)]
    return build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


def values_in(partition_data, from_offset: int = 0) -> list[bytes]:
    """Decode the data records of a fetched partition as a client would: control batches and
    records below the fetch offset (whole batches come back) are skipped."""
    records = partition_data.records
    raw = records.view() if hasattr(records, "view") else records
    from kraftd.protocol.records import iter_batch_headers

    out = []
    buf = bytes(raw)
    for pos, header in iter_batch_headers(buf):
        if header.is_control:
            continue
        out += [bytes(r.value) for r in decode_records(buf[pos:pos + header.size], header)
                if r.offset >= from_offset]
    return out


_API_OF = {
    "ProduceRequest": api.PRODUCE, "FetchRequest": api.FETCH, "ListOffsetsRequest": api.LIST_OFFSETS,
    "MetadataRequest": api.METADATA, "ApiVersionsRequest": api.API_VERSIONS, "CreateTopicsRequest": api.CREATE_TOPICS,
    "InitProducerIdRequest": api.INIT_PRODUCER_ID, "OffsetForLeaderEpochRequest": api.OFFSET_FOR_LEADER_EPOCH,
    "DeleteRecordsRequest": api.DELETE_RECORDS,
}

__all__ = ["NodeTestContext", "batch_of", "values_in", "NoResponse", "Park", "Respond", "START_MS"]
