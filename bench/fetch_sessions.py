"""(d) Fetch sessions (KIP-227 "P3"): one session over 10,000 partitions, 10 changing per fetch.

Three numbers, all ratios or per-partition figures measured in the same run:

* **server CPU** of an incremental fetch as a fraction of a full (sessionless) fetch of all
  partitions (target <= 5%).  The server's CPU is the sum of ``/proc/<pid>/task/*/schedstat``
  (nanoseconds on CPU, every thread) read right before a fetch is sent and again after its
  response arrived plus a short settle pause; the Produce that moves 10 partitions before each
  fetch is acknowledged (and followed by the same pause) *before* the fetch window opens, so
  its cost lands in its own window (reported separately), never in the fetch's.
* **response bytes** of an incremental fetch as a fraction of a full fetch (target <= 1%).
* **bytes per cached partition** (target <= 300 B), measured in a child process with the real
  sans-IO core (``Node.open`` on a tmpfs data dir, topic created with CreateTopics, requests
  decoded from bytes as the server would): tracemalloc, retained memory after a
  session-creating full fetch minus after a sessionless fetch of the same request (transient
  garbage and lazily-built caches cancel out), cross-checked with ``FetchSession.nbytes()``.

The client is a real KIP-227 consumer on one connection (kraftd's own codec): a full fetch
with SessionEpoch 0 opens the session; each incremental fetch carries epoch 1, 2, ... and only
the partitions whose fetch offset moved since the session last heard of them.  Full and
incremental rounds are interleaved in blocks (order rotated per block); ratios are per block,
medians reported.  The server is a dedicated kraftd with ``KRAFTD_FSYNC_POLICY=never`` (the
high watermark moves at once) and its data dir on /dev/shm (creating 10,000 partitions on the
disk costs ~60 s of fsyncs; a fetch does not touch the disk either way).
"""

from __future__ import annotations

import gc
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import wire
from bench.common import Context, fmt, median, scrape_metrics, table
from bench.servers import HOST, REPO, KraftdServer

NAME = "fetch_sessions"
TITLE = ("(d) fetch sessions (KIP-227): 1 session x 10,000 partitions, 10 changing per fetch "
         "(kraftd only)")
TOPIC = "bench-sessions"
PARTITIONS = 10_000
CHANGED = 10
VALUE_SIZE = 100                 # one record of 100 B per changed partition per round
PARTITION_MAX_BYTES = 1 << 20
RESPONSE_MAX_BYTES = 64 << 20
SETTLE_S = 0.002                 # pause after each response before reading the CPU counter
TARGET_CPU = 0.05
TARGET_BYTES = 0.01
TARGET_MEM = 300.0
MAX_FETCH_VERSION = 17

_SIZE = struct.Struct(">i")


# --------------------------------------------------------------------------------------------
# server


class SessionKraftd(KraftdServer):
    """kraftd with fsync policy "never" and its data dir on tmpfs (when available)."""

    name = "kraftd-sessions"

    def __init__(self, extra_args: list[str] | None = None) -> None:
        super().__init__(extra_args)
        self.shm_dir: str | None = None

    def env(self) -> dict[str, str]:
        e = super().env()
        e["KRAFTD_FSYNC_POLICY"] = "never"
        # One consumer session over every partition: above the default cap of a client's session.
        e.setdefault("KRAFTD_MAX_INCREMENTAL_FETCH_SESSION_PARTITIONS", str(PARTITIONS))
        return e

    def command(self, port: int) -> list[str]:
        argv = super().command(port)
        if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            self.shm_dir = tempfile.mkdtemp(prefix="kraftd-bench-sessions-", dir="/dev/shm")
            argv[argv.index("--data-dir") + 1] = self.shm_dir
        return argv

    def stop(self) -> None:
        super().stop()
        if self.shm_dir:
            shutil.rmtree(self.shm_dir, ignore_errors=True)
            self.shm_dir = None


