"""(e) Snapshots (KIP-630): generation and load time for 1,000,000 keys, FetchSnapshot transfer.

* **Generation**: 1M distinct keys (16-byte keys, 40-byte values) are produced to a
  ``cleanup.policy=snapshot`` topic on a dedicated kraftd (``KRAFTD_FSYNC_POLICY=never``, data
  dir on the disk, automatic snapshots disabled with a huge
  ``metadata.log.max.record.bytes.between.snapshots`` so only the requested one is taken), as
  pre-built 1,000-record batches in pipelined Produce requests.  Then ``POST
  /admin/snapshot?topic=T&partition=0``; wall time = until the new ``.checkpoint`` file appears
  in the partition directory (polled on the file system, so polling costs the server nothing);
  the server's own number is ``kraftd_gen_snapshot_latency_ms`` (_sum/_count delta).
* **Load**: the server is restarted (SIGTERM, same data dir); the server's number is
  ``kraftd_load_snapshot_latency_ms_sum`` (snapshot read + log tail applied), plus the wall time
  of the restart (process start to ApiVersions answered) next to the start of an empty kraftd.
  Generation + restart are repeated (a restart appends a LeaderChange batch, so the next
  requested snapshot is a new one with the same 1M keys).
* **Transfer**: a raw FetchSnapshot client (pre-encoded request, only correlation id and
  position patched, hand-rolled response parsing, 2 requests pipelined like the raw consume
  bench) downloads the snapshot in 1 MiB chunks (MaxBytes 1 MiB) counting record bytes; the
  ceiling is the raw consume bench's C copy server answering the same request stream with
  kraftd's real first 1 MiB chunk response (only the correlation id patched).  Passes are
  interleaved, each downloads the whole snapshot repeatedly for a time box; medians reported.
"""

from __future__ import annotations

import collections
import os
import shutil
import socket
import struct
import tempfile
import time
import urllib.request
from pathlib import Path

from bench import wire
from bench.common import Context, fmt, fmt_ratio, median, ratio, rotated, scrape_metrics, table, verdict
from bench.dataset import high_watermark
from bench.servers import HOST, CeilingServer, KraftdServer

NAME = "snapshots"
TITLE = "(e) snapshots (KIP-630): 1,000,000 keys; generation, load, FetchSnapshot transfer"
TOPIC = "bench-snap"
KEYS = 1_000_000
VALUE_SIZE = 40
BATCH_RECORDS = 1000
CHUNK = 1 << 20
TARGET_VS_CEILING = 0.6
NO_AUTO_SNAPSHOT = str(1 << 60)

_i32 = struct.Struct(">i")
_i16 = struct.Struct(">h")
_i64 = struct.Struct(">q")
_SENTINEL = 0x5EEDC0DE5EEDC0DE


class SnapshotKraftd(KraftdServer):
    """kraftd with fsync "never" on a data dir that survives restarts (owned by the bench)."""

    name = "kraftd-snapshots"

    def __init__(self, data_dir: str, extra_args: list[str] | None = None) -> None:
        super().__init__(extra_args)
        self.data_dir = data_dir

    def env(self) -> dict[str, str]:
        e = super().env()
        e["KRAFTD_FSYNC_POLICY"] = "never"
        return e

    def command(self, port: int) -> list[str]:
        argv = super().command(port)
        argv[argv.index("--data-dir") + 1] = self.data_dir
        return argv


def metrics(port: int) -> dict[str, float]:
    return scrape_metrics(HOST, port)


def metric(values: dict[str, float], name: str, topic: str | None = TOPIC) -> float:
    """Sum of the samples of ``name`` (labels ignored, or only those with topic=``topic``)."""
    total = 0.0
    for k, v in values.items():
        base, _, labels = k.partition("{")
        if base == name and (topic is None or f'topic="{topic}"' in labels):
            total += v
    return total


def post(port: int, path: str) -> tuple[int, str]:
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


# --------------------------------------------------------------------------------------------
# data


