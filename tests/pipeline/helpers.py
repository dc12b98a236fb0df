"""Producing and consuming with kafka-python for the pipeline tests."""
from __future__ import annotations

import random
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


# -- the acceptance round trip: kafka-python on both ends, compared as Arrow columns ------------

HEADERS_TYPE = "list<struct<key: string, value: binary>>"


def codec_records(codec: str, n: int, seed: int):
    """n (key, value, headers) of one codec: null keys, tombstones, two kinds of headers,
    values of 0 to 360 bytes."""
    rng = random.Random(seed)
    pool = [rng.randbytes(rng.choice([0, 8, 40, 120])) * rng.choice([1, 3]) for _ in range(512)]
    for i in range(n):
        key = None if i % 17 == 0 else f"{codec}-{i % 5000}".encode()
        value = None if i % 101 == 0 and key is not None else pool[i % 512]  # tombstones
        headers = None
        if i % 3 == 0:
            headers = [("trace", f"{i}".encode()), ("empty", b"")]
        elif i % 7 == 0:
            headers = [("n\u00e4me", b"\x00\xff")]
        yield key, value, headers


def _spawn_pool(workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the test process runs a JVM gateway and reader threads.
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def produce_in_processes(bootstrap: str, topic: str, jobs: list, workers: int = 2) -> None:
    """jobs: (records factory name in this module, args, producer config) run by kafka-python
    producers in `workers` processes at once (kafka-python spends ~20 µs of Python per record;
    one producer per core halves the wall time on two cores)."""
    with _spawn_pool(workers) as pool:
        for f in [pool.submit(_produce_job, bootstrap, topic, *job) for job in jobs]:
            f.result()


def _produce_job(bootstrap: str, topic: str, factory: str, args: tuple, config: dict) -> None:
    import gc
    import importlib

    gc.disable()  # a process of its own, short-lived: cyclic GC passes only cost time here

    module_name, _, name = factory.rpartition(".")
    records = getattr(importlib.import_module(module_name), name)(*args)
    produce(bootstrap, topic, records, **config)


def consume_arrow(bootstrap: str, topic: str, partitions: int, workers: int = 2):
    """What kafka-python consumers read from the log start to the current end of every
    partition, as an Arrow table sorted by (partition, offset): partition, offset, key, value,
    headers (null for a record without headers), timestamp (ms), timestampType. The partitions
    are shared out over `workers` processes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    with KafkaWire(bootstrap) as wire:
        ends = {p: o for (_, p), (o, _) in
                wire.list_offsets([(topic, p) for p in range(partitions)], LATEST_TIMESTAMP).items()}
    shares = [[p for p in range(partitions) if p % workers == w] for w in range(workers)]
    with _spawn_pool(workers) as pool:
        tables = [f.result() for f in [pool.submit(_consume_job, bootstrap, topic, {p: ends[p] for p in share})
                                       for share in shares if share]]
    table = pa.concat_tables(tables)
    return table.take(pc.sort_indices(table, [("partition", "ascending"), ("offset", "ascending")]))


def _consume_job(bootstrap: str, topic: str, ends: dict):
    import gc

    import pyarrow as pa

    gc.disable()  # a process of its own: half a million records held in lists make GC passes long

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             max_poll_records=50000, fetch_max_bytes=64 << 20, max_partition_fetch_bytes=16 << 20)
    cols: dict = {k: [] for k in ("partition", "offset", "key", "value", "headers", "timestamp", "timestampType")}
    try:
        tps = [TopicPartition(topic, p) for p in ends]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 300
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            for records in consumer.poll(1000).values():
                for r in records:
                    cols["partition"].append(r.partition)
                    cols["offset"].append(r.offset)
                    cols["key"].append(r.key)
                    cols["value"].append(r.value)
                    cols["headers"].append([{"key": k, "value": v} for k, v in r.headers] if r.headers else None)
                    cols["timestamp"].append(r.timestamp)
                    cols["timestampType"].append(r.timestamp_type)
            assert time.monotonic() < deadline, "kafka-python did not reach the end offsets"
    finally:
        consumer.close()
    types = {"partition": pa.int32(), "offset": pa.int64(), "key": pa.binary(), "value": pa.binary(),
             "headers": pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
             "timestamp": pa.int64(), "timestampType": pa.int32()}
    return pa.table({k: pa.array(v, types[k]) for k, v in cols.items()})


def assert_same_records(got, expected, topic: str) -> None:
    """A Spark DataFrame's Arrow table (Kafka schema with headers) equals `expected`
    (consume_arrow) row for row and column for column, compared by Arrow, not in Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    assert got.num_rows == expected.num_rows, (got.num_rows, expected.num_rows)
    got = got.take(pc.sort_indices(got, [("partition", "ascending"), ("offset", "ascending")]))
    assert pc.all(pc.equal(got.column("topic"), topic)).as_py()
    for name in ("partition", "offset", "key", "value", "timestampType"):
        a, b = got.column(name).combine_chunks(), expected.column(name).combine_chunks()
        assert a.equals(b.cast(a.type)), _first_difference(name, a, b)
    micros = got.column("timestamp").cast(pa.int64()).combine_chunks()
    millis = expected.column("timestamp").combine_chunks()
    assert micros.equals(pc.multiply(millis, 1000)), _first_difference("timestamp", micros, pc.multiply(millis, 1000))
    a = got.column("headers").combine_chunks()
    b = expected.column("headers").combine_chunks()
    assert a.equals(b.cast(a.type)), _first_difference("headers", a, b)


def _first_difference(name, a, b) -> str:
    for i in range(len(a)):
        if a[i].as_py() != b[i].as_py():
            return f"column {name} differs first at row {i}: {a[i].as_py()!r} != {b[i].as_py()!r}"
    return f"column {name}: types {a.type} / {b.type}"


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
    """Pre-built batches (kraftd's builder) in acks=all Produce requests, in order: fast bulk
    loading. A sender thread sends one request while this thread builds the next (the GIL is
    free while the sender waits for the answer), so building and the server's validation
    overlap on two cores."""
    import gc
    import queue
    import threading

    now = int(time.time() * 1000)
    requests: queue.Queue = queue.Queue(maxsize=4)
    failure: list = []

    def sender() -> None:
        with KafkaWire(bootstrap) as wire:
            while (batches := requests.get()) is not None:
                if not failure:
                    try:
                        wire.produce({(topic, partition): batches})
                    except BaseException as exc:  # reported by the building thread
                        failure.append(exc)

    thread = threading.Thread(target=sender, daemon=True)
    thread.start()
    paused = gc.isenabled()
    gc.disable()  # millions of short-lived tuples: GC passes would cost more than the building
    try:
        pending, chunk = [], []
        for key, value in records:
            chunk.append((key, value, None, now))
            if len(chunk) == batch_records:
                pending.append(build_batch(chunk))
                chunk = []
                if len(pending) == request_batches:
                    requests.put(pending)
                    pending = []
                    if failure:
                        break
        if chunk:
            pending.append(build_batch(chunk))
        if pending and not failure:
            requests.put(pending)
    finally:
        if paused:
            gc.enable()
        requests.put(None)
        thread.join()
    if failure:
        raise failure[0]
