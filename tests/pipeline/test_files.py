"""format("kraftd-log") (splits at index entries, torn active tail), format("kraftd-snapshot")
and `kraftd pipeline stats`, on files written by kraftd's own storage code."""
import os

from pyspark.sql import functions as F

from kraftd.pipeline.jobs import stats
from kraftd.protocol.records import Compression, build_batch
from kraftd.storage.file_log import FileLog
from kraftd.storage.snapshots import SnapshotId, SnapshotWriter


def _log(directory, batches=200, per_batch=50, epoch=3, torn=False):
    log = FileLog(directory, segment_bytes=64 << 10, index_interval_bytes=1024)
    for b in range(batches):
        records = [(b"k%d" % (i % 97), b"v%d-%d" % (b, i), None, 1000 + b) for i in range(per_batch)]
        log.append_as_leader(bytearray(build_batch(records, compression=Compression.GZIP if b % 2 else Compression.NONE)),
                             epoch if b < batches // 2 else epoch + 1, now_ms=0)
    log.close()
    if torn:
        last = sorted(n for n in os.listdir(directory) if n.endswith(".log"))[-1]
        with open(os.path.join(directory, last), "ab") as f:
            f.write(build_batch([(b"x", b"torn", None, 0)])[:40])
    return batches * per_batch


def test_log_splits_and_torn_tail(spark, tmp_path):
    n = _log(tmp_path / "t-0", torn=True)
    df = spark.read.format("kraftd-log").option("maxBytesPerPartition", str(16 << 10)).load(str(tmp_path))
    segments = len([x for x in os.listdir(tmp_path / "t-0") if x.endswith(".log")])
    assert df.rdd.getNumPartitions() > segments > 1
    rows = df.select("offset", "value", "leaderEpoch", "isControl").orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(n))
    assert rows[0].value == b"v0-0" and rows[-1].value == b"v199-49"
    assert {r.leaderEpoch for r in rows} == {3, 4} and not any(r.isControl for r in rows)


def test_snapshot_source(spark, tmp_path):
    for sid, count in ((SnapshotId(10, 1), 5), (SnapshotId(500, 2), 30000)):
        writer = SnapshotWriter(tmp_path, sid, last_contained_log_timestamp=7, max_batch_bytes=4096)
        writer.append_many((b"k%d" % i, b"v%d" % i) for i in range(count))
        writer.freeze()
    df = spark.read.format("kraftd-snapshot").option("maxBytesPerPartition", str(64 << 10)).load(str(tmp_path))
    rows = df.collect()
    assert df.rdd.getNumPartitions() > 1
    assert sorted((r.key, r.value) for r in rows) == sorted((b"k%d" % i, b"v%d" % i) for i in range(30000))
    assert {(r.snapshotEndOffset, r.snapshotEpoch) for r in rows} == {(500, 2)}


def test_stats(spark, tmp_path):
    n = _log(tmp_path / "data" / "t-0")
    result = stats(spark, str(tmp_path / "data"), str(tmp_path / "out"))
    [row] = result["partitions"]
    assert (row["dataRecords"], row["controlRecords"], row["keys"], row["batches"]) == (n, 0, 50, 200)  # keys k0..k49 (i % 97 with i < 50)
    assert row["compressionRatio"] > 1.0
    assert [(e["leaderEpoch"], e["startOffset"]) for e in result["epochs"]] == [(3, 0), (4, n // 2)]
    assert sum(b["batches"] for b in result["batch_sizes"]) == 200
    back = spark.read.parquet(str(tmp_path / "out" / "partitions")).where(F.col("topic") == "t").collect()
    assert back[0]["dataRecords"] == n


def test_rows_latest_is_the_last_record_per_key_and_split(spark, tmp_path):
    """rows=latest (build-snapshot's combiner): one row per key and split, the key's last record
    there, within [startOffset, endOffset); the highest offset per key over all splits is the
    key's last record in the range."""
    n = _log(tmp_path / "t-0")
    lo, hi = 1234, 7000
    df = (spark.read.format("kraftd-log").option("rows", "latest").option("startOffset", str(lo))
          .option("endOffset", str(hi)).option("maxBytesPerPartition", str(16 << 10)).load(str(tmp_path)))
    assert df.rdd.getNumPartitions() > 2
    rows = df.collect()
    assert len(rows) == len({(r.key, r.offset) for r in rows}) and all(lo <= r.offset < hi for r in rows)
    assert len(rows) > 50 and {r.topic for r in rows} == {"t"} and {r.partition for r in rows} == {0}
    expected = {}
    for offset in range(lo, min(hi, n)):   # offset = 50 * b + i holds k(i % 97) = v(b)-(i)
        b, i = divmod(offset, 50)
        expected[b"k%d" % (i % 97)] = (offset, b"v%d-%d" % (b, i))
    latest = {}
    for r in rows:
        if r.key not in latest or r.offset > latest[r.key][0]:
            latest[r.key] = (r.offset, r.value)
    assert latest == expected
