"""(p) The Spark pipeline: format("kraftd") read rate against kafka-python and confluent-kafka
consumers of the same topic, SparkSession start-up apart; build-snapshot on local[2] against
kraftd's in-process snapshotter (KeyValueStateMachine + SnapshotWriter) at growing sizes.

Standalone: ``.venv/bin/python -m bench.pipeline [--quick]``. It starts its own kraftd
(fsync never) on a temporary data dir. Read rate: ``--records`` (default 1,000,000; --quick
200,000) 100-byte values in 4 partitions, pre-built batches of 1,000 records; each reader
reads the whole topic once after an unmeasured warm-up pass (Spark: one full read). MB = 10^6
bytes of key + value.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench.common import table  # noqa: E402

NAME = "pipeline"
TITLE = "(p) Spark pipeline: source read rate vs kafka-python / confluent-kafka; build-snapshot vs in-process"
PARTITIONS = 4


def _server(data_dir: str):
    from tests.support.kraftd_process import KraftdProcess
    return KraftdProcess(Path(data_dir), env={"KRAFTD_FSYNC_POLICY": "never"}).start()


def _load(bootstrap: str, topic: str, records: int, value_size: int = 100) -> int:
    from tests.pipeline.helpers import create_topics, produce_raw
    create_topics(bootstrap, {topic: PARTITIONS})
    value = os.urandom(value_size // 2) * 2
    per = records // PARTITIONS
    for p in range(PARTITIONS):
        produce_raw(bootstrap, topic, p, ((b"key-%09d" % i, value) for i in range(per)))
    return per * PARTITIONS * (value_size + 13)


def _kafka_python(bootstrap: str, topic: str, records: int) -> float:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, max_poll_records=20000,
                      fetch_max_bytes=64 << 20, max_partition_fetch_bytes=8 << 20)
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    t, n = time.monotonic(), 0
    while n < records:
        n += sum(len(rs) for rs in c.poll(1000).values())
    elapsed = time.monotonic() - t
    c.close()
    return elapsed


def _confluent(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    t, n = time.monotonic(), 0
    while n < records:
        n += sum(1 for m in c.consume(10000, 1.0) if m.error() is None)
    elapsed = time.monotonic() - t
    c.close()
    return elapsed


def _spark_read(spark, bootstrap: str, topic: str) -> float:
    from pyspark.sql import functions as F
    df = (spark.read.format("kraftd").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load())
    t = time.monotonic()
    df.select(F.count("*"), F.sum(F.length("value")), F.sum(F.length("key"))).collect()
    return time.monotonic() - t


def _in_process_snapshot(partition_dir: Path, out_dir: Path) -> float:
    from kraftd.quorum.snapshots.state_machine import KeyValueStateMachine
    from kraftd.storage.file_log import FileLog
    from kraftd.storage.snapshots import SnapshotId, SnapshotWriter
    out_dir.mkdir(parents=True, exist_ok=True)
    t = time.monotonic()
    log = FileLog(partition_dir)
    machine = KeyValueStateMachine()
    machine.catch_up(log, log.log_end_offset)
    writer = SnapshotWriter(out_dir, SnapshotId(machine.applied_offset, 0),
                            last_contained_log_timestamp=machine.last_timestamp)
    writer.append_many(machine.state.items())
    writer.freeze()
    log.close()
    return time.monotonic() - t


def run(ctx) -> dict:
    quick = getattr(ctx, "quick", False)
    records = ctx.options.get("pipeline_records") or (200_000 if quick else 1_000_000)
    sizes = [100_000, 1_000_000] if quick else [100_000, 1_000_000, 3_000_000, 5_000_000]
    from kraftd.pipeline.jobs import build_snapshot
    from kraftd.pipeline.session import spark_session
    from tests.pipeline.helpers import create_topics, produce_raw

    tmp = tempfile.mkdtemp(prefix="bench-pipeline-")
    result: dict = {"records": records, "load_before": os.getloadavg()[0]}
    try:
        t = time.monotonic()
        spark = spark_session("local[2]", "bench-pipeline", progress=False,
                              conf={"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "4g"})
        result["spark_start_s"] = time.monotonic() - t
        server = _server(os.path.join(tmp, "data"))
        try:
            ctx.log(f"pipeline: loading {records} records")
            nbytes = _load(server.bootstrap, "bench-read", records)
            result["bytes"] = nbytes
            _spark_read(spark, server.bootstrap, "bench-read")  # warm-up (Python workers, JIT)
            result["read_s"] = {"spark kraftd (local[2])": _spark_read(spark, server.bootstrap, "bench-read"),
                                "kafka-python": _kafka_python(server.bootstrap, "bench-read", records),
                                "confluent-kafka": _confluent(server.bootstrap, "bench-read", records)}
            snaps = []
            for n in sizes:
                topic = f"bench-kv-{n}"
                create_topics(server.bootstrap, {topic: 1}, {"cleanup.policy": "snapshot",
                                                          "metadata.log.max.record.bytes.between.snapshots": str(1 << 60)})
                keys = max(1, n // 10)
                produce_raw(server.bootstrap, topic, 0, ((b"key-%08d" % (i % keys), b"v%d" % i) for i in range(n)))
                snaps.append((n, keys, topic))
        finally:
            server.stop()
        result["snapshot"] = []
        for n, keys, topic in snaps:
            pdir = Path(tmp) / "data" / f"{topic}-0"
            copy = Path(tmp) / f"copy-{n}"
            shutil.copytree(Path(tmp) / "data", copy)
            inproc = _in_process_snapshot(pdir, Path(tmp) / f"inproc-{n}")
            t = time.monotonic()
            build_snapshot(spark, str(copy), topic, 0)
            result["snapshot"].append({"updates": n, "keys": keys, "in_process_s": inproc,
                                       "spark_s": time.monotonic() - t})
            ctx.log(f"pipeline: build-snapshot {n} updates: spark {result['snapshot'][-1]['spark_s']:.1f}s, "
                    f"in-process {inproc:.1f}s")
        spark.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_after"] = os.getloadavg()[0]
    return result


def report(res: dict) -> str:
    n, nbytes = res["records"], res["bytes"]
    rows = [[name, f"{n / s:,.0f}", f"{nbytes / s / 1e6:.1f}", f"{s:.2f}"] for name, s in res["read_s"].items()]
    out = [TITLE, f"load average (1 min) before / after: {res.get('load_before', -1):.1f} / "
           f"{res.get('load_after', -1):.1f} on {os.cpu_count()} cores",
           f"SparkSession start-up (local[2]): {res['spark_start_s']:.1f} s (not in the read times)",
           table(["reader", "records/s", "MB/s", "seconds"], rows), ""]
    rows = [[f"{s['updates']:,}", f"{s['keys']:,}", f"{s['in_process_s']:.1f}", f"{s['spark_s']:.1f}",
             f"{s['in_process_s'] / s['spark_s']:.2f}"] for s in res["snapshot"]]
    out.append(table(["updates", "keys", "in-process s", "spark local[2] s", "in-process/spark"], rows))
    sizes = res["snapshot"]
    wins_from = next((s["updates"] for i, s in enumerate(sizes)
                      if all(t["spark_s"] < t["in_process_s"] for t in sizes[i:])), None)
    if wins_from is not None:
        out.append(f"build-snapshot on local[2] is faster at every size measured from {wins_from:,} updates")
    elif any(s["spark_s"] < s["in_process_s"] for s in sizes):
        out.append("build-snapshot on local[2] is faster at some sizes but not at the largest: no size from which "
                   "Spark wins")
    else:
        out.append("build-snapshot on local[2] is slower than kraftd's in-process snapshotter at every size measured")
    return "\n".join(out)


def main(argv=None) -> int:
    from bench.common import Context
    p = argparse.ArgumentParser(prog="python -m bench.pipeline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--records", type=int, default=None)
    args = p.parse_args(argv)
    ctx = Context(systems=[], servers={}, skipped={}, quick=args.quick, options={"pipeline_records": args.records})
    print(report(run(ctx)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
