"""Kafka record batches → pyarrow RecordBatches with the schema of Spark's Kafka source.

Decoding uses kraftd's own v2 batch decoder (`kraftd.protocol.records`). Rows are gathered
into columns and emitted as Arrow batches of about `ROWS_PER_BATCH` rows: a Python data
source that yields Arrow reads several times faster than one yielding tuples.
"""
from __future__ import annotations

import pyarrow as pa

from ..protocol.records import BatchHeader, decode_records

__all__ = ["ROWS_PER_BATCH", "KAFKA_SCHEMA_DDL", "LOG_SCHEMA_DDL", "HEADERS_TYPE", "kafka_ddl", "log_ddl",
           "RowBuffer"]

ROWS_PER_BATCH = 10_000

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
_TS = pa.timestamp("us", tz="UTC")

KAFKA_SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
                    "timestamp timestamp, timestampType int")
HEADERS_DDL = ", headers array<struct<key:string,value:binary>>"
LOG_BATCH_DDL = ", baseOffset long, leaderEpoch int, producerId long, isControl boolean"


def kafka_ddl(include_headers: bool) -> str:
    """The schema of Spark's Kafka source (KafkaRecordToRowConverter.kafkaSchema)."""
    return KAFKA_SCHEMA_DDL + (HEADERS_DDL if include_headers else "")


def log_ddl(include_headers: bool) -> str:
    return kafka_ddl(include_headers) + LOG_BATCH_DDL


class RowBuffer:
    """Columns of decoded records; `take()` hands out an Arrow batch once enough are gathered."""

    def __init__(self, *, include_headers: bool, batch_columns: bool = False,
                 rows_per_batch: int = ROWS_PER_BATCH) -> None:
        self.include_headers = include_headers
        self.batch_columns = batch_columns
        self.rows_per_batch = rows_per_batch
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.topics: list = []
        self.partitions: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.ts_types: list = []
        self.headers: list = []
        self.base_offsets: list = []
        self.epochs: list = []
        self.producer_ids: list = []
        self.controls: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, topic: str, partition: int, batch, header: BatchHeader,
                  lo: int = -1, hi: int | None = None) -> int:
        """Append the records of one batch whose offsets are in [lo, hi); returns how many."""
        records = decode_records(batch, header)
        if lo > header.base_offset or (hi is not None and header.last_offset >= hi):
            records = [r for r in records if r.offset >= lo and (hi is None or r.offset < hi)]
        n = len(records)
        if not n:
            return 0
        self.keys += [r[2] for r in records]
        self.values += [r[3] for r in records]
        self.offsets += [r[0] for r in records]
        self.timestamps += [r[1] * 1000 for r in records]  # ms -> µs
        self.topics += [topic] * n
        self.partitions += [partition] * n
        self.ts_types += [header.timestamp_type] * n
        if self.include_headers:
            self.headers += [r[4] for r in records]
        if self.batch_columns:
            self.base_offsets += [header.base_offset] * n
            self.epochs += [header.partition_leader_epoch] * n
            self.producer_ids += [header.producer_id] * n
            self.controls += [header.is_control] * n
        return n

    def full(self) -> bool:
        return len(self.offsets) >= self.rows_per_batch

    def take(self) -> pa.RecordBatch:
        arrays = [pa.array(self.keys, pa.binary()), pa.array(self.values, pa.binary()),
                  pa.array(self.topics, pa.string()), pa.array(self.partitions, pa.int32()),
                  pa.array(self.offsets, pa.int64()), pa.array(self.timestamps, pa.int64()).cast(_TS),
                  pa.array(self.ts_types, pa.int32())]
        names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
        if self.include_headers:
            arrays.append(_headers_array(self.headers))
            names.append("headers")
        if self.batch_columns:
            arrays += [pa.array(self.base_offsets, pa.int64()), pa.array(self.epochs, pa.int32()),
                       pa.array(self.producer_ids, pa.int64()), pa.array(self.controls, pa.bool_())]
            names += ["baseOffset", "leaderEpoch", "producerId", "isControl"]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, names=names)


def _headers_array(headers: list) -> pa.Array:
    """list<struct<key,value>>, null for a record without headers (as Spark's source gives)."""
    offsets = [0]
    valid = []
    hkeys: list = []
    hvalues: list = []
    for h in headers:
        if h:
            hkeys += [k for k, _ in h]
            hvalues += [v for _, v in h]
            valid.append(True)
        else:
            valid.append(False)
        offsets.append(len(hkeys))
    structs = pa.StructArray.from_arrays([pa.array(hkeys, pa.string()), pa.array(hvalues, pa.binary())],
                                         names=["key", "value"])
    mask = pa.array([not v for v in valid], pa.bool_())
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, type=HEADERS_TYPE, mask=mask)
