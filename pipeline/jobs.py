"""Offline Spark jobs over a stopped server's data dir: `build-snapshot` and `stats`."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..storage.snapshots import SnapshotId, SnapshotWriter, parse_snapshot_filename, snapshot_filename

from .log_files import DEFAULT_SPLIT_BYTES, PartitionDir, iter_split_batches, plan_segment_splits

__all__ = ["BuildResult", "build_snapshot", "log_tail", "stats", "BATCH_SIZE_BUCKETS"]


class JobError(Exception):
    pass


@dataclass(frozen=True)
class BuildResult:
    path: str
    snapshot_id: SnapshotId
    keys: int
    records_read: int
    last_contained_log_timestamp: int


@dataclass(frozen=True)
class LogTail:
    log_end: int
    epoch_before: int          # epoch of the batch holding end - 1 (-1 if none)
    max_data_timestamp: int    # largest max_timestamp of data batches in [start, end)


def _headers(directory: PartitionDir):
    for split in plan_segment_splits(directory, split_bytes=1 << 62):
        for _, h in iter_split_batches(split):
            yield h


def log_tail(directory: PartitionDir, start: int, end: int | None) -> LogTail:
    """A header walk (no record decoding) of the log: its end, the epoch of the batch holding
    `end - 1` (`end` defaults to the log end), and the newest data timestamp in [start, end)
    (SnapshotHeader's field, as KeyValueStateMachine counts it)."""
    if end is None:
        end = directory.log_start_offset
        for h in _headers(directory):
            end = h.next_offset
    log_end, epoch, max_ts = directory.log_start_offset, -1, -1
    for h in _headers(directory):
        log_end = h.next_offset
        if h.base_offset >= end:
            continue
        epoch = h.partition_leader_epoch  # (the last batch starting below `end`: the one holding end - 1,
        # or, in a compacted log, the last before a gap there)
        if not h.is_control and h.last_offset >= start:
            max_ts = max(max_ts, h.max_timestamp)
    return LogTail(log_end, epoch, max_ts)


SPLITS_PER_CORE = 2


def _split_bytes(spark, directory: PartitionDir) -> int:
    total = sum(os.path.getsize(os.path.join(directory.path, f"{b:020d}.log")) for b in directory.segment_bases())
    cores = max(1, spark.sparkContext.defaultParallelism)
    return min(DEFAULT_SPLIT_BYTES, max(8 << 20, -(-total // (SPLITS_PER_CORE * cores))))


def build_snapshot(spark, data_dir: str, topic: str, partition: int, end_offset: int | None = None) -> BuildResult:
    """The latest value per key of (latest snapshot ∪ log records below X), tombstones
    dropping keys, written as a KIP-630 checkpoint `<X>-<epoch of the record at X-1>` that
    kraftd loads at its next start. Refuses to replace an existing snapshot file."""
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    path = os.path.join(data_dir, f"{topic}-{partition}")
    if not os.path.isdir(path):
        raise JobError(f"{path}: no such partition directory")
    directory = PartitionDir(path, topic, partition)
    log_start = directory.log_start_offset
    snapshots = sorted(sid for n in os.listdir(path) if (sid := parse_snapshot_filename(n)) is not None)
    if end_offset is None:
        tail = log_tail(directory, log_start, None)
        end_offset = tail.log_end
    usable = [s for s in snapshots if s.end_offset <= end_offset]
    base = usable[-1] if usable else None
    start = base.end_offset if base else log_start
    if base is None and log_start > 0:
        raise JobError(f"{path}: the log starts at {log_start} and no snapshot at or below {end_offset} covers "
                       "the records before it; the state cannot be rebuilt")
    if end_offset < start:
        raise JobError(f"end offset {end_offset} is below the log start {start}")
    tail = log_tail(directory, start, end_offset)
    if end_offset > tail.log_end:
        raise JobError(f"end offset {end_offset} is beyond the log end {tail.log_end}")
    epoch = tail.epoch_before if end_offset > start else (base.epoch if base else -1)
    sid = SnapshotId(end_offset, epoch)
    final = os.path.join(path, snapshot_filename(sid))
    if os.path.exists(final):
        raise JobError(f"{final} exists; build-snapshot never replaces a snapshot")

    # Each split's worker keeps only the last record per key (rows=latest), so the shuffle moves
    # one row per key and split instead of one per record; splits are sized so that every core
    # gets about two.
    log = (spark.read.format("kraftd-log").option("rows", "latest").option("startOffset", str(start))
           .option("endOffset", str(end_offset)).option("maxBytesPerPartition", str(_split_bytes(spark, directory)))
           .load(path))
    records = log.select("key", F.struct(F.col("offset"), F.col("value")).alias("last"))
    if base is not None:
        snap = (spark.read.format("kraftd-snapshot").load(os.path.join(path, snapshot_filename(base)))
                .select("key", F.struct(F.lit(-1).cast("long").alias("offset"), F.col("value")).alias("last")))
        records = records.unionByName(snap)
    state = (records.groupBy("key").agg(F.max("last").alias("last"))
             .where(F.col("last.value").isNotNull())
             .select("key", F.col("last.value").alias("value")))
    table = state.toArrow()
    table = table.take(pc.sort_indices(table, sort_keys=[("key", "ascending")]))  # on the driver: no range shuffle
    last_ts = tail.max_data_timestamp
    if base is not None:
        from ..storage.snapshots import SnapshotReader
        last_ts = max(last_ts, SnapshotReader.open(os.path.join(path, snapshot_filename(base)))
                      .last_contained_log_timestamp)
    writer = SnapshotWriter(path, sid, last_contained_log_timestamp=last_ts)
    try:
        writer.append_many(zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
        written = writer.freeze()
    except BaseException:
        writer.abort()
        raise
    return BuildResult(written, sid, table.num_rows, -1, last_ts)


# -- stats ------------------------------------------------------------------------------------

BATCH_SIZE_BUCKETS = [(0, 1 << 10, "<1KiB"), (1 << 10, 4 << 10, "1-4KiB"), (4 << 10, 16 << 10, "4-16KiB"),
                      (16 << 10, 64 << 10, "16-64KiB"), (64 << 10, 256 << 10, "64-256KiB"),
                      (256 << 10, 1 << 20, "256KiB-1MiB"), (1 << 20, 1 << 62, ">=1MiB")]


def _bucket_expr(F):
    expr = None
    for lo, hi, name in BATCH_SIZE_BUCKETS:
        cond = (F.col("sizeBytes") >= lo) & (F.col("sizeBytes") < hi)
        expr = F.when(cond, name) if expr is None else expr.when(cond, name)
    return expr


def stats(spark, data_dir: str, output: str) -> dict:
    """Per partition: data and control records, bytes, distinct keys, epochs with their start
    offsets, compression ratio and a batch-size histogram; written as Parquet under `output`
    (partitions/, epochs/, batch_sizes/) and returned as lists of dicts."""
    from pyspark.sql import functions as F

    batches = spark.read.format("kraftd-log").option("rows", "batches").load(data_dir)
    records = spark.read.format("kraftd-log").load(data_dir)
    per_records = records.groupBy("topic", "partition").agg(
        F.sum(F.when(~F.col("isControl"), 1).otherwise(0)).cast("long").alias("dataRecords"),
        F.sum(F.when(F.col("isControl"), 1).otherwise(0)).cast("long").alias("controlRecords"),
        F.countDistinct(F.when(~F.col("isControl"), F.col("key"))).alias("keys"))
    per_batches = batches.groupBy("topic", "partition").agg(
        F.count("*").alias("batches"), F.sum("sizeBytes").cast("long").alias("bytes"),
        F.sum("uncompressedBytes").cast("long").alias("uncompressedBytes"),
        F.min("baseOffset").alias("firstOffset"), F.max("lastOffset").alias("lastOffset"))
    partitions = (per_batches.join(per_records, ["topic", "partition"], "left")
                  .withColumn("compressionRatio", F.round(F.col("uncompressedBytes") / F.col("bytes"), 3))
                  .orderBy("topic", "partition"))
    epochs = (batches.groupBy("topic", "partition", "leaderEpoch")
              .agg(F.min("baseOffset").alias("startOffset"), F.count("*").alias("batches"))
              .orderBy("topic", "partition", "leaderEpoch"))
    sizes = (batches.withColumn("bucket", _bucket_expr(F)).groupBy("topic", "partition", "bucket")
             .agg(F.count("*").alias("batches")).orderBy("topic", "partition", "bucket"))
    out = {}
    for name, df in (("partitions", partitions), ("epochs", epochs), ("batch_sizes", sizes)):
        df = df.cache()
        df.write.mode("overwrite").parquet(os.path.join(output, name))
        out[name] = [row.asDict() for row in df.collect()]
        df.unpersist()
    return out


def format_stats(result: dict) -> str:
    lines = [f"{'PARTITION':<28} {'DATA':>10} {'CONTROL':>8} {'KEYS':>10} {'BYTES':>12} {'BATCHES':>8} {'RATIO':>6}  "
             "EPOCHS (epoch@startOffset)"]
    epochs: dict = {}
    for row in result["epochs"]:
        epochs.setdefault((row["topic"], row["partition"]), []).append(f"{row['leaderEpoch']}@{row['startOffset']}")
    for row in result["partitions"]:
        tp = (row["topic"], row["partition"])
        lines.append(f"{row['topic'] + '-' + str(row['partition']):<28} {row['dataRecords'] or 0:>10} "
                     f"{row['controlRecords'] or 0:>8} {row['keys'] or 0:>10} {row['bytes']:>12} {row['batches']:>8} "
                     f"{row['compressionRatio']:>6}  {' '.join(epochs.get(tp, []))}")
    lines.append("")
    lines.append("batch sizes (batches per bucket):")
    hist: dict = {}
    for row in result["batch_sizes"]:
        hist.setdefault((row["topic"], row["partition"]), {})[row["bucket"]] = row["batches"]
    for tp, buckets in sorted(hist.items()):
        cells = "  ".join(f"{name}:{buckets[name]}" for _, _, name in BATCH_SIZE_BUCKETS if name in buckets)
        lines.append(f"  {tp[0]}-{tp[1]:<24} {cells}")
    return "\n".join(lines)
