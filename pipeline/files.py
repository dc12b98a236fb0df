"""`format("kraftd-log")` and `format("kraftd-snapshot")`: a data dir's files as DataFrames,
read without a running server. See README.md, "Spark pipeline"."""
from __future__ import annotations

import gc

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..protocol.records import decode_records

from .arrow import ROWS_PER_BATCH, RowBuffer, log_ddl
from .log_files import (DEFAULT_SPLIT_BYTES, iter_snapshot_batches, iter_split_batches, latest_snapshot_path,
                        partition_dirs, plan_segment_splits, records_section_size, snapshot_splits)
from .options import OptionError, flag, option

__all__ = ["KraftdLogDataSource", "KraftdSnapshotDataSource", "BATCHES_DDL", "LATEST_DDL", "SNAPSHOT_DDL"]

BATCHES_DDL = ("topic string, partition int, baseOffset long, lastOffset long, leaderEpoch int, records int, "
               "sizeBytes int, uncompressedBytes int, compression string, isControl boolean, producerId long, "
               "maxTimestamp long")
LATEST_DDL = "topic string, partition int, key binary, value binary, offset long"
SNAPSHOT_DDL = "key binary, value binary, snapshotEndOffset long, snapshotEpoch int"
_CODEC_NAMES = ["none", "gzip", "snappy", "lz4", "zstd"]


def _path(options) -> str:
    path = option(options, "path")
    if not path:
        raise OptionError("a path is required: load(DATA_DIR), load(DATA_DIR/<topic>-<p>) or load(FILE.checkpoint)")
    return path


def _rows_option(options) -> str:
    rows = str(option(options, "rows", "records")).strip().lower()
    if rows not in ("records", "batches", "latest"):
        raise OptionError(f"rows must be records, batches or latest, not {rows!r}")
    return rows


class SplitPartition(InputPartition):
    def __init__(self, split) -> None:
        super().__init__(split)
        self.split = split


class LogReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.path = _path(options)
        self.include_headers = flag(options, "includeHeaders")
        self.rows = _rows_option(options)
        end = option(options, "endOffset")
        self.end_offset = int(end) if end is not None else None
        start = option(options, "startOffset")
        self.start_offset = int(start) if start is not None else 0
        self.split_bytes = int(option(options, "maxBytesPerPartition", DEFAULT_SPLIT_BYTES))

    def partitions(self):
        splits = [s for d in partition_dirs(self.path) for s in plan_segment_splits(d, self.split_bytes)]
        if self.end_offset is not None:
            splits = [s for s in splits if s.base_offset < self.end_offset]
        return [SplitPartition(s) for s in splits] or [SplitPartition(None)]

    def read(self, partition):
        split = partition.split
        if split is None:
            return
        if self.rows == "batches":
            yield from self._read_batches(split)
            return
        if self.rows == "latest":
            yield from self._read_latest(split)
            return
        rows = RowBuffer(include_headers=self.include_headers, batch_columns=True)
        hi = self.end_offset
        lo = max(split.log_start, self.start_offset)
        for batch, header in iter_split_batches(split):
            if hi is not None and header.base_offset >= hi:
                break
            if header.last_offset < lo:
                continue
            rows.add_batch(split.topic, split.partition, batch, header, lo, hi)
            if rows.full():
                yield rows.take()
        if len(rows):
            yield rows.take()

    def _read_latest(self, split):
        """rows=latest: the last record of each key in the split's offsets [startOffset,
        endOffset), null values (tombstones) included; keyless and control records left out.
        A combiner run where the records are: what a latest-value-per-key job (build-snapshot)
        would otherwise shuffle record by record shrinks to one row per key and split."""
        hi = self.end_offset
        lo = max(split.log_start, self.start_offset)
        values: dict = {}    # key -> value, key -> offset: bytes and ints only, which the cyclic
        offsets: dict = {}   # GC does not track (a dict of tuples made it traverse them all, over and over)
        paused = gc.isenabled()
        gc.disable()         # the decoded records are short-lived tuples: ~2x faster without GC passes
        try:
            for batch, header in iter_split_batches(split):
                if hi is not None and header.base_offset >= hi:
                    break
                if header.is_control or header.last_offset < lo:
                    continue
                records = decode_records(batch, header)
                if lo > header.base_offset or (hi is not None and header.last_offset >= hi):
                    records = [r for r in records if r[0] >= lo and (hi is None or r[0] < hi)]
                for offset, _, key, value, _ in records:
                    if key is not None:
                        values[key] = value
                        offsets[key] = offset
        finally:
            if paused:
                gc.enable()
        step = ROWS_PER_BATCH * 10
        keys = list(values)
        for i in range(0, len(keys), step):
            chunk = keys[i:i + step]
            n = len(chunk)
            yield pa.RecordBatch.from_arrays(
                [pa.array([split.topic] * n, pa.string()), pa.array([split.partition] * n, pa.int32()),
                 pa.array(chunk, pa.binary()), pa.array([values[k] for k in chunk], pa.binary()),
                 pa.array([offsets[k] for k in chunk], pa.int64())],
                names=["topic", "partition", "key", "value", "offset"])

    def _read_batches(self, split):
        cols: dict = {k: [] for k in ("topic", "partition", "baseOffset", "lastOffset", "leaderEpoch", "records",
                                      "sizeBytes", "uncompressedBytes", "compression", "isControl", "producerId",
                                      "maxTimestamp")}
        for batch, h in iter_split_batches(split):
            if h.last_offset < split.log_start:
                continue
            cols["topic"].append(split.topic)
            cols["partition"].append(split.partition)
            cols["baseOffset"].append(h.base_offset)
            cols["lastOffset"].append(h.last_offset)
            cols["leaderEpoch"].append(h.partition_leader_epoch)
            cols["records"].append(h.records_count)
            cols["sizeBytes"].append(h.size)
            cols["uncompressedBytes"].append(records_section_size(batch, h) + 61)
            cols["compression"].append(_CODEC_NAMES[h.attributes & 7] if (h.attributes & 7) < 5 else "unknown")
            cols["isControl"].append(h.is_control)
            cols["producerId"].append(h.producer_id)
            cols["maxTimestamp"].append(h.max_timestamp)
            if len(cols["topic"]) >= ROWS_PER_BATCH:
                yield _batches_table(cols)
                cols = {k: [] for k in cols}
        if cols["topic"]:
            yield _batches_table(cols)