def server_cpu_ns(pid: int) -> int:
    """CPU time of every thread of ``pid`` in ns (schedstat: exact, unlike the 10 ms ticks of
    /proc/<pid>/stat)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def server_cpu_ticks_s(pid: int) -> float:
    """utime + stime from /proc/<pid>/stat in seconds (coarse cross-check)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape(port: int) -> dict[str, float]:
    return scrape_metrics(HOST, port)


# --------------------------------------------------------------------------------------------
# the KIP-227 consumer


class SessionClient:
    """One connection; tracks fetch positions, the session id/epoch and what the session knows."""

    def __init__(self, port: int, fetch_version: int, produce_version: int, topic: str,
                 topic_id, partitions: int) -> None:
        from kraftd.protocol import messages as m

        self.m = m
        self.sock = socket.create_connection((HOST, port), timeout=120)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.fv, self.pv = fetch_version, produce_version
        self.topic, self.topic_id, self.n = topic, topic_id, partitions
        self.corr = 0
        self.pos = [0] * partitions          # next offset to fetch, per partition
        self.known: list[int] = []           # the fetch offset the session last heard of
        self.session_id = 0
        self.epoch = 0
        self.batch = wire.build_batch(1, wire.record_value(VALUE_SIZE))

    def close(self) -> None:
        self.sock.close()

    def _roundtrip(self, api_key: int, version: int, request) -> tuple[int, object]:
        from kraftd.protocol.framing import decode_response, encode_request, frame_bytes

        self.corr += 1
        m = self.m
        hdr = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                              correlation_id=self.corr, client_id="kraftd-bench-sessions")
        parts: list = []
        encode_request(hdr, request, parts)
        self.sock.sendall(frame_bytes(parts))
        (size,) = _SIZE.unpack(wire.recv_exact(self.sock, 4))
        body = wire.recv_exact(self.sock, size)
        rh, resp = decode_response(body, api_key, version)
        if rh.correlation_id != self.corr:
            raise wire.WireError(f"correlation {rh.correlation_id} != {self.corr}")
        return size + 4, resp

    # -- produce -----------------------------------------------------------------------------
    def produce(self, parts: list[int]) -> None:
        m = self.m
        req = m.ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            m.ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                m.ProduceRequest.PartitionProduceData(index=p, records=self.batch)
                for p in parts])])
        _, resp = self._roundtrip(wire.PRODUCE, self.pv, req)
        for t in resp.responses:
            for p in t.partition_responses:
                if p.error_code:
                    raise wire.WireError(f"produce error {p.error_code} on partition {p.index}")

    # -- fetch -------------------------------------------------------------------------------
    def _fetch_request(self, partitions, session_id: int, epoch: int):
        m = self.m
        pos = self.pos
        fp = m.FetchRequest.FetchPartition
        topics = []
        if partitions:
            topics = [m.FetchRequest.FetchTopic(topic=self.topic, topic_id=self.topic_id, partitions=[
                fp(partition=i, current_leader_epoch=-1, fetch_offset=pos[i], last_fetched_epoch=-1,
                   log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES)
                for i in partitions])]
        return m.FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1,
                              max_bytes=RESPONSE_MAX_BYTES, isolation_level=0,
                              session_id=session_id, session_epoch=epoch, topics=topics,
                              forgotten_topics_data=[], rack_id="")

    def _absorb(self, resp) -> tuple[int, int]:
        """Advance positions past the records received; returns (partitions, with records)."""
        from kraftd.protocol.records import iter_batch_headers

        if resp.error_code:
            raise wire.WireError(f"fetch error {resp.error_code}")
        nparts = nrec = 0
        pos = self.pos
        for t in resp.responses:
            for p in t.partitions:
                nparts += 1
                if p.error_code:
                    raise wire.WireError(f"fetch error {p.error_code} on partition "
                                         f"{p.partition_index}")
                recs = p.records
                if recs is not None and len(recs):
                    nrec += 1
                    last = -1
                    for _, h in iter_batch_headers(recs):
                        last = h.last_offset
                    if last >= 0:
                        pos[p.partition_index] = last + 1
        return nparts, nrec

    def open_session(self) -> tuple[int, int, int]:
        """Full fetch with SessionEpoch 0: the server answers with the new session's id."""
        req = self._fetch_request(range(self.n), 0, 0)
        self.known = list(self.pos)
        nbytes, resp = self._roundtrip(wire.FETCH, self.fv, req)
        if not resp.session_id:
            raise wire.WireError(f"the server did not open a session (error {resp.error_code})")
        self.session_id, self.epoch = resp.session_id, 1
        nparts, nrec = self._absorb(resp)
        return nbytes, nparts, nrec

    def full_request(self):
        """Sessionless fetch of every partition (SessionId 0, SessionEpoch -1)."""
        return self._fetch_request(range(self.n), 0, -1)

    def incremental_request(self) -> tuple[object, int]:
        """The next incremental request: only partitions whose fetch offset moved since the
        session last heard of them; the epoch advances."""
        pos, known = self.pos, self.known
        changed = [i for i in range(self.n) if pos[i] != known[i]]
        for i in changed:
            known[i] = pos[i]
        req = self._fetch_request(changed, self.session_id, self.epoch)
        self.epoch = 1 if self.epoch >= 0x7FFFFFFF else self.epoch + 1
        return req, len(changed)

    def send_fetch(self, req) -> tuple[int, int, int]:
        nbytes, resp = self._roundtrip(wire.FETCH, self.fv, req)
        if resp.session_id not in (0, self.session_id):
            raise wire.WireError(f"unexpected session id {resp.session_id}")
        nparts, nrec = self._absorb(resp)
        return nbytes, nparts, nrec


