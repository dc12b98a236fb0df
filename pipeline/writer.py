"""The Kafka sink's write path: DataFrame rows → record batches → Produce (acks=all).

Input columns as Spark's Kafka sink takes them (KafkaWriter.validateQuery): `value` (string
or binary) required; `key` (string or binary), `topic` (string), `partition` (int) and
`headers` (array<struct<key:string,value:binary>>) optional; the `topic` option, when set,
wins over the column. A row without a partition goes where the Java producer's default
partitioner puts it: murmur2 of the key, or, without a key, one partition per Arrow batch
(the producer's "sticky" choice). At least once: a Produce whose answer is lost or retriable
is sent again, so a record can be written twice, never silently dropped.
"""
from __future__ import annotations

import random
import time

import pyarrow as pa

from ..protocol.records import Compression, build_batch

from .options import OptionError, SinkOptions
from .partitioner import partition_for_key
from .wire import KafkaWire

__all__ = ["check_sink_schema", "RowProducer"]

_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
_DEFAULT_BATCH_BYTES = 256 << 10   # kafka.batch.size (Java's default is 16 KiB; bigger is cheaper here)
_REQUEST_BYTES = 1 << 20           # one Produce request per ~1 MiB of batches


def _type_name(dt) -> str:
    return dt.simpleString()


def check_sink_schema(schema, topic_option: str | None) -> dict:
    """Spark's KafkaWriter.validateQuery, with its messages; returns {column: kind}."""
    fields = {f.name: f.dataType for f in schema.fields}
    wanted = {
        "topic": ("string",), "key": ("string", "binary"), "value": ("string", "binary"),
        "headers": ("array<struct<key:string,value:binary>>",), "partition": ("int",)}
    if topic_option is None and "topic" not in fields:
        raise OptionError("topic option required when no 'topic' attribute is present. Use the topic option "
                          "for setting a topic.")
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    for name, allowed in wanted.items():
        if name == "topic" and topic_option is not None:
            continue
        if name in fields and _type_name(fields[name]) not in allowed:
            raise OptionError(f"{name} attribute unsupported type {_type_name(fields[name])}. {name} must be a(n) "
                              f"{' or '.join(allowed)}")
    return {name: _type_name(fields[name]) for name in wanted if name in fields}


def _as_bytes(values: list, kind: str) -> list:
    if kind == "string":
        return [None if v is None else v.encode() for v in values]
    return values


class RowProducer:
    """Groups rows into record batches per partition and sends them with acks=all."""

    def __init__(self, opts: SinkOptions, columns: dict) -> None:
        self.opts = opts
        self.columns = columns
        self.wire = KafkaWire.for_options(opts, "kraftd-spark-writer")
        codec = opts.client_option("compression.type", "none").lower()
        if codec not in _CODECS:
            raise OptionError(f"Invalid value {codec} for configuration compression.type")
        self.compression = _CODECS[codec]
        self.batch_bytes = int(opts.client_option("batch.size", _DEFAULT_BATCH_BYTES))
        self.records = 0
        self._open: dict = {}       # (topic, partition) -> (records, bytes)
        self._ready: dict = {}      # (topic, partition) -> [batch bytes]
        self._ready_bytes = 0

    def __enter__(self) -> "RowProducer":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if exc_type is None:
                self.flush()
        finally:
            self.wire.close()

    def add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if not n:
            return
        cols = {name: batch.column(batch.schema.get_field_index(name)).to_pylist() for name in self.columns}
        values = _as_bytes(cols["value"], self.columns["value"])
        keys = _as_bytes(cols["key"], self.columns["key"]) if "key" in cols else [None] * n
        if self.opts.topic is not None:
            topics = [self.opts.topic] * n
        else:
            topics = cols["topic"]
            if any(t is None for t in topics):
                raise OptionError("[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the producer contains a "
                                  "null topic. Use the `topic` option for setting a default topic.")
        partitions = cols.get("partition", [None] * n)
        headers = cols.get("headers", [None] * n)
        sticky: dict = {}
        now = int(time.time() * 1000)
        for key, value, topic, partition, hdrs in zip(keys, values, topics, partitions, headers):
            if partition is None:
                count = self.wire.partition_count(topic)
                if key is not None:
                    partition = partition_for_key(key, count)
                else:
                    partition = sticky.get(topic)
                    if partition is None:
                        partition = sticky[topic] = random.randrange(count)
            record = (key, value, [(h["key"], h["value"]) for h in hdrs] if hdrs else None, now)
            self._append((topic, partition), record)
        self.records += n

    def _append(self, tp, record) -> None:
        pending = self._open.get(tp)
        if pending is None:
            pending = self._open[tp] = [[], 0]
        pending[0].append(record)
        pending[1] += len(record[1] or b"") + len(record[0] or b"") + 16
        if pending[1] >= self.batch_bytes:
            self._seal(tp)

    def _seal(self, tp) -> None:
        records, size = self._open.pop(tp)
        batch = build_batch(records, compression=self.compression)
        self._ready.setdefault(tp, []).append(batch)
        self._ready_bytes += len(batch)
        if self._ready_bytes >= _REQUEST_BYTES:
            self._send()

    def _send(self) -> None:
        if self._ready:
            self.wire.produce(self._ready, acks=-1)
        self._ready, self._ready_bytes = {}, 0

    def flush(self) -> None:
        for tp in list(self._open):
            self._seal(tp)
        self._send()
