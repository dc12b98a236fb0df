"""Producing and consuming with kafka-python for the pipeline tests."""
from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kraftd.pipeline.wire import LATEST_TIMESTAMP, KafkaWire
from kraftd.protocol.records import build_batch


def create_topics(bootstrap: str, specs: dict, configs: dict | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, n, 1, topic_configs=configs or {}) for name, n in specs.items()])
    finally:
        admin.close()
    wait_for_leaders(bootstrap, list(specs))


def wait_for_leaders(bootstrap: str, topics: list, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with KafkaWire(bootstrap) as wire:
        while True:
            try:
                tps = wire.partitions_of(topics)
                wire.list_offsets(tps, LATEST_TIMESTAMP)
                if tps:
                    return
            except Exception:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)


def produce(bootstrap: str, topic: str, records, **config) -> None:
    """records: (key, value, headers list) tuples, sent with kafka-python."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024,
                             max_request_size=4 << 20, **config)
    try:
        for key, value, headers in records:
            producer.send(topic, key=key, value=value, headers=headers or [])
        producer.flush(60)
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str, partitions: int) -> list:
    """Every record from the log start to the current end, with kafka-python: sorted
    (partition, offset, key, value, headers or None, timestamp ms, timestamp type)."""
    with KafkaWire(bootstrap) as wire:
        ends = {p: o for (_, p), (o, _) in
                wire.list_offsets([(topic, p) for p in range(partitions)], LATEST_TIMESTAMP).items()}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             max_poll_records=20000, fetch_max_bytes=64 << 20, max_partition_fetch_bytes=8 << 20)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        out = []
        deadline = time.monotonic() + 300
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            for records in consumer.poll(1000).values():
                for r in records:
                    out.append((r.partition, r.offset, r.key, r.value,
                                [(k, v) for k, v in r.headers] if r.headers else None,
                                r.timestamp, r.timestamp_type))
            assert time.monotonic() < deadline, "kafka-python did not reach the end offsets"
        out.sort(key=lambda r: (r[0], r[1]))
        return out
    finally:
        consumer.close()


def arrow_rows(table, *, headers: bool = True) -> list:
    """The same tuples from a Spark DataFrame's Arrow table (Kafka schema)."""
    import pyarrow as pa

    cols = [table.column("partition").to_pylist(), table.column("offset").to_pylist(),
            table.column("key").to_pylist(), table.column("value").to_pylist(),
            [None if h is None else [(x["key"], x["value"]) for x in h] for h in table.column("headers").to_pylist()]
            if headers else [None] * table.num_rows,
            [t // 1000 for t in table.column("timestamp").cast(pa.int64()).to_pylist()],
            table.column("timestampType").to_pylist()]
    rows = list(zip(*cols))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def produce_raw(bootstrap: str, topic: str, partition: int, records, batch_records: int = 1000,
                request_batches: int = 8) -> None:
    """Pre-built batches (kraftd's builder) in acks=all Produce requests: fast bulk loading."""
    now = int(time.time() * 1000)
    with KafkaWire(bootstrap) as wire:
        pending, chunk = [], []
        for key, value in records:
            chunk.append((key, value, None, now))
            if len(chunk) == batch_records:
                pending.append(build_batch(chunk))
                chunk = []
                if len(pending) == request_batches:
                    wire.produce({(topic, partition): pending})
                    pending = []
        if chunk:
            pending.append(build_batch(chunk))
        if pending:
            wire.produce({(topic, partition): pending})