# --------------------------------------------------------------------------------------------
# CPU / bytes measurement


def _rounds(ctx: Context, srv: SessionKraftd, cl: SessionClient, blocks: int, full_n: int,
            inc_n: int) -> dict:
    """``blocks`` x (``full_n`` sessionless rounds + ``inc_n`` incremental rounds), order rotated.

    A round: produce one small batch to 10 random partitions (acks=1; with fsync "never" the
    HW moves before the answer), pause, then one fetch.  CPU counter reads: a (before the
    produce), b (after its answer + pause), c (after the fetch's answer + pause): produce =
    b - a, fetch = c - b.  Requests are encoded before ``a``/``b`` (client cost is outside)."""
    pid = srv.proc.pid
    rng = random.Random(227)
    n = cl.n

    def one_round(kind: str) -> dict:
        parts = rng.sample(range(n), CHANGED)
        if kind == "incremental":
            req, nreq = cl.incremental_request()  # positions moved by earlier fetches
        else:
            req, nreq = cl.full_request(), n      # client-side encoding before the windows
        time.sleep(SETTLE_S)
        a = server_cpu_ns(pid)
        cl.produce(parts)
        time.sleep(SETTLE_S)
        before = [cl.pos[i] for i in parts]
        b = server_cpu_ns(pid)
        t0 = time.perf_counter()
        nbytes, nparts, nrec = cl.send_fetch(req)
        wall = time.perf_counter() - t0
        time.sleep(SETTLE_S)
        c = server_cpu_ns(pid)
        moved = sum(1 for i, o in zip(parts, before) if cl.pos[i] != o)
        return dict(produce_ns=b - a, fetch_ns=c - b, bytes=nbytes, req_parts=nreq,
                    resp_parts=nparts, resp_with_records=nrec, moved=moved, wall_s=wall)

    out_blocks = []
    for blk in range(blocks):
        order = ["full", "incremental"] if blk % 2 == 0 else ["incremental", "full"]
        res: dict[str, list[dict]] = {"full": [], "incremental": []}
        for kind in order:
            if kind == "incremental":
                # unmeasured: its request carries the partitions the full fetches moved
                one_round(kind)
            for _ in range(full_n if kind == "full" else inc_n):
                res[kind].append(one_round(kind))
        f, inc = res["full"], res["incremental"]
        fcpu = sum(r["fetch_ns"] for r in f) / len(f)
        icpu = sum(r["fetch_ns"] for r in inc) / len(inc)
        fb = median([r["bytes"] for r in f])
        ib = median([r["bytes"] for r in inc])
        blk_res = dict(full_cpu_ms=fcpu / 1e6, inc_cpu_ms=icpu / 1e6,
                       produce_cpu_ms=sum(r["produce_ns"] for r in f + inc) / len(f + inc) / 1e6,
                       full_bytes=fb, inc_bytes=ib, cpu_ratio=icpu / fcpu, bytes_ratio=ib / fb,
                       full_wall_ms=median([r["wall_s"] for r in f]) * 1e3,
                       inc_wall_ms=median([r["wall_s"] for r in inc]) * 1e3,
                       inc_cpu_median_ms=median([r["fetch_ns"] for r in inc]) / 1e6,
                       full_cpu_median_ms=median([r["fetch_ns"] for r in f]) / 1e6,
                       inc_resp_parts=median([r["resp_parts"] for r in inc]),
                       inc_req_parts=median([r["req_parts"] for r in inc]),
                       inc_resp_with_records=median([r["resp_with_records"] for r in inc]),
                       inc_not_delivered=sum(CHANGED - r["moved"] for r in inc),
                       full_not_delivered=sum(CHANGED - r["moved"] for r in f),
                       n_full=len(f), n_inc=len(inc))
        out_blocks.append(blk_res)
        ctx.log(f"  block {blk + 1}/{blocks}: full fetch {blk_res['full_cpu_ms']:.1f} ms CPU, "
                f"{fb / 1e3:.0f} kB | incremental {blk_res['inc_cpu_ms'] * 1e3:.0f} us CPU, "
                f"{ib:.0f} B ({blk_res['inc_req_parts']:.0f} partitions asked, "
                f"{blk_res['inc_resp_parts']:.0f} answered) | produce "
                f"{blk_res['produce_cpu_ms'] * 1e3:.0f} us | cpu {blk_res['cpu_ratio']:.2%}, "
                f"bytes {blk_res['bytes_ratio']:.3%}")
    return dict(blocks=out_blocks)


