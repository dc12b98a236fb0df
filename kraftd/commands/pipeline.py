"""`kraftd pipeline build-snapshot|stats`: Spark jobs over a stopped server's data dir (needs the
`spark` extra and Java 17).

    kraftd pipeline build-snapshot --data-dir D --topic T --partition P [--end-offset X] [--master M]
    kraftd pipeline stats --data-dir D [--output DIR] [--master M]
"""
from __future__ import annotations

import argparse
import sys
import time


def register(subparsers) -> None:
    p = subparsers.add_parser("pipeline", help="Spark jobs over a data dir: build-snapshot, stats",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="pipeline_command", metavar="JOB", required=True)

    build = sub.add_parser("build-snapshot", help="write a KIP-630 snapshot of a partition from its files")
    build.add_argument("--data-dir", required=True, metavar="DIR")
    build.add_argument("--topic", required=True)
    build.add_argument("--partition", required=True, type=int)
    build.add_argument("--end-offset", type=int, default=None, metavar="X",
                       help="snapshot the records below X (default: the log end)")
    build.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    build.set_defaults(run=run_build_snapshot)

    st = sub.add_parser("stats", help="per-partition records, bytes, keys, epochs, compression, batch sizes")
    st.add_argument("--data-dir", required=True, metavar="DIR")
    st.add_argument("--output", default="./kraftd-stats", metavar="DIR",
                    help="Parquet output directory (default ./kraftd-stats)")
    st.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    st.set_defaults(run=run_stats)


def _session(master: str, app: str):
    try:
        from kraftd.pipeline.session import java_missing_reason, spark_session
    except ImportError as exc:  # pragma: no cover - the extra is missing
        print(f"kraftd pipeline: {exc}; install the extra: pip install 'kraftd[spark]'", file=sys.stderr)
        return None
    reason = java_missing_reason()
    if reason:
        print(f"kraftd pipeline: {reason}", file=sys.stderr)
        return None
    return spark_session(master, app)


def run_build_snapshot(args: argparse.Namespace) -> int:
    from kraftd.pipeline.jobs import JobError, build_snapshot

    spark = _session(args.master, "kraftd build-snapshot")
    if spark is None:
        return 2
    started = time.monotonic()
    try:
        result = build_snapshot(spark, args.data_dir, args.topic, args.partition, args.end_offset)
    except (JobError, FileNotFoundError) as exc:
        print(f"kraftd pipeline build-snapshot: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(f"wrote {result.path}: end_offset={result.snapshot_id.end_offset} epoch={result.snapshot_id.epoch} "
          f"keys={result.keys} in {time.monotonic() - started:.1f}s")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from kraftd.pipeline.jobs import format_stats, stats

    spark = _session(args.master, "kraftd stats")
    if spark is None:
        return 2
    try:
        result = stats(spark, args.data_dir, args.output)
    except FileNotFoundError as exc:
        print(f"kraftd pipeline stats: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print(format_stats(result))
    print(f"\nParquet written under {args.output} (partitions/, epochs/, batch_sizes/)")
    return 0