def _batches_table(cols: dict) -> pa.RecordBatch:
    types = {"topic": pa.string(), "partition": pa.int32(), "baseOffset": pa.int64(), "lastOffset": pa.int64(),
             "leaderEpoch": pa.int32(), "records": pa.int32(), "sizeBytes": pa.int32(),
             "uncompressedBytes": pa.int32(), "compression": pa.string(), "isControl": pa.bool_(),
             "producerId": pa.int64(), "maxTimestamp": pa.int64()}
    return pa.RecordBatch.from_arrays([pa.array(cols[k], types[k]) for k in types], names=list(types))


class KraftdLogDataSource(DataSource):
    """Segment files as rows: Kafka's columns plus baseOffset, leaderEpoch, producerId, isControl
    (control records included, flagged). Option rows=batches gives one row per batch instead;
    rows=latest one row per key and split (its last record there)."""

    @classmethod
    def name(cls) -> str:
        return "kraftd-log"

    def schema(self) -> str:
        rows = _rows_option(self.options)
        if rows == "batches":
            return BATCHES_DDL
        if rows == "latest":
            return LATEST_DDL
        return log_ddl(flag(self.options, "includeHeaders"))

    def reader(self, schema):
        return LogReader(self.options)


class SnapshotFileReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.path = latest_snapshot_path(_path(options))
        self.split_bytes = int(option(options, "maxBytesPerPartition", DEFAULT_SPLIT_BYTES))

    def partitions(self):
        return [SplitPartition(s) for s in snapshot_splits(self.path, self.split_bytes)]

    def read(self, partition):
        path, end_offset, epoch, positions = partition.split
        keys: list = []
        values: list = []
        for batch, header in iter_snapshot_batches(path, positions):
            for record in decode_records(batch, header):
                keys.append(record.key)
                values.append(record.value)
            if len(keys) >= ROWS_PER_BATCH:
                yield _snapshot_batch(keys, values, end_offset, epoch)
                keys, values = [], []
        if keys:
            yield _snapshot_batch(keys, values, end_offset, epoch)


def _snapshot_batch(keys, values, end_offset, epoch) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array([end_offset] * n, pa.int64()),
         pa.array([epoch] * n, pa.int32())], names=["key", "value", "snapshotEndOffset", "snapshotEpoch"])


class KraftdSnapshotDataSource(DataSource):
    """A KIP-630 checkpoint file (or a partition directory's newest one) as key/value rows."""

    @classmethod
    def name(cls) -> str:
        return "kraftd-snapshot"

    def schema(self) -> str:
        return SNAPSHOT_DDL

    def reader(self, schema):
        return SnapshotFileReader(self.options)