def _measure_wire(ctx: Context) -> dict:
    srv = SessionKraftd(ctx.options.get("kraftd_args"))
    srv.start(timeout=ctx.options.get("start_timeout", 30.0))
    try:
        t0 = time.monotonic()
        with wire.Conn(HOST, srv.port, timeout=300) as c:
            c.create_topic(TOPIC, PARTITIONS, timeout_s=300)
            fv = min(c.version(wire.FETCH), MAX_FETCH_VERSION)
            if fv < 7:
                raise wire.WireError(f"Fetch v{fv} has no sessions")
            pv = c.version(wire.PRODUCE)
            topic_id = c.topic_id(TOPIC) if fv >= 13 else None
        ctx.log(f"  created {TOPIC} with {PARTITIONS} partitions in {time.monotonic() - t0:.1f}s "
                f"(Fetch v{fv}, Produce v{pv})")
        cl = SessionClient(srv.port, fv, pv, TOPIC, topic_id, PARTITIONS)
        try:
            # positions: a first sessionless fetch from 0 (each partition holds the epoch's
            # LeaderChange control batch), then open the session at the positions reached
            cl.send_fetch(cl.full_request())
            ob, oparts, _ = cl.open_session()
            # idle CPU rate (timers) to show what a settle pause adds
            pid = srv.proc.pid
            i0, t = server_cpu_ns(pid), time.perf_counter()
            time.sleep(1.0)
            idle_ns_per_s = (server_cpu_ns(pid) - i0) / (time.perf_counter() - t)
            wrng = random.Random(1)
            for _ in range(20):  # warm-up rounds of the incremental path
                cl.produce(wrng.sample(range(PARTITIONS), CHANGED))
                cl.send_fetch(cl.incremental_request()[0])
            for _ in range(2):
                cl.send_fetch(cl.full_request())
            blocks = ctx.options.get("fs_blocks") or (2 if ctx.quick else 5)
            full_n = ctx.options.get("fs_full") or (5 if ctx.quick else 10)
            inc_n = ctx.options.get("fs_inc") or (50 if ctx.quick else 100)
            tick0 = server_cpu_ticks_s(pid)
            ns0 = server_cpu_ns(pid)
            res = _rounds(ctx, srv, cl, blocks, full_n, inc_n)
            res["stat_vs_schedstat"] = dict(stat_s=server_cpu_ticks_s(pid) - tick0,
                                            schedstat_s=(server_cpu_ns(pid) - ns0) / 1e9)
            metrics = scrape(srv.metrics_port)
            res["metrics"] = {k: v for k, v in metrics.items() if "incremental_fetch" in k}
        finally:
            cl.close()
        res.update(fetch_version=fv, produce_version=pv, open_session_bytes=ob,
                   open_session_partitions=oparts, idle_cpu_us_per_s=idle_ns_per_s / 1e3,
                   data_on_tmpfs=srv.shm_dir is not None, rss_mib=srv.rss_mib())
        return res
    finally:
        srv.stop()


