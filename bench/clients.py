"""(b) Real clients: confluent-kafka (Python, librdkafka) and kcat (C, librdkafka) consuming
and producing the same 1 KiB records, for kraftd and Tansu.

* consume: from offset 0 of the shared dataset (partition 0 assigned directly, no consumer
  group), until the end or the per-pass time box; MB/s counts record *values*.
* produce: acks=1 into a fresh single-partition topic, the same 1 KiB value, until
  ``data_mib`` MiB or the time box; MB/s counts acked record values.  The topic is deleted
  afterwards (Tansu keeps everything in memory).

Every pass runs in a child process (``python -m bench.clients WORKER ...`` or kcat) with a hard
timeout, so a hung client cannot hang the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench import wire
from bench.common import Context, fmt, fmt_ratio, median, ratio, rotated, table, verdict
from bench.dataset import ensure_dataset, high_watermark
from bench.servers import BUILD_DIR, HOST, REPO

NAME = "clients"
TITLE = "(b) real clients: confluent-kafka and kcat, 1 KiB records (MB/s of record values)"
TARGETS = {"consume": 3.0, "produce": 1.0}
CLIENTS = ("confluent", "kcat")


# --------------------------------------------------------------------------------------------
# child-process workers (confluent-kafka)


def _worker_confluent_consume(bootstrap: str, topic: str, records: int, value_size: int,
                              time_box: float) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"kraftd-bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        "client.id": "kraftd-bench",
    })
    n = 0
    nbytes = 0
    errors = 0
    try:
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + time_box
        consume = c.consume
        for _ in range(10_000_000):
            if n >= records or time.monotonic() > deadline:
                break
            for m in consume(num_messages=10000, timeout=0.5):
                if m.error():
                    errors += 1
                    continue
                n += 1
                nbytes += len(m.value())
        secs = time.perf_counter() - t0
    finally:
        c.close()
    return dict(records=n, bytes=nbytes, seconds=secs, errors=errors,
                complete=n >= records)


def _worker_confluent_produce(bootstrap: str, topic: str, records: int, value_size: int,
                              time_box: float) -> dict:
    from confluent_kafka import Producer

    failed = [0]

    def on_err(err, _msg):  # delivery.report.only.error: called for failures only
        if err is not None:
            failed[0] += 1

    p = Producer({
        "bootstrap.servers": bootstrap,
        "acks": 1,
        "linger.ms": 5,
        "enable.idempotence": False,
        "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True,
        "client.id": "kraftd-bench",
    })
    value = wire.record_value(value_size)
    n = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + time_box
    produce = p.produce
    for _ in range(records * 2):
        if n >= records or time.monotonic() > deadline:
            break
        try:
            produce(topic, value, partition=0, on_delivery=on_err)
            n += 1
        except BufferError:
            p.poll(0.01)
            continue
        if n % 5000 == 0:
            p.poll(0)
    left = p.flush(60)
    secs = time.perf_counter() - t0
    acked = n - failed[0] - left
    return dict(records=acked, bytes=acked * value_size, seconds=secs, errors=failed[0] + left,
                complete=acked >= records)


WORKERS = {
    "confluent-consume": _worker_confluent_consume,
    "confluent-produce": _worker_confluent_produce,
}


def worker_main(argv: list[str]) -> int:
    kind, bootstrap, topic, records, value_size, time_box = argv
    res = WORKERS[kind](bootstrap, topic, int(records), int(value_size), float(time_box))
    print(json.dumps(res), flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# running passes


def _run_child(argv: list[str], timeout: float, stdout=subprocess.PIPE,
               env: dict[str, str] | None = None) -> tuple[int, str, str]:
    p = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True, text=True, cwd=str(REPO), env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=10)
        return -9, out or "", (err or "") + f"\n[killed after {timeout:.0f}s]"
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    return p.returncode, out or "", err or ""


def confluent_pass(kind: str, bootstrap: str, topic: str, records: int, value_size: int,
                   time_box: float) -> dict:
    argv = [sys.executable, "-m", "bench.clients", kind, bootstrap, topic, str(records),
            str(value_size), str(time_box)]
    rc, out, err = _run_child(argv, time_box + 90)
    if rc != 0:
        raise RuntimeError(f"{kind} exited {rc}: {err.strip()[-400:]}")
    return json.loads(out.strip().splitlines()[-1])


def kcat_consume_pass(bootstrap: str, topic: str, records: int, value_size: int,
                      time_box: float, start_offset: int = 0) -> dict:
    """kcat -C from the beginning; prints only offsets, we keep the last one.  Killed at the
    time box (then the count is what it printed so far)."""
    argv = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
            "-q", "-c", str(records), "-f", "%o\n", "-X", "client.id=kraftd-bench"]
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True, env=kcat_env())
    last = b""
    tail = b""
    timed_out = False
    try:
        deadline = time.monotonic() + time_box
        fd = p.stdout.fileno()
        os.set_blocking(fd, False)
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        for _ in range(100_000_000):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if not sel.select(min(remaining, 0.5)):
                if p.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data = tail + chunk
            cut = data.rfind(b"\n")
            if cut >= 0:
                prev = data.rfind(b"\n", 0, cut)
                last = data[prev + 1:cut]
                tail = data[cut + 1:]
            else:
                tail = data
        secs = time.perf_counter() - t0
        sel.close()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    rc = p.returncode
    p.stdout.close()
    p.stderr.close()
    n = int(last) + 1 - start_offset if last.strip().isdigit() else 0
    if n == 0:
        raise RuntimeError(f"kcat consumed nothing (rc={p.returncode}): {err.strip()[-400:]}")
    res = dict(records=n, bytes=n * value_size, seconds=secs, errors=0,
               complete=n >= records and not timed_out, rc=rc)
    if rc not in (0, -9) and err.strip():
        res["stderr"] = err.strip()[-400:]
    return res


def kcat_produce_pass(server_port: int, bootstrap: str, topic: str, records: int,
                      value_size: int, time_box: float, input_file: Path) -> dict:
    """kcat -P -l FILE (one value per line), acks=1.  Killed at the time box; the count is
    the partition's high watermark (a fresh topic)."""
    argv = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-p", "0", "-c", str(records),
            "-X", "acks=1", "-X", "linger.ms=5", "-X", "enable.idempotence=false",
            "-X", "client.id=kraftd-bench", "-l", str(input_file)]
    t0 = time.perf_counter()
    rc, _, err = _run_child(argv, time_box, stdout=subprocess.DEVNULL, env=kcat_env())
    secs = time.perf_counter() - t0
    with wire.Conn(HOST, server_port) as c:
        tid = c.topic_id(topic) if c.version(wire.FETCH) >= 13 else None
    # the high watermark may trail the acks=1 acknowledgements (kraftd: HW = flushed offset),
    # so wait for it to settle before counting
    n = high_watermark(server_port, topic, tid)
    settle_deadline = time.monotonic() + 15
    for _ in range(300):
        if n >= records or time.monotonic() > settle_deadline:
            break
        time.sleep(0.05)
        n2 = high_watermark(server_port, topic, tid)
        if n2 == n and rc != 0:
            break
        n = n2
    if n <= 0:
        raise RuntimeError(f"kcat produced nothing (rc={rc}): {err.strip()[-400:]}")
    res = dict(records=n, bytes=n * value_size, seconds=secs, errors=0,
               complete=n >= records and rc == 0, rc=rc)
    if rc != 0:
        res["stderr"] = err.strip()[-400:]
    return res


