"""The pipeline over a compacted topic's log: `format("kraftd-log")` reads the cleaned segments
with their offset gaps (each record at its own offset), and `build-snapshot` takes the topic."""
from __future__ import annotations

import random

from kraftd.pipeline.jobs import build_snapshot
from kraftd.protocol.records import build_batch
from kraftd.storage import FileLog
from kraftd.storage.background_writes import background_writes
from kraftd.storage.snapshots import SnapshotReader

NOW = 1_700_000_000_000


def compacted_partition(data_dir):
    log = FileLog(data_dir / "kv-0", segment_bytes=4096, compacted=True)
    rng = random.Random(3)
    written = []
    for i in range(300):
        pairs = [(b"key-%02d" % rng.randrange(40), None if rng.random() < 0.1 else b"v%d-%d" % (i, j))
                 for j in range(3)]
        first = log.append_as_leader(bytearray(build_batch([(k, v, None, NOW - 1000) for k, v in pairs])), 1,
                                     now_ms=NOW).first_offset
        written += [(first + j, k, v) for j, (k, v) in enumerate(pairs)]
    log.flush()
    range_ = log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=0)
    plan = log.plan_cleaning(range_, now_ms=NOW, delete_retention_ms=10**9, max_keys=10**6, io_bytes_per_second=None)
    plan.run()
    assert log.commit_cleaning(plan)
    kept = []
    offset = 0
    while offset < log.log_end_offset:  # what a consumer reads
        result = log.read(offset, 1 << 20)
        from kraftd.protocol.records import decode_records, iter_batch_headers
        data = result.to_bytes()
        for pos, h in iter_batch_headers(data):
            kept += [(r.offset, r.key, r.value) for r in decode_records(data[pos:pos + h.size], h) if r.offset >= offset]
        offset = result.next_offset
    log.close()
    background_writes().barrier()
    assert len(kept) < len(written)
    return written, kept


def test_the_log_source_reads_a_cleaned_log_gaps_and_all(spark, tmp_path):
    _, kept = compacted_partition(tmp_path)
    rows = spark.read.format("kraftd-log").load(str(tmp_path)).select("offset", "key", "value").collect()
    assert sorted((r.offset, bytes(r.key), None if r.value is None else bytes(r.value)) for r in rows) == kept


def test_build_snapshot_takes_a_compacted_topic(spark, tmp_path):
    written, _ = compacted_partition(tmp_path)
    result = build_snapshot(spark, str(tmp_path), "kv", 0)
    latest = {}
    for _, k, v in written:
        latest[k] = v
    assert dict(SnapshotReader.open(result.path).items()) == {k: v for k, v in latest.items() if v is not None}
    assert result.snapshot_id.end_offset == written[-1][0] + 1
