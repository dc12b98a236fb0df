"""(c) Small requests: Metadata and ListOffsets request rate.

``connections`` (16) asyncio connections each keep ``inflight`` (16) pre-encoded requests
outstanding; every response frame received is answered by sending the same request again
(so the in-flight count stays constant).  The client counts complete response frames during
a fixed window after a short warm-up and never decodes them (a decoded sample is checked for
errors before the run).  The client runs in its own process (uvloop when available) so the
parent's state does not disturb it; it competes for the same 2 cores as the server, which is
the same for every system measured.
"""

from __future__ import annotations

import asyncio
import json
import struct
import subprocess
import sys

from bench import wire
from bench.common import Context, fmt, fmt_ratio, median, ratio, rotated, table, verdict
from bench.dataset import ensure_dataset, produce_batches
from bench.servers import HOST, REPO

NAME = "small_requests"
TITLE = "(c) small requests: responses/s, 16 connections x 16 in flight"
TARGET = 0.5
APIS = ("Metadata", "ListOffsets")


class _Counter(asyncio.Protocol):
    def __init__(self, request: bytes, inflight: int, counts: list[int], idx: int,
                 lost: asyncio.Future) -> None:
        self.request = request
        self.inflight = inflight
        self.counts = counts
        self.idx = idx
        self.buf = bytearray()
        self.lost = lost
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request * self.inflight)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = 0
        end = len(buf)
        unpack = struct.unpack_from
        while end - pos >= 4:
            (size,) = unpack(">i", buf, pos)
            if end - pos - 4 < size:
                break
            pos += 4 + size
            n += 1
        if pos:
            del buf[:pos]
        if n:
            self.counts[self.idx] += n
            self.transport.write(self.request * n)

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


async def _load(port: int, request: bytes, connections: int, inflight: int,
                warmup: float, duration: float) -> dict:
    loop = asyncio.get_running_loop()
    counts = [0] * connections
    lost = loop.create_future()
    transports = []
    try:
        for i in range(connections):
            t, _ = await loop.create_connection(
                lambda i=i: _Counter(request, inflight, counts, i, lost), HOST, port)
            transports.append(t)
        await asyncio.wait([lost], timeout=warmup)
        c0 = sum(counts)
        t0 = loop.time()
        await asyncio.wait([lost], timeout=duration)
        c1 = sum(counts)
        t1 = loop.time()
        if lost.done():
            raise RuntimeError(f"connection lost during the run: {lost.result()!r}")
    finally:
        for t in transports:
            t.close()
    return dict(responses=c1 - c0, seconds=t1 - t0, rps=(c1 - c0) / (t1 - t0))


def worker_main(argv: list[str]) -> int:
    port, req_hex, connections, inflight, warmup, duration = argv
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    res = asyncio.run(_load(int(port), bytes.fromhex(req_hex), int(connections), int(inflight),
                            float(warmup), float(duration)))
    print(json.dumps(res), flush=True)
    return 0


def _request_for(api: str, conn: wire.Conn, topic: str) -> tuple[bytes, int, int]:
    if api == "Metadata":
        key, body = wire.METADATA, wire.metadata_body(topic)
    else:
        key, body = wire.LIST_OFFSETS, wire.list_offsets_body(topic, 0, -1)
    v = conn.version(key)
    # sanity: the decoded response carries no error
    resp = conn.request(key, body, v)
    if api == "Metadata":
        errs = [int(t.error_code) for t in resp.topics]
    else:
        errs = [int(p.error_code) for t in resp.topics for p in t.partitions]
    if any(errs) or not errs:
        raise wire.WireError(f"{api} v{v} sample response has errors {errs}")
    return wire.encode_request(key, v, 42, body), key, v