# --------------------------------------------------------------------------------------------
# memory per cached partition (child process, real sans-IO core)


def _memory_on_fresh_node(partitions: int, version: int, keep_response: bool) -> dict:
    """One fresh node: tracemalloc around node.handle() of a sessionless full fetch and of two
    session-creating full fetches of the same 10,000 partitions."""
    import tracemalloc

    from kraftd.protocol import messages as m
    from kraftd.protocol.framing import decode_request, encode_request, frame_bytes
    from kraftd.quorum.node import Node
    from kraftd.quorum.node_config import NodeConfig
    from kraftd.quorum.peer import Peer

    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    data_dir = tempfile.mkdtemp(prefix="kraftd-bench-sessmem-", dir=base)
    peer = Peer("127.0.0.1:40000")
    try:
        now = int(time.time() * 1000)
        node = Node.open(NodeConfig(data_dir=data_dir, fsync_policy="never",
                                    max_incremental_fetch_session_partitions=max(partitions, 1000)), now)

        def decoded(api_key: int, ver: int, req):
            hdr = m.RequestHeader(request_api_key=api_key, request_api_version=ver,
                                  correlation_id=1, client_id="kraftd-bench-sessions")
            parts: list = []
            encode_request(hdr, req, parts)
            return decode_request(memoryview(frame_bytes(parts))[4:])

        h, req = decoded(19, 7, m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name=TOPIC, num_partitions=partitions, replication_factor=1)], timeout_ms=30000))
        out = node.handle(h, req, now, peer)
        if out.response.topics[0].error_code:
            raise RuntimeError(f"CreateTopics error {out.response.topics[0].error_code}")
        topic = node.topics.get(TOPIC)
        hw = [p.high_watermark for p in topic.partitions]

        def fetch(epoch: int):
            return decoded(1, version, m.FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=RESPONSE_MAX_BYTES,
                session_id=0, session_epoch=epoch, topics=[m.FetchRequest.FetchTopic(
                    topic=TOPIC, topic_id=topic.topic_id, partitions=[m.FetchRequest.FetchPartition(
                        partition=i, current_leader_epoch=-1, fetch_offset=hw[i],
                        last_fetched_epoch=-1, log_start_offset=-1,
                        partition_max_bytes=PARTITION_MAX_BYTES) for i in range(partitions)])]))

        kept: list = []

        def traced(epoch: int) -> tuple[int, int, list]:
            h, req = fetch(epoch)  # decoded before tracing: the request is not counted
            gc.collect()
            tracemalloc.start(1)
            s0 = tracemalloc.take_snapshot()
            outcome = node.handle(h, req, now, peer)
            sid = outcome.response.session_id
            if keep_response:
                kept.append(outcome)
            del outcome
            gc.collect()
            s1 = tracemalloc.take_snapshot()
            tracemalloc.stop()
            flt = [tracemalloc.Filter(False, tracemalloc.__file__)]
            diff = s1.filter_traces(flt).compare_to(s0.filter_traces(flt), "lineno")
            total = sum(d.size_diff for d in diff)
            top = [(f"{Path(d.traceback[0].filename).name}:{d.traceback[0].lineno}",
                    d.size_diff, d.count_diff) for d in diff[:8]]
            return total, sid, top

        traced(-1)                          # warm-up: codec and handler caches
        kept.clear()
        sessionless, _, _ = traced(-1)
        first, sid1, top = traced(0)        # the node's first session over these partitions
        second, sid2, _ = traced(0)         # another one (shared per-partition tables exist now)
        s1 = node.fetch_sessions.get(sid1)
        nbytes = s1.nbytes() if s1 is not None and hasattr(s1, "nbytes") else None
        res = dict(sessionless=sessionless, first=first, second=second,
                   cached=len(s1) if s1 is not None else 0, nbytes=nbytes, top_lines=top,
                   sessions=len(node.fetch_sessions), both_ids=bool(sid1 and sid2))
        kept.clear()
        node.close()
        return res
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def measure_memory(partitions: int = PARTITIONS, version: int = MAX_FETCH_VERSION) -> dict:
    """Bytes per cached partition, two ways (each on its own fresh node):

    * retained: the response is dropped before the second snapshot; session - sessionless;
    * with the response alive: (session + response) - (sessionless + response).
    """
    drop = _memory_on_fresh_node(partitions, version, keep_response=False)
    keep = _memory_on_fresh_node(partitions, version, keep_response=True)
    n = partitions
    return dict(
        partitions=n, fetch_version=version, cached=drop["cached"],
        bytes_per_partition=(drop["first"] - drop["sessionless"]) / n,
        bytes_per_partition_with_response=(keep["first"] - keep["sessionless"]) / n,
        second_session_bytes_per_partition=(drop["second"] - drop["sessionless"]) / n,
        nbytes=drop["nbytes"],
        nbytes_per_partition=None if drop["nbytes"] is None else drop["nbytes"] / n,
        top_lines=drop["top_lines"], raw=dict(retained=drop, with_response=keep))