def kcat_env() -> dict[str, str]:
    """kcat links the system librdkafka (2.0.2 on Debian 12), whose ApiVersions v3 parser
    fails on Tansu's response ("Read underflow", it chokes on the tagged fields Tansu always
    emits).  Unless BENCH_KCAT_LIBRDKAFKA=system, run kcat against the librdkafka bundled in
    the confluent-kafka wheel (same ABI, so.1), so both clients share one librdkafka."""
    env = dict(os.environ)
    if os.environ.get("BENCH_KCAT_LIBRDKAFKA", "bundled") == "system":
        return env
    try:
        import confluent_kafka
    except ImportError:
        return env
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    cands = sorted(libs.glob("librdkafka*.so*")) if libs.is_dir() else []
    if not cands:
        return env
    d = BUILD_DIR / "rdkafka"
    d.mkdir(parents=True, exist_ok=True)
    link = d / "librdkafka.so.1"
    if not link.exists() or link.resolve() != cands[0].resolve():
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(cands[0].resolve())
    env["LD_LIBRARY_PATH"] = str(d) + (":" + env["LD_LIBRARY_PATH"]
                                       if env.get("LD_LIBRARY_PATH") else "")
    return env


def kcat_version() -> str:
    try:
        r = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10,
                           env=kcat_env())
        for line in (r.stdout + r.stderr).splitlines():
            if line.startswith("Version"):
                return line.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def _values_file(path: Path, records: int, value_size: int) -> None:
    line = wire.record_value(value_size) + b"\n"
    block = line * 1024
    with open(path, "wb") as f:
        for _ in range(records // 1024):
            f.write(block)
        f.write(line * (records % 1024))


# --------------------------------------------------------------------------------------------


def run(ctx: Context) -> dict:
    systems = ctx.kafka_servers()
    time_box = ctx.options.get("client_time_box", 20.0)
    errors: dict[str, str] = {}
    runs: dict[str, list[dict]] = {}
    datasets = {}
    for name, srv in systems:
        try:
            datasets[name] = ensure_dataset(srv, mib=ctx.data_mib, value_size=ctx.value_size,
                                            batch_records=ctx.batch_records, log=ctx.log)
        except Exception as e:
            errors[name] = f"dataset: {type(e).__name__}: {e}"
            ctx.log(f"  [{name}] dataset failed: {errors[name]}")
    live = [(n, s) for n, s in systems if n in datasets]
    if not live:
        return dict(name=NAME, error="no Kafka system available", errors=errors)
    records = ctx.data_mib * (1 << 20) // ctx.value_size
    tmp = Path(tempfile.mkdtemp(prefix="kraftd-bench-kcat-"))
    values = tmp / "values.txt"
    try:
        _values_file(values, records, ctx.value_size)
        # consume passes first (they only read the shared dataset), then produce passes
        for op in ("consume", "produce"):
            for rep in range(ctx.repeats):
                for client in CLIENTS:
                    for name, srv in rotated(live, rep):
                        key = f"{op}/{client}/{name}"
                        ds = datasets[name]
                        try:
                            if op == "consume":
                                if client == "confluent":
                                    res = confluent_pass("confluent-consume", srv.bootstrap,
                                                         ds.topic, ds.records, ds.value_size,
                                                         time_box)
                                else:
                                    res = kcat_consume_pass(srv.bootstrap, ds.topic, ds.records,
                                                            ds.value_size, time_box,
                                                            ds.start_offset)
                            else:
                                topic = f"bench-produce-{client}-{rep}"
                                with wire.Conn(HOST, srv.port) as c:
                                    c.create_topic(topic)
                                try:
                                    if client == "confluent":
                                        res = confluent_pass("confluent-produce", srv.bootstrap,
                                                             topic, records, ctx.value_size,
                                                             time_box)
                                    else:
                                        res = kcat_produce_pass(srv.port, srv.bootstrap, topic,
                                                                records, ctx.value_size,
                                                                time_box, values)
                                finally:
                                    with wire.Conn(HOST, srv.port) as c:
                                        c.delete_topic(topic)
                        except Exception as e:
                            errors[key] = f"{type(e).__name__}: {e}"
                            ctx.log(f"  {key} failed: {errors[key]}")
                            continue
                        res["mb_s"] = res["bytes"] / res["seconds"] / 1e6
                        runs.setdefault(key, []).append(res)
                        ctx.log(f"  {op:7s} {client:9s} {name:7s} rep {rep + 1}/{ctx.repeats} "
                                f"{res['mb_s']:8.1f} MB/s ({res['records']} records in "
                                f"{res['seconds']:.1f}s"
                                f"{'' if res['complete'] else ', incomplete: time box or error'})"
                                + (f"\n    stderr: {res['stderr']}" if res.get("stderr") else ""))
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    med = {k: median([r["mb_s"] for r in v]) for k, v in runs.items()}
    ratios = {}
    verdicts = {}
    for op in ("consume", "produce"):
        for client in CLIENTS:
            r = ratio(med.get(f"{op}/{client}/kraftd"), med.get(f"{op}/{client}/tansu"))
            ratios[f"{op}/{client}"] = r
            verdicts[f"{op} {client} kraftd/tansu >= {TARGETS[op]}"] = verdict(r, TARGETS[op])
    import confluent_kafka
    return dict(name=NAME, medians_mb_s=med, runs=runs, ratios=ratios, verdict=verdicts,
                targets=TARGETS, errors=errors, time_box_s=time_box,
                versions=dict(kcat=kcat_version(),
                              confluent_kafka=confluent_kafka.version()[0],
                              librdkafka=confluent_kafka.libversion()[0]))


def report(res: dict) -> str:
    if res.get("error"):
        return f"{TITLE}\n  skipped: {res['error']}"
    med = res["medians_mb_s"]
    rows = []
    for op in ("consume", "produce"):
        for client in CLIENTS:
            k, t = med.get(f"{op}/{client}/kraftd"), med.get(f"{op}/{client}/tansu")
            r = res["ratios"].get(f"{op}/{client}")
            boxed = any(not x["complete"] for s in ("kraftd", "tansu")
                        for x in res["runs"].get(f"{op}/{client}/{s}", []))
            rows.append([op, client, fmt(k), fmt(t), fmt_ratio(r), f">= {TARGETS[op]:.0f}x",
                         verdict(r, TARGETS[op]), "yes" if boxed else ""])
    out = [TITLE, table(["op", "client", "kraftd MB/s", "tansu MB/s", "kraftd/tansu",
                         "target", "verdict", "incomplete"], rows)]
    out.append(f"  (medians; a pass stops at the dataset size or after {res['time_box_s']:.0f}s; "
               f"{res.get('versions', {}).get('kcat', '')})")
    for n, e in res.get("errors", {}).items():
        out.append(f"  {n}: ERROR {e}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
