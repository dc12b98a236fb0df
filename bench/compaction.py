"""(y) Log compaction: how fast the cleaner cleans, and what it costs the latency of the
records going through the node while it runs.

1. **Cleaner throughput.** In process, on real files: a compacted FileLog with N MB of dirty
   log (default 200 MB: 1 KiB values over 20,000 keys, batches of 16 records, segments of
   16 MB), then one pass: ``plan_cleaning`` (loop), ``run()`` (the cleaner thread's part:
   map the keys, copy the latest records into ``.cleaned`` files, fsync) and
   ``commit_cleaning`` (loop: renames, index files). MB/s = dirty bytes / run seconds; the
   commit's time is what the event loop pays. Repeated (``--repeats``, fresh logs), medians.
2. **Latency with the cleaner running.** A ``kraftd serve`` (defaults, fsync ``acks_all``,
   ``log_cleaner_backoff_ms=100``) with two topics: ``churn`` (compacted, 4 MB segments,
   min.cleanable.dirty.ratio 0.01, segment.ms 1 s), written by a paced confluent-kafka producer
   at ``--churn-rate`` records/s of 1 KiB over 50,000 keys (so that a pass starts every
   fraction of a second and rewrites the whole clean part), and ``latency`` (1 partition, not
   compacted): records at ``--rate``/s (acks=all, linger 0) each carrying its send time,
   read by a consumer in this process (``fetch.wait.max.ms=5``); latency = receive - send.
   The same run with ``KRAFTD_LOG_CLEANER_ENABLE=false`` is the baseline; the two alternate
   (``--rounds``) and their p99s are compared as medians and a ratio, in the same run. The
   server's cleaner counters (/metrics) say how much it cleaned meanwhile.
3. **A group coordinator's load** (``--only-offsets``): K committed offsets (default 200,000)
   rebuilt into a dict from a KIP-630 snapshot, and from a compacted log cleaned once with a
   dirty tail as large as its clean part; medians of three (``measure_offsets_load``).

Nothing here asserts. Run: ``.venv/bin/python -m bench.compaction [--quick]``.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

NAME = "compaction"
_STAMP = struct.Struct(">qq")
NOW_MS = int(time.time() * 1000)


def _options(quick: bool) -> dict:
    return dict(dirty_mb=40 if quick else 200, keys=20_000, repeats=2 if quick else 3, rounds=1 if quick else 3,
                rate=1000, churn_rate=4000 if quick else 8000, seconds=5.0 if quick else 15.0,
                offset_keys=20_000 if quick else 200_000)


# -- 1. throughput ---------------------------------------------------------------------------------
def measure_throughput(opts: dict, log) -> dict:
    from kraftd.protocol.records import build_batch
    from kraftd.storage import FileLog

    runs = []
    for r in range(opts["repeats"]):
        root = Path(tempfile.mkdtemp(prefix="kraftd-bench-clean-"))
        try:
            log_ = FileLog(root / "c-0", segment_bytes=16 << 20, compacted=True)
            rng = random.Random(r)
            value = bytes(rng.randrange(256) for _ in range(1024))
            written = 0
            while written < opts["dirty_mb"] * 1_000_000:
                batch = build_batch([(b"key-%06d" % rng.randrange(opts["keys"]), value, None, NOW_MS - 60_000)
                                     for _ in range(16)])
                log_.append_as_leader(bytearray(batch), 1, now_ms=NOW_MS)
                written += len(batch)
            log_.roll()
            log_.append_as_leader(bytearray(build_batch([(b"tail", b"x", None, NOW_MS)])), 1, now_ms=NOW_MS)
            log_.flush()
            gc.disable()  # (this process's own collections are not the loop's cost)
            t0 = time.perf_counter()
            range_ = log_.cleanable(max_offset=log_.log_end_offset, now_ms=NOW_MS, min_lag_ms=0)
            plan = log_.plan_cleaning(range_, now_ms=NOW_MS, delete_retention_ms=86_400_000,
                                      max_keys=1_000_000, io_bytes_per_second=None)
            planned = time.perf_counter()
            gc.enable()
            plan.run()
            ran = time.perf_counter()
            gc.disable()
            assert log_.commit_cleaning(plan)
            committed = time.perf_counter()
            gc.enable()
            run = dict(dirty_mb=range_.dirty_bytes / 1e6, written_mb=plan.stats.bytes_written / 1e6,
                       run_s=ran - planned, plan_ms=(planned - t0) * 1000, commit_ms=(committed - ran) * 1000,
                       mb_per_s=range_.dirty_bytes / 1e6 / (ran - planned), keys=plan.stats.keys)
            log(f"  throughput pass {r + 1}: {run['dirty_mb']:.0f} MB dirty -> {run['written_mb']:.1f} MB in "
                f"{run['run_s']:.2f} s ({run['mb_per_s']:.1f} MB/s); plan {run['plan_ms']:.1f} ms, commit "
                f"{run['commit_ms']:.1f} ms on the loop")
            runs.append(run)
            log_.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return dict(runs=runs, mb_per_s=statistics.median(r["mb_per_s"] for r in runs),
                commit_ms=statistics.median(r["commit_ms"] for r in runs),
                plan_ms=statistics.median(r["plan_ms"] for r in runs))


# -- 2. latency while the cleaner runs ----------------------------------------------------------------
def _percentile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def _latency_round(cleaner: bool, opts: dict, log) -> dict:
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from bench.common import scrape_metrics
    from tests.support.kraftd_process import KraftdProcess

    root = Path(tempfile.mkdtemp(prefix="kraftd-bench-compact-"))
    env = {"KRAFTD_LOG_CLEANER_BACKOFF_MS": "100", "KRAFTD_LOG_CLEANER_ENABLE": "true" if cleaner else "false"}
    if opts.get("io_limit"):
        env["KRAFTD_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND"] = str(opts["io_limit"])
    server = KraftdProcess(root / "data", env=env).start()
    stop = threading.Event()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        for f in admin.create_topics([
                NewTopic("churn", 1, 1, config={"cleanup.policy": "compact", "segment.bytes": str(4 << 20),
                                                "segment.ms": "1000",
                                                "min.cleanable.dirty.ratio": str(opts.get("ratio", 0.01))}),
                NewTopic("latency", 1, 1)]).values():
            f.result(30)

        def churn():
            producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5, "acks": "all"})
            rng = random.Random(7)
            value = bytes(rng.randrange(256) for _ in range(1024))
            start, n = time.monotonic(), 0
            while not stop.is_set():
                due = int((time.monotonic() - start) * opts["churn_rate"])
                while n < due:
                    try:
                        producer.produce("churn", value, key=b"key-%05d" % rng.randrange(50_000), partition=0)
                        n += 1
                    except BufferError:
                        break
                producer.poll(0.002)
            producer.flush(10)
        churner = threading.Thread(target=churn, daemon=True)
        churner.start()
        time.sleep(3.0)  # segments roll, passes begin

        consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "bench", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 5, "socket.nagle.disable": True})
        consumer.assign([TopicPartition("latency", 0, OFFSET_END)])
        producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 0,
                             "socket.nagle.disable": True})
        latencies: list[float] = []
        done = threading.Event()

        def read():
            while not done.is_set():
                msg = consumer.poll(0.05)
                now = time.perf_counter_ns()
                if msg is None or msg.error():
                    continue
                seq, sent = _STAMP.unpack_from(msg.value())
                if seq >= 0:
                    latencies.append((now - sent) / 1e6)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for i in range(200):  # warm-up (negative sequence numbers are not counted)
            producer.produce("latency", _STAMP.pack(-1, time.perf_counter_ns()) + b"x" * 84, partition=0)
            producer.poll(0.005)
        producer.flush(10)
        before = scrape_metrics("127.0.0.1", server.metrics_port)
        start, n = time.perf_counter(), 0
        total = int(opts["seconds"] * opts["rate"])
        while n < total:
            producer.produce("latency", _STAMP.pack(n, time.perf_counter_ns()) + b"x" * 84, partition=0)
            n += 1
            producer.poll(0)
            time.sleep(max(0.0, start + n / opts["rate"] - time.perf_counter()))
        producer.flush(10)
        deadline = time.monotonic() + 5
        while len(latencies) < total and time.monotonic() < deadline:
            time.sleep(0.01)
        after = scrape_metrics("127.0.0.1", server.metrics_port)
        done.set()
        reader.join(5)
        consumer.close()
        cleaned_mb = (after.get("kraftd_log_cleaner_bytes_read_total", 0)
                      - before.get("kraftd_log_cleaner_bytes_read_total", 0)) / 1e6
        passes = after.get("kraftd_log_cleaner_passes_total", 0) - before.get("kraftd_log_cleaner_passes_total", 0)
        out = dict(cleaner=cleaner, received=len(latencies), sent=total, p50_ms=_percentile(latencies, 50),
                   p99_ms=_percentile(latencies, 99), max_ms=max(latencies, default=None), passes=passes,
                   cleaned_mb=cleaned_mb, loop_worst_ms=after.get("kraftd_event_loop_lag_worst_ms"))
        log(f"  latency, cleaner {'on ' if cleaner else 'off'}: p50 {out['p50_ms']:.2f} ms, p99 {out['p99_ms']:.2f} ms, "
            f"max {out['max_ms']:.1f} ms ({out['received']}/{total}); {passes:.0f} passes read {cleaned_mb:.0f} MB; "
            f"the loop's worst stall {out['loop_worst_ms']} ms")
        return out
    finally:
        stop.set()
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


def measure_latency(opts: dict, log) -> dict:
    rounds = []
    for r in range(opts["rounds"]):
        for cleaner in ((True, False) if r % 2 == 0 else (False, True)):
            rounds.append(_latency_round(cleaner, opts, log))
    on = [x["p99_ms"] for x in rounds if x["cleaner"]]
    off = [x["p99_ms"] for x in rounds if not x["cleaner"]]
    return dict(rounds=rounds, p99_on_ms=statistics.median(on), p99_off_ms=statistics.median(off),
                p99_ratio=statistics.median(on) / statistics.median(off),
                p50_on_ms=statistics.median(x["p50_ms"] for x in rounds if x["cleaner"]),
                p50_off_ms=statistics.median(x["p50_ms"] for x in rounds if not x["cleaner"]),
                cleaned_mb_per_round=statistics.median(x["cleaned_mb"] for x in rounds if x["cleaner"]))


# -- 3. __consumer_offsets: a coordinator's load from a snapshot or from a compacted log -----------
def measure_offsets_load(opts: dict, log) -> dict:
    """What a new group coordinator reads to rebuild K committed offsets: a KIP-630 snapshot of
    them (kraftd's __consumer_offsets), or a compacted log holding them, cleaned (every live key
    once) with a dirty tail as large as the clean part (Kafka's default ratio, the most it waits
    for). Both decoded into a dict, in process; medians of three."""
    from kraftd.protocol.records import build_batch, decode_records, iter_batch_headers
    from kraftd.storage import FileLog
    from kraftd.storage.snapshots import SnapshotId, SnapshotReader, SnapshotWriter

    keys = opts["offset_keys"]
    rng = random.Random(11)
    items = [(b"group-%04d/topic-%03d/%05d" % (k % 1000, k % 97, k), b"\x00\x03" + rng.randbytes(28))
             for k in range(keys)]
    root = Path(tempfile.mkdtemp(prefix="kraftd-bench-offsets-"))
    try:
        (root / "s-0").mkdir()
        writer = SnapshotWriter(str(root / "s-0"), SnapshotId(keys, 1), last_contained_log_timestamp=NOW_MS)
        writer.append_many(items)
        snapshot = writer.freeze()
        log_ = FileLog(root / "c-0", segment_bytes=16 << 20, compacted=True)
        for rounds in range(2):  # every key twice: the first copies are what a pass removes
            for i in range(0, keys, 500):
                log_.append_as_leader(bytearray(build_batch([(k, v, None, NOW_MS - 60_000) for k, v in items[i:i + 500]])),
                                      1, now_ms=NOW_MS)
            if rounds == 0:
                log_.roll()
        log_.roll()
        log_.flush()
        range_ = log_.cleanable(max_offset=log_.log_end_offset, now_ms=NOW_MS, min_lag_ms=0)
        plan = log_.plan_cleaning(range_, now_ms=NOW_MS, delete_retention_ms=86_400_000, max_keys=10**7,
                                  io_bytes_per_second=None)
        plan.run()
        assert log_.commit_cleaning(plan)
        for i in range(0, keys, 500):  # the dirty tail: every key once more
            log_.append_as_leader(bytearray(build_batch([(k, v, None, NOW_MS) for k, v in items[i:i + 500]])), 1,
                                  now_ms=NOW_MS)
        log_.flush()

        def from_snapshot():
            return dict(SnapshotReader.open(snapshot).items())

        def from_log():
            state, offset = {}, log_.log_start_offset
            while offset < log_.log_end_offset:
                result = log_.read(offset, 8 << 20)
                data = result.to_bytes()
                for pos, h in iter_batch_headers(data):
                    for r in decode_records(data[pos:pos + h.size], h):
                        state[r.key] = r.value
                offset = result.next_offset
            return state

        out = {}
        for name, load in (("snapshot", from_snapshot), ("compacted_log", from_log)):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                state = load()
                times.append((time.perf_counter() - t0) * 1000)
            assert len(state) == keys
            out[name + "_ms"] = statistics.median(times)
        out["snapshot_mb"] = Path(snapshot).stat().st_size / 1e6
        out["log_mb"] = log_.size_in_bytes / 1e6
        out["keys"] = keys
        log(f"  offsets load, {keys} keys: snapshot {out['snapshot_ms']:.0f} ms ({out['snapshot_mb']:.1f} MB), "
            f"compacted log with its dirty tail {out['compacted_log_ms']:.0f} ms ({out['log_mb']:.1f} MB)")
        log_.close()
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(res: dict) -> str:
    t, lat = res["throughput"], res["latency"]
    lines = ["(y) log compaction"]
    if t is not None:
        lines.append(f"  cleaner throughput: {t['mb_per_s']:.1f} MB/s of dirty log (median of {len(t['runs'])}); "
                     f"on the loop: plan {t['plan_ms']:.1f} ms, commit {t['commit_ms']:.1f} ms")
    o = res.get("offsets_load")
    if o is not None:
        lines.append(f"  a coordinator's load of {o['keys']} committed offsets: from a snapshot {o['snapshot_ms']:.0f} ms "
                     f"({o['snapshot_mb']:.1f} MB), from a compacted log with a dirty tail as large as its clean part "
                     f"{o['compacted_log_ms']:.0f} ms ({o['log_mb']:.1f} MB)")
    if lat is None:
        return "\n".join(lines)
    return "\n".join(lines + [
        f"  produce->consume latency, cleaner on vs off (median of {len(lat['rounds']) // 2} rounds each): "
        f"p99 {lat['p99_on_ms']:.2f} vs {lat['p99_off_ms']:.2f} ms (x{lat['p99_ratio']:.2f}), "
        f"p50 {lat['p50_on_ms']:.2f} vs {lat['p50_off_ms']:.2f} ms; the cleaner read "
        f"{lat['cleaned_mb_per_round']:.0f} MB a round (min.cleanable.dirty.ratio {res['options'].get('ratio', 0.01)}, "
        f"io limit {res['options'].get('io_limit') or 'none'})"])


def measure(opts: dict, log) -> dict:
    throughput = None
    if not opts.get("skip_throughput"):
        log("compaction: cleaner throughput")
        throughput = measure_throughput(opts, log)
    log("compaction: a group coordinator's load, from a snapshot and from a compacted log")
    offsets = measure_offsets_load(opts, log)
    latency = None
    if not opts.get("only_offsets"):
        log("compaction: latency with and without the cleaner")
        latency = measure_latency(opts, log)
    return dict(name=NAME, options=opts, throughput=throughput, latency=latency, offsets_load=offsets)


def run(ctx) -> dict:
    return measure(_options(ctx.quick), ctx.log)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="40 MB, 5 s rounds, one round each")
    p.add_argument("--dirty-mb", type=int)
    p.add_argument("--rounds", type=int)
    p.add_argument("--churn-rate", type=int)
    p.add_argument("--seconds", type=float)
    p.add_argument("--io-limit", type=float, help="log_cleaner_io_max_bytes_per_second for the latency rounds")
    p.add_argument("--ratio", type=float, help="the churn topic's min.cleanable.dirty.ratio (default 0.01)")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--only-offsets", action="store_true", help="only part 3 (the offsets load)")
    args = p.parse_args(argv)
    opts = _options(args.quick)
    opts["skip_throughput"] = args.skip_throughput or args.only_offsets
    opts["only_offsets"] = args.only_offsets
    for key in ("dirty_mb", "rounds", "churn_rate", "seconds", "io_limit", "ratio"):
        if getattr(args, key) is not None:
            opts[key] = getattr(args, key)
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    res = measure(opts, log)
    print(report(res))
    out = Path(__file__).resolve().parent / "out" / f"compaction-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