def _measure_memory_child(ctx: Context, version: int) -> dict:
    cmd = [sys.executable, "-m", "bench.fetch_sessions", "memory", str(PARTITIONS), str(version)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=str(REPO))
    if r.returncode != 0:
        raise RuntimeError(f"memory child failed ({r.returncode}): {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------


def run(ctx: Context) -> dict:
    if "kraftd" not in ctx.systems:
        return dict(name=NAME, error="kraftd not among the systems")
    if "kraftd" in ctx.skipped:
        return dict(name=NAME, error=f"kraftd skipped: {ctx.skipped['kraftd'].splitlines()[0]}")
    res: dict = dict(name=NAME, partitions=PARTITIONS, changed=CHANGED, errors={})
    try:
        res["wire"] = _measure_wire(ctx)
    except Exception as e:  # noqa: BLE001
        res["errors"]["wire"] = f"{type(e).__name__}: {e}"
        ctx.log(f"  fetch sessions (wire) failed: {res['errors']['wire']}")
    try:
        fv = res.get("wire", {}).get("fetch_version", MAX_FETCH_VERSION)
        res["memory"] = _measure_memory_child(ctx, fv)
        mem = res["memory"]
        ctx.log(f"  memory: {mem['bytes_per_partition']:.0f} B/partition retained (tracemalloc), "
                f"{mem['bytes_per_partition_with_response']:.0f} B with the response alive, "
                f"nbytes() {fmt(mem['nbytes_per_partition'], 0)} B")
    except Exception as e:  # noqa: BLE001
        res["errors"]["memory"] = f"{type(e).__name__}: {e}"
        ctx.log(f"  fetch sessions (memory) failed: {res['errors']['memory']}")
    blocks = res.get("wire", {}).get("blocks", [])
    res["cpu_ratio"] = median([b["cpu_ratio"] for b in blocks])
    res["bytes_ratio"] = median([b["bytes_ratio"] for b in blocks])
    res["bytes_per_partition"] = res.get("memory", {}).get("bytes_per_partition")
    res["target"] = dict(cpu_ratio=TARGET_CPU, bytes_ratio=TARGET_BYTES,
                         bytes_per_partition=TARGET_MEM)
    res["verdict"] = {
        "cpu <= 5%": _le(res["cpu_ratio"], TARGET_CPU),
        "bytes <= 1%": _le(res["bytes_ratio"], TARGET_BYTES),
        "memory <= 300 B/partition": _le(res["bytes_per_partition"], TARGET_MEM),
    }
    return res


def _le(value, target) -> str:
    if value is None:
        return "n/a"
    return "MET" if value <= target else "NOT MET"


def report(res: dict) -> str:
    if res.get("error"):
        return f"{TITLE}\n  skipped: {res['error']}"
    out = [TITLE]
    w = res.get("wire")
    if w:
        bl = w["blocks"]
        def col(key, scale=1.0, digits=1):
            vals = [b[key] * scale for b in bl]
            return [fmt(median(vals), digits), fmt(min(vals), digits), fmt(max(vals), digits)]
        rows = [
            ["full fetch server CPU (ms)"] + col("full_cpu_ms", 1, 2),
            ["incremental fetch server CPU (ms)"] + col("inc_cpu_ms", 1, 3),
            ["  ratio incremental/full (%)"] + col("cpu_ratio", 100, 2),
            ["produce (10 partitions) CPU (ms)"] + col("produce_cpu_ms", 1, 3),
            ["full fetch response (bytes)"] + col("full_bytes", 1, 0),
            ["incremental response (bytes)"] + col("inc_bytes", 1, 0),
            ["  ratio incremental/full (%)"] + col("bytes_ratio", 100, 3),
            ["full fetch wall (ms)"] + col("full_wall_ms", 1, 1),
            ["incremental fetch wall (ms)"] + col("inc_wall_ms", 1, 2),
        ]
        out.append(table(["per fetch (median of blocks)", "median", "min", "max"], rows))
        out.append(f"  Fetch v{w['fetch_version']}; {len(bl)} blocks x ({bl[0]['n_full']} full + "
                   f"{bl[0]['n_inc']} incremental); incremental requests name "
                   f"{bl[0]['inc_req_parts']:.0f} partitions, responses carry "
                   f"{bl[0]['inc_resp_parts']:.0f}; records not delivered: "
                   f"{sum(b['inc_not_delivered'] for b in bl)} incremental / "
                   f"{sum(b['full_not_delivered'] for b in bl)} full; idle server CPU "
                   f"{w['idle_cpu_us_per_s']:.0f} us/s")
    m = res.get("memory")
    if m:
        out.append(f"  memory: {m['bytes_per_partition']:.0f} B per cached partition "
                   f"(tracemalloc, session - sessionless, {m['cached']} cached; with the response "
                   f"alive {m['bytes_per_partition_with_response']:.0f} B); "
                   f"FetchSession.nbytes() says {fmt(m['nbytes_per_partition'], 0)} B")
        out.append("    largest: " + ", ".join(f"{name} {size / m['partitions']:.0f} B"
                                                 for name, size, _ in m["top_lines"][:5]))
    cr, br, mb = res.get("cpu_ratio"), res.get("bytes_ratio"), res.get("bytes_per_partition")
    out.append(f"  target incremental CPU <= 5% of full: "
               f"{'-' if cr is None else f'{cr:.2%}'} -> {res['verdict']['cpu <= 5%']}")
    out.append(f"  target incremental bytes <= 1% of full: "
               f"{'-' if br is None else f'{br:.3%}'} -> {res['verdict']['bytes <= 1%']}")
    out.append(f"  target <= 300 B per cached partition: {fmt(mb, 0)} B -> "
               f"{res['verdict']['memory <= 300 B/partition']}")
    for k, e in res.get("errors", {}).items():
        out.append(f"  {k}: ERROR {e}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "memory":
        n = int(sys.argv[2]) if len(sys.argv) > 2 else PARTITIONS
        v = int(sys.argv[3]) if len(sys.argv) > 3 else MAX_FETCH_VERSION
        print(json.dumps(measure_memory(n, v)))
    else:
        print("usage: python -m bench.fetch_sessions memory [PARTITIONS] [FETCH_VERSION]",
              file=sys.stderr)
        sys.exit(2)