def build_batches(keys: int, value_size: int, per_batch: int) -> list[bytes]:
    """Key ``k%015d`` (16 B) -> a 40-byte value, in magic-2 batches built with kafka-python."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    value = wire.record_value(value_size)
    ts = int(time.time() * 1000)
    out = []
    for start in range(0, keys, per_batch):
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                      batch_size=1 << 30)
        for i in range(start, min(keys, start + per_batch)):
            if b.append(i - start, timestamp=ts, key=b"k%015d" % i, value=value,
                        headers=[]) is None:
                raise wire.WireError("batch builder refused a record")
        out.append(bytes(b.build()))
    return out


def create_snapshot_topic(c: wire.Conn, name: str) -> None:
    body = dict(topics=[dict(name=name, num_partitions=1, replication_factor=1, assignments=[],
                             configs=[dict(name="cleanup.policy", value="snapshot"),
                                      dict(name="metadata.log.max.record.bytes.between.snapshots",
                                           value=NO_AUTO_SNAPSHOT)])],
                timeout=30000, timeout_ms=30000, validate_only=False)
    resp = c.request(wire.CREATE_TOPICS, body)
    err = int(resp.topics[0].error_code)
    if err:
        raise wire.WireError(f"CreateTopics {name}: error {err} {resp.topics[0].error_message}")
    deadline = time.monotonic() + 30
    for _ in range(600):
        t = c.topic_metadata(name)
        if t is not None and int(t.error_code) == 0 and t.partitions \
                and int(t.partitions[0].leader_id) >= 0:
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    raise wire.WireError(f"topic {name} not ready")


def produce_all(port: int, topic: str, batches: list[bytes], depth: int = 16,
                timeout_s: float = 300.0) -> tuple[float, int]:
    """Pipelined Produce (acks=1), one batch per request; returns (seconds, end offset)."""
    with wire.Conn(HOST, port, timeout=120) as c:
        v = c.version(wire.PRODUCE)
        sock = c.sock
        # one encoding, the batch bytes spliced in (all batches have the same length)
        frame0 = wire.encode_request(wire.PRODUCE, v, 0, wire.produce_body(topic, batches[0]))
        pos = frame0.index(batches[0])
        head, tail = bytearray(frame0[:pos]), frame0[pos + len(batches[0]):]
        same = all(len(b) == len(batches[0]) for b in batches)
        inflight: collections.deque[int] = collections.deque()
        sent = done = 0
        end = -1
        nrec = [wire.batch_info(b)[2] + 1 for b in batches]
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        while done < len(batches):
            while sent < len(batches) and len(inflight) < depth:
                corr = sent + 1
                if same:
                    struct.pack_into(">i", head, 8, corr)
                    sock.sendall(bytes(head) + batches[sent] + tail)
                else:
                    sock.sendall(wire.encode_request(wire.PRODUCE, v, corr, wire.produce_body(
                        topic, batches[sent])))
                inflight.append(sent)
                sent += 1
            rcorr, resp = wire.decode_response(wire.PRODUCE, v, wire.read_frame(sock))
            i = inflight.popleft()
            if rcorr != i + 1:
                raise wire.WireError(f"produce: correlation {rcorr} != {i + 1}")
            p = resp.responses[0].partition_responses[0]
            if int(p.error_code) != 0:
                raise wire.WireError(f"produce error {int(p.error_code)} at batch {i}")
            end = max(end, int(p.base_offset) + nrec[i])
            done += 1
            if time.monotonic() > deadline:
                raise wire.WireError(f"produce did not finish in {timeout_s}s")
        return time.perf_counter() - t0, end


# --------------------------------------------------------------------------------------------
# generation and load


def _checkpoints(part_dir: Path) -> set[str]:
    try:
        return {n for n in os.listdir(part_dir) if n.endswith(".checkpoint")}
    except OSError:
        return set()


def generate(srv: SnapshotKraftd, part_dir: Path, timeout_s: float = 180.0) -> dict:
    before = metrics(srv.metrics_port)
    files0 = _checkpoints(part_dir)
    t0 = time.perf_counter()
    status, body = post(srv.metrics_port, f"/admin/snapshot?topic={TOPIC}&partition=0")
    if status != 202:
        raise wire.WireError(f"POST /admin/snapshot: {status} {body.strip()}")
    deadline = time.monotonic() + timeout_s
    new: set[str] = set()
    for _ in range(int(timeout_s / 0.002) + 1):
        new = _checkpoints(part_dir) - files0
        if new or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    wall = time.perf_counter() - t0
    if not new:
        raise wire.WireError(f"no new snapshot after {timeout_s}s")
    # the server-side histogram is observed right after the file is frozen
    after = before
    for _ in range(500):
        after = metrics(srv.metrics_port)
        if metric(after, "kraftd_gen_snapshot_latency_ms_count") > \
                metric(before, "kraftd_gen_snapshot_latency_ms_count"):
            break
        time.sleep(0.02)
    dcount = metric(after, "kraftd_gen_snapshot_latency_ms_count") - \
        metric(before, "kraftd_gen_snapshot_latency_ms_count")
    dsum = metric(after, "kraftd_gen_snapshot_latency_ms_sum") - \
        metric(before, "kraftd_gen_snapshot_latency_ms_sum")
    name = sorted(new)[-1]
    return dict(wall_ms=wall * 1e3, server_ms=dsum / dcount if dcount else None, file=name,
                size=(part_dir / name).stat().st_size,
                end_offset=metric(after, "kraftd_snapshot_end_offset"))


def restart(srv: SnapshotKraftd, timeout: float) -> dict:
    t0 = time.perf_counter()
    srv.stop()
    t1 = time.perf_counter()
    srv.start(timeout=timeout)
    wall = time.perf_counter() - t1
    m = metrics(srv.metrics_port)
    cnt = metric(m, "kraftd_load_snapshot_latency_ms_count")
    return dict(stop_ms=(t1 - t0) * 1e3, wall_ms=wall * 1e3,
                server_ms=metric(m, "kraftd_load_snapshot_latency_ms_sum") / cnt if cnt else None)


# --------------------------------------------------------------------------------------------
# FetchSnapshot transfer


class SnapshotTemplate:
    """A pre-encoded FetchSnapshot request (kio); correlation id and position patched."""

    def __init__(self, version: int, topic: str, end_offset: int, epoch: int,
                 max_bytes: int = CHUNK):
        frame = wire.encode_request(wire.FETCH_SNAPSHOT, version, 0x7EADBEEF, dict(
            cluster_id=None, replica_id=-1, max_bytes=max_bytes, topics=[dict(
                name=topic, partitions=[dict(partition=0, current_leader_epoch=-1,
                                             snapshot_id=dict(end_offset=end_offset, epoch=epoch),
                                             position=_SENTINEL)])]))
        self.frame = bytearray(frame)
        self.pos_at = frame.index(_i64.pack(_SENTINEL))
        assert _i32.unpack_from(frame, 8)[0] == 0x7EADBEEF

    def make(self, corr: int, position: int) -> bytes:
        _i32.pack_into(self.frame, 8, corr)
        _i64.pack_into(self.frame, self.pos_at, position)
        return bytes(self.frame)


def parse_fetch_snapshot(buf: memoryview | bytes) -> tuple[int, int, int, int, int]:
    """(correlation id, error, size, position, record bytes) of a one-partition FetchSnapshot
    response (flexible versions: response header v1)."""
    (corr,) = _i32.unpack_from(buf, 0)
    pos = wire._skip_tagged(buf, 4)
    pos += 4  # throttle
    (err,) = _i16.unpack_from(buf, pos)
    pos += 2
    if err:
        return corr, err, -1, -1, 0
    ntopics, pos = wire._uvarint(buf, pos)
    if ntopics - 1 < 1:
        return corr, -1, -1, -1, 0
    n, pos = wire._uvarint(buf, pos)
    pos += n - 1  # name
    nparts, pos = wire._uvarint(buf, pos)
    if nparts - 1 < 1:
        return corr, -1, -1, -1, 0
    pos += 4  # index
    (err,) = _i16.unpack_from(buf, pos)
    pos += 2 + 12  # error, snapshot id (end offset, epoch)
    pos = wire._skip_tagged(buf, pos)  # the SnapshotId struct's tagged fields
    size, position = struct.unpack_from(">qq", buf, pos)
    pos += 16
    n, pos = wire._uvarint(buf, pos)
    nbytes = n - 1 if n > 0 else 0
    if pos + nbytes > len(buf):
        raise wire.WireError("records beyond the frame")
    return corr, err, size, position, nbytes


def download(port: int, template: SnapshotTemplate, *, depth: int = 2, min_seconds: float = 1.0,
             check_position: bool = True, max_rounds: int = 1000,
             timeout_s: float = 120.0) -> dict:
    """Download the whole snapshot from position 0, again and again until ``min_seconds`` have
    passed (whole downloads only); returns bytes and seconds."""
    sock = socket.create_connection((HOST, port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frames = wire.FrameReader(sock, CHUNK + (64 << 10))
    send, make = sock.sendall, template.make
    total = wire_bytes = requests = rounds = 0
    size = -1
    corr = 0
    deadline = time.monotonic() + timeout_s
    t0 = time.perf_counter()
    try:
        for rounds in range(1, max_rounds + 1):
            inflight: collections.deque[tuple[int, int]] = collections.deque()
            next_pos = 0
            got_to = 0
            # the first request of a download learns the size; then `depth` in flight
            while True:
                limit = depth if size >= 0 else 1
                while len(inflight) < limit and (size < 0 or next_pos < size):
                    corr += 1
                    send(make(corr, next_pos))
                    inflight.append((corr, next_pos))
                    next_pos += CHUNK
                if not inflight:
                    break
                frame = frames.read()
                wire_bytes += len(frame) + 4
                requests += 1
                rcorr, err, rsize, rpos, nbytes = parse_fetch_snapshot(frame)
                ecorr, epos = inflight.popleft()
                if rcorr != ecorr:
                    raise wire.WireError(f"correlation {rcorr} != {ecorr}")
                if err:
                    raise wire.WireError(f"FetchSnapshot error {err} at position {epos}")
                if check_position and rpos != epos:
                    raise wire.WireError(f"position {rpos} != {epos}")
                if nbytes <= 0:
                    raise wire.WireError(f"no bytes at position {epos} of {rsize}")
                size = rsize
                total += nbytes
                got_to = epos + nbytes
                if time.monotonic() > deadline:
                    raise wire.WireError("FetchSnapshot download timed out")
            if got_to < size and check_position:
                raise wire.WireError(f"download ended at {got_to} of {size}")
            if time.perf_counter() - t0 >= min_seconds:
                break
        secs = time.perf_counter() - t0
    finally:
        sock.close()
    return dict(bytes=total, wire_bytes=wire_bytes, seconds=secs, requests=requests,
                downloads=rounds, snapshot_size=size, mb_s=total / secs / 1e6)


def first_chunk_frame(port: int, template: SnapshotTemplate) -> bytes:
    with socket.create_connection((HOST, port), timeout=60) as s:
        s.sendall(template.make(1, 0))
        body = wire.read_frame(s)
    return _i32.pack(len(body)) + body


def snapshot_id_via_fetch(port: int) -> tuple[int, int]:
    """What a follower does: Fetch from offset 0, below the log start -> SnapshotId."""
    from kraftd.client import WireClient
    from kraftd.protocol import messages as m

    c = WireClient(f"{HOST}:{port}", client_id="kraftd-bench-snapshots")
    try:
        req = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=CHUNK,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[
                m.FetchRequest.FetchTopic(topic=TOPIC, partitions=[m.FetchRequest.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=CHUNK)])])
        resp = c.request(wire.FETCH, 12, req)
        p = resp.responses[0].partitions[0]
        if p.snapshot_id.end_offset < 0:
            raise wire.WireError(f"Fetch at 0 named no snapshot (error {p.error_code}, "
                                 f"log start {p.log_start_offset})")
        return p.snapshot_id.end_offset, p.snapshot_id.epoch
    finally:
        c.close()


# --------------------------------------------------------------------------------------------


def run(ctx: Context) -> dict:
    if "kraftd" not in ctx.systems:
        return dict(name=NAME, error="kraftd not among the systems")
    if "kraftd" in ctx.skipped:
        return dict(name=NAME, error=f"kraftd skipped: {ctx.skipped['kraftd'].splitlines()[0]}")
    keys = ctx.options.get("snapshot_keys") or KEYS
    repeats = ctx.repeats
    timeout = ctx.options.get("start_timeout", 30.0)
    res: dict = dict(name=NAME, keys=keys, value_size=VALUE_SIZE, errors={}, gen=[], load=[])
    data_dir = tempfile.mkdtemp(prefix="kraftd-bench-snapshots-")
    srv = SnapshotKraftd(data_dir, ctx.options.get("kraftd_args"))
    ceiling = None
    try:
        t = time.perf_counter()
        srv.start(timeout=timeout)
        res["empty_start_ms"] = (time.perf_counter() - t) * 1e3
        with wire.Conn(HOST, srv.port) as c:
            create_snapshot_topic(c, TOPIC)
            fs_version = c.version(wire.FETCH_SNAPSHOT)
        part_dir = Path(data_dir) / f"{TOPIC}-0"
        t = time.perf_counter()
        batches = build_batches(keys, VALUE_SIZE, BATCH_RECORDS)
        ctx.log(f"  built {len(batches)} batches of {BATCH_RECORDS} records "
                f"({sum(map(len, batches)) / 1e6:.1f} MB) in {time.perf_counter() - t:.1f}s")
        secs, end = produce_all(srv.port, TOPIC, batches)
        res["produce_s"] = secs
        res["log_bytes"] = sum(map(len, batches))
        del batches
        hw = -1
        deadline = time.monotonic() + 60
        for _ in range(1200):
            hw = high_watermark(srv.port, TOPIC, None, 12)
            if hw >= end or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        ctx.log(f"  produced {keys} keys in {secs:.1f}s ({res['log_bytes'] / secs / 1e6:.0f} MB/s "
                f"incl. the state machine), high watermark {hw}")
        os.sync()  # page-cache writeback of the log must not land in a measurement
        for rep in range(repeats):
            g = generate(srv, part_dir)
            res["gen"].append(g)
            ctx.log(f"  gen {rep + 1}/{repeats}: {g['wall_ms']:.0f} ms wall, server "
                    f"{fmt(g['server_ms'], 0)} ms, {g['file']} {g['size'] / 1e6:.1f} MB")
            os.sync()
            r = restart(srv, timeout)
            res["load"].append(r)
            ctx.log(f"  load {rep + 1}/{repeats}: server {fmt(r['server_ms'], 0)} ms, restart "
                    f"{r['wall_ms']:.0f} ms wall (stop {r['stop_ms']:.0f} ms)")
        # transfer
        end_offset, epoch = snapshot_id_via_fetch(srv.port)
        tpl = SnapshotTemplate(fs_version, TOPIC, end_offset, epoch)
        ports = {"kraftd": srv.port}
        if "ceiling" in ctx.systems:
            frame = first_chunk_frame(srv.port, tpl)
            ceiling = CeilingServer(frame, 0, 1, 0, 1, 1)
            ceiling.start(timeout=timeout)
            ports["ceiling"] = ceiling.port
        min_s = 0.5 if ctx.quick else 1.5
        runs: dict[str, list[dict]] = {n: [] for n in ports}
        for n in ports:  # warm-up (page cache, connections)
            download(ports[n], tpl, min_seconds=0.2, check_position=(n == "kraftd"))
        treps = max(ctx.options.get("raw_repeats") or 5, 3 if ctx.quick else 7)
        for rep in range(treps):
            for n in rotated(list(ports), rep):
                d = download(ports[n], tpl, min_seconds=min_s, check_position=(n == "kraftd"))
                runs[n].append(d)
                ctx.log(f"  FetchSnapshot rep {rep + 1}/{treps} {n:8s} {d['mb_s']:8.1f} MB/s "
                        f"({d['downloads']} downloads of {d['snapshot_size'] / 1e6:.1f} MB, "
                        f"{d['requests']} requests in {d['seconds']:.2f}s)")
        res["transfer"] = dict(runs=runs, fetch_snapshot_version=fs_version,
                               snapshot_id=[end_offset, epoch],
                               medians_mb_s={n: median([d["mb_s"] for d in rs])
                                             for n, rs in runs.items()})
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        res["errors"]["snapshots"] = f"{type(e).__name__}: {e}"
        if srv.alive() is False and srv.log_path:
            res["errors"]["log_tail"] = srv.log_tail()
    finally:
        if ceiling is not None:
            ceiling.stop()
        srv.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    med = res.get("transfer", {}).get("medians_mb_s", {})
    res["ratio"] = ratio(med.get("kraftd"), med.get("ceiling"))
    truns = res.get("transfer", {}).get("runs", {})
    # info: the same repeat's kraftd pass over its ceiling pass (adjacent in time)
    res["paired_ratio"] = median([ratio(k["mb_s"], c["mb_s"]) for k, c in zip(
        truns.get("kraftd", []), truns.get("ceiling", []))])
    res["gen_ms"] = median([g["server_ms"] for g in res["gen"]])
    res["gen_wall_ms"] = median([g["wall_ms"] for g in res["gen"]])
    res["load_ms"] = median([r["server_ms"] for r in res["load"]])
    res["restart_wall_ms"] = median([r["wall_ms"] for r in res["load"]])
    res["target"] = {"kraftd/ceiling": TARGET_VS_CEILING}
    res["verdict"] = {"FetchSnapshot kraftd/ceiling >= 0.6": verdict(res["ratio"],
                                                                     TARGET_VS_CEILING)}
    return res


def report(res: dict) -> str:
    if res.get("error"):
        return f"{TITLE}\n  skipped: {res['error']}"
    out = [TITLE]
    g, ld = res.get("gen", []), res.get("load", [])
    if g:
        def row(label, vals, digits=0):
            vals = [v for v in vals if v is not None]
            return [label, fmt(median(vals), digits), fmt(min(vals) if vals else None, digits),
                    fmt(max(vals) if vals else None, digits), str(len(vals))]
        rows = [row("generation, server (gen_snapshot_latency_ms)", [x["server_ms"] for x in g]),
                row("generation, wall (POST -> file exists)", [x["wall_ms"] for x in g]),
                row("load, server (load_snapshot_latency_ms)", [x["server_ms"] for x in ld]),
                row("restart, wall (spawn -> ApiVersions ok)", [x["wall_ms"] for x in ld])]
        out.append(table(["ms", "median", "min", "max", "runs"], rows))
        out.append(f"  {res['keys']:,} keys x {VALUE_SIZE} B values; snapshot "
                   f"{g[-1]['size'] / 1e6:.1f} MB; empty kraftd starts in "
                   f"{fmt(res.get('empty_start_ms'), 0)} ms; produce took "
                   f"{fmt(res.get('produce_s'), 1)} s")
    t = res.get("transfer")
    if t:
        med = t["medians_mb_s"]
        rows = []
        for n, rs in t["runs"].items():
            vals = [d["mb_s"] for d in rs]
            rows.append([n, fmt(med[n]), fmt(min(vals)), fmt(max(vals)), str(len(vals)),
                         fmt_ratio(ratio(med[n], med.get("ceiling"))) if n != "ceiling" else ""])
        out.append(table(["FetchSnapshot (1 MiB chunks)", "median MB/s", "min", "max", "runs",
                          "vs ceiling"], rows))
        out.append(f"  target kraftd >= {TARGET_VS_CEILING}x ceiling: {fmt_ratio(res['ratio'])} "
                   f"-> {verdict(res['ratio'], TARGET_VS_CEILING)}  (median of per-repeat "
                   f"ratios: {fmt_ratio(res.get('paired_ratio'))}, info)")
    for k, e in res.get("errors", {}).items():
        out.append(f"  {k}: ERROR {e}")
    return "\n".join(out)