def run(ctx: Context) -> dict:
    connections = ctx.options.get("connections", 16)
    inflight = ctx.options.get("inflight", 16)
    duration = ctx.duration_s
    warmup = ctx.options.get("warmup_s", 1.0)
    errors: dict[str, str] = {}
    reqs: dict[tuple[str, str], bytes] = {}
    versions: dict[str, dict[str, int]] = {}
    ports: dict[str, int] = {}
    use_dataset = ctx.options.get("small_topic", "small") == "data"
    for name, srv in ctx.kafka_servers():
        try:
            if use_dataset:
                topic = ensure_dataset(srv, mib=ctx.data_mib, value_size=ctx.value_size,
                                       batch_records=ctx.batch_records, log=ctx.log).topic
            else:
                # a small topic (one batch): measures per-request overhead, not how a storage
                # engine scales with partition size (Tansu's ListOffsets is O(partition size))
                topic = "bench-small"
                with wire.Conn(HOST, srv.port) as c:
                    c.create_topic(topic)
                produce_batches(srv.port, topic, wire.build_batch(
                    ctx.batch_records, wire.record_value(ctx.value_size)), 1)
            with wire.Conn(HOST, srv.port) as c:
                for api in APIS:
                    frame, key, v = _request_for(api, c, topic)
                    reqs[(api, name)] = frame
                    versions.setdefault(name, {})[api] = v
            ports[name] = srv.port
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"
            ctx.log(f"  [{name}] small-request setup failed: {errors[name]}")
    if not ports:
        return dict(name=NAME, error="no Kafka system available", errors=errors)
    runs: dict[str, list[dict]] = {}
    names = list(ports)
    for rep in range(ctx.repeats):
        for api in APIS:
            for name in rotated(names, rep):
                key = f"{api}/{name}"
                argv = [sys.executable, "-m", "bench.small_requests", str(ports[name]),
                        reqs[(api, name)].hex(), str(connections), str(inflight), str(warmup),
                        str(duration)]
                try:
                    r = subprocess.run(argv, capture_output=True, text=True, cwd=str(REPO),
                                       timeout=warmup + duration + 60)
                    if r.returncode != 0:
                        raise RuntimeError(r.stderr.strip()[-400:])
                    res = json.loads(r.stdout.strip().splitlines()[-1])
                except Exception as e:
                    errors[key] = f"{type(e).__name__}: {e}"
                    ctx.log(f"  {key} failed: {errors[key]}")
                    continue
                runs.setdefault(key, []).append(res)
                ctx.log(f"  {api:11s} {name:7s} rep {rep + 1}/{ctx.repeats} "
                        f"{res['rps']:10,.0f} responses/s")
    med = {k: median([r["rps"] for r in v]) for k, v in runs.items()}
    ratios = {api: ratio(med.get(f"{api}/kraftd"), med.get(f"{api}/tansu")) for api in APIS}
    return dict(name=NAME, medians_rps=med, runs=runs, ratios=ratios, versions=versions,
                topic="dataset" if use_dataset else "bench-small (16 records)",
                errors=errors, connections=connections, inflight=inflight, duration_s=duration,
                target=TARGET,
                verdict={f"{api} kraftd/tansu >= {TARGET}": verdict(ratios[api], TARGET)
                         for api in APIS})


def report(res: dict) -> str:
    if res.get("error"):
        return f"{TITLE}\n  skipped: {res['error']}"
    med = res["medians_rps"]
    rows = []
    for api in APIS:
        vk = res["versions"].get("kraftd", {}).get(api)
        vt = res["versions"].get("tansu", {}).get(api)
        r = res["ratios"][api]
        rows.append([api, f"v{vk}" if vk is not None else "-", fmt(med.get(f"{api}/kraftd"), 0),
                     f"v{vt}" if vt is not None else "-", fmt(med.get(f"{api}/tansu"), 0),
                     fmt_ratio(r), f">= {TARGET}x", verdict(r, TARGET)])
    out = [TITLE, table(["api", "kraftd v", "kraftd resp/s", "tansu v", "tansu resp/s",
                         "kraftd/tansu", "target", "verdict"], rows)]
    out.append(f"  (medians over {len(next(iter(res['runs'].values()), []))} runs of "
               f"{res['duration_s']:.0f}s; topic: {res.get('topic')})")
    for n, e in res.get("errors", {}).items():
        out.append(f"  {n}: ERROR {e}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
