"""A small synchronous Kafka wire client for the Spark driver and workers.

Built on `kraftd.client.WireClient` (one blocking connection, one request in flight) and
kraftd's generated message codecs. It routes each partition's requests to its leader from
Metadata and refreshes metadata on leadership errors. Record batches are returned as bytes
and decoded with kraftd's own batch decoder (`pipeline/arrow.py`).
"""
from __future__ import annotations

import random
import ssl
import time
from typing import NamedTuple

from kraftd.client import WireClient
from ..protocol import api
from ..protocol import messages as m
from ..protocol.errors import ErrorCode

__all__ = ["KafkaWire", "PartitionInfo", "FetchAnswer", "WireError"]

METADATA_VERSION = 9
LIST_OFFSETS_VERSION = 4
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
PRODUCE_VERSION = 8
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

_RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
              ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
              ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class WireError(Exception):
    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int
    leader_epoch: int


class FetchAnswer(NamedTuple):
    error: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class KafkaWire:
    """Connections to a cluster's brokers, one per broker, opened on first use."""

    def __init__(self, bootstrap: str, *, client_id: str = "kraftd-spark", timeout: float = 30.0,
                 retry_backoff_s: float = 0.1, retries: int = 50, tls: ssl.SSLContext | None = None,
                 sasl: tuple | None = None) -> None:
        self.bootstrap = [b.strip() for b in bootstrap.split(",") if b.strip()]
        self.client_id = client_id
        self.tls = tls  # security.protocol SSL or SASL_SSL (pipeline/security.py)
        self.sasl = sasl  # (mechanism, user, password) for SASL_PLAINTEXT or SASL_SSL
        self.timeout = timeout
        self.retry_backoff_s = retry_backoff_s
        self.retries = retries
        self._clients: dict[str, WireClient] = {}
        self._brokers: dict[int, str] = {}
        self._leaders: dict[tuple[str, int], PartitionInfo] = {}
        self._topics: dict[str, int] = {}   # topic -> partition count

    @classmethod
    def for_options(cls, opts, default_client_id: str) -> "KafkaWire":
        """A wire for a source's or sink's options: its bootstrap, `kafka.client.id` and TLS."""
        from .security import client_sasl, client_tls

        return cls(opts.bootstrap, client_id=opts.client_option("client.id", default_client_id), tls=client_tls(opts),
                   sasl=client_sasl(opts))

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def __enter__(self) -> "KafkaWire":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- plumbing ------------------------------------------------------------------------------
    def _client(self, address: str) -> WireClient:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = WireClient(address, client_id=self.client_id, timeout=self.timeout,
                                                              tls=self.tls, sasl=self.sasl)
        return client

    def _request(self, address: str, api_key: int, version: int, request):
        try:
            return self._client(address).request(api_key, version, request)
        except (OSError, ConnectionError):
            dropped = self._clients.pop(address, None)
            if dropped is not None:
                dropped.close()
            raise

    def _any_request(self, api_key: int, version: int, request):
        last: Exception | None = None
        addresses = list(dict.fromkeys([*self._brokers.values(), *self.bootstrap]))
        for address in addresses:
            try:
                return self._request(address, api_key, version, request)
            except (OSError, ConnectionError) as exc:
                last = exc
        raise WireError(f"no broker of {','.join(self.bootstrap)} answered: {last}")

    def _leader_address(self, topic: str, partition: int) -> str:
        info = self._leaders.get((topic, partition))
        if info is None or info.leader < 0 or info.leader not in self._brokers:
            self.metadata([topic])
            info = self._leaders.get((topic, partition))
        if info is None:
            raise WireError(f"unknown topic partition {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if info.leader not in self._brokers:
            raise WireError(f"{topic}-{partition} has no leader", ErrorCode.LEADER_NOT_AVAILABLE)
        return self._brokers[info.leader]

    def _retrying(self, what: str, attempt):
        """Run `attempt()` (which returns a result or raises WireError), refreshing metadata and
        backing off on retriable errors and lost connections."""
        last: Exception | None = None
        for _ in range(self.retries):
            try:
                return attempt()
            except WireError as exc:
                if exc.code not in _RETRIABLE:
                    raise
                last = exc
            except (OSError, ConnectionError) as exc:
                last = exc
            self._leaders.clear()
            time.sleep(self.retry_backoff_s)
        raise WireError(f"{what}: gave up after {self.retries} attempts: {last}")

    # -- metadata --------------------------------------------------------------------------------
    def metadata(self, topics: list[str] | None = None, *, allow_auto_create: bool = False) -> dict[str, int]:
        """Topic -> partition count (all topics when `topics` is None); remembers leaders."""
        request = m.MetadataRequest(
            topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=allow_auto_create)
        response = self._any_request(api.METADATA, METADATA_VERSION, request)
        for broker in response.brokers:
            self._brokers[broker.node_id] = f"{broker.host}:{broker.port}"
        found = {}
        for topic in response.topics:
            if topic.error_code:
                continue
            found[topic.name] = len(topic.partitions)
            self._topics[topic.name] = len(topic.partitions)
            for p in topic.partitions:
                self._leaders[(topic.name, p.partition_index)] = PartitionInfo(
                    topic.name, p.partition_index, p.leader_id if not p.error_code else -1, p.leader_epoch)
        return found

    def partitions_of(self, topics) -> list[tuple[str, int]]:
        counts = self.metadata(list(topics))
        return sorted((t, p) for t, n in counts.items() for p in range(n))

    def leader_epoch(self, topic: str, partition: int) -> int:
        info = self._leaders.get((topic, partition))
        return info.leader_epoch if info else -1

    # -- offsets ---------------------------------------------------------------------------------
    def list_offsets(self, partitions, timestamp: int) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, partition) -> (offset, leader epoch) for EARLIEST_TIMESTAMP / LATEST_TIMESTAMP."""
        out: dict = {}
        for tp in partitions:
            out[tp] = self._retrying(f"ListOffsets {tp[0]}-{tp[1]}", lambda tp=tp: self._list_offset(tp, timestamp))
        return out

    def _list_offset(self, tp, timestamp: int) -> tuple[int, int]:
        topic, partition = tp
        request = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[m.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])
        response = self._request(self._leader_address(topic, partition), api.LIST_OFFSETS, LIST_OFFSETS_VERSION, request)
        p = response.topics[0].partitions[0]
        if p.error_code:
            raise WireError(f"ListOffsets {topic}-{partition}: {ErrorCode(p.error_code).name}", p.error_code)
        return p.offset, p.leader_epoch

    def end_offset_for_epoch(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-320): (largest epoch ≤ `epoch`, its end offset) on the leader."""
        def attempt():
            request = m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=topic, partitions=[m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=partition, current_leader_epoch=-1, leader_epoch=epoch)])])
            response = self._request(self._leader_address(topic, partition), api.OFFSET_FOR_LEADER_EPOCH,
                                     OFFSET_FOR_LEADER_EPOCH_VERSION, request)
            p = response.topics[0].partitions[0]
            if p.error_code:
                raise WireError(f"OffsetForLeaderEpoch {topic}-{partition}: {ErrorCode(p.error_code).name}",
                                p.error_code)
            return p.leader_epoch, p.end_offset
        return self._retrying(f"OffsetForLeaderEpoch {topic}-{partition}", attempt)

    # -- fetch -----------------------------------------------------------------------------------
    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int = 0) -> FetchAnswer:
        """One Fetch of one partition (no session). OFFSET_OUT_OF_RANGE is returned, not raised."""
        def attempt():
            request = m.FetchRequest(
                replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[
                    m.FetchRequest.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                                  last_fetched_epoch=-1, log_start_offset=-1,
                                                  partition_max_bytes=max_bytes)])])
            response = self._request(self._leader_address(topic, partition), api.FETCH, FETCH_VERSION, request)
            if response.error_code:
                raise WireError(f"Fetch: {ErrorCode(response.error_code).name}", response.error_code)
            p = response.responses[0].partitions[0]
            if p.error_code and p.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise WireError(f"Fetch {topic}-{partition}: {ErrorCode(p.error_code).name}", p.error_code)
            records = p.records
            return FetchAnswer(p.error_code, p.high_watermark, p.log_start_offset,
                               b"" if records is None else records)
        return self._retrying(f"Fetch {topic}-{partition}", attempt)

    # -- produce ---------------------------------------------------------------------------------
    def partition_count(self, topic: str) -> int:
        n = self._topics.get(topic)
        if n is None:
            for _ in range(self.retries):
                n = self.metadata([topic], allow_auto_create=True).get(topic)
                if n:
                    break
                time.sleep(self.retry_backoff_s)
            if not n:
                raise WireError(f"topic {topic} is not available", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return n

    def produce(self, batches: dict[tuple[str, int], list[bytes]], *, acks: int = -1, timeout_ms: int = 30000) -> None:
        """Send every batch with acks=all; retriable partition errors are re-sent (at least once)."""
        pending = {tp: list(bs) for tp, bs in batches.items() if bs}
        for _ in range(self.retries):
            if not pending:
                return
            by_leader: dict[str, dict] = {}
            for tp, bs in pending.items():
                try:
                    address = self._leader_address(*tp)
                except WireError as exc:
                    if exc.code not in _RETRIABLE:
                        raise
                    continue
                by_leader.setdefault(address, {})[tp] = bs
            failed: dict = {}
            for address, group in by_leader.items():
                failed.update(self._produce_to(address, group, acks, timeout_ms))
            pending = {tp: bs for tp, bs in pending.items() if tp in failed or not any(tp in g for g in by_leader.values())}
            if pending:
                self._leaders.clear()
                time.sleep(self.retry_backoff_s * (1 + random.random()))
        if pending:
            raise WireError(f"produce to {sorted(pending)} failed after {self.retries} attempts")

    def _produce_to(self, address: str, group: dict, acks: int, timeout_ms: int) -> dict:
        topics: dict[str, list] = {}
        for (topic, partition), bs in group.items():
            topics.setdefault(topic, []).append(m.ProduceRequest.PartitionProduceData(
                index=partition, records=b"".join(bs)))
        request = m.ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            m.ProduceRequest.TopicProduceData(name=t, partition_data=ps) for t, ps in topics.items()])
        try:
            response = self._request(address, api.PRODUCE, PRODUCE_VERSION, request)
        except (OSError, ConnectionError):
            return dict(group)  # unknown outcome: re-send (the at-least-once case)
        failed = {}
        for t in response.responses:
            for p in t.partition_responses:
                if p.error_code:
                    if p.error_code not in _RETRIABLE:
                        raise WireError(f"produce to {t.name}-{p.index}: {ErrorCode(p.error_code).name} "
                                        f"{p.error_message or ''}".strip(), p.error_code)
                    failed[(t.name, p.index)] = group[(t.name, p.index)]
        return failed
