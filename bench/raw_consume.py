"""(a) Raw consume: a minimal Fetch client counting bytes, vs. the C ceiling server.

The client sends Fetch requests (1 partition, partition_max_bytes = 1 MiB) from offset 0 to
the end of the dataset with ``depth`` requests pipelined, decodes only the response header
and the partition header and walks the record-batch headers (to count complete batches and
find the next offset).  The next offsets of pipelined requests are predicted from the
previous step; a misprediction drains the pipeline (responses discarded) and resyncs.

The ceiling (bench/ceiling/copy_server.c) answers the very same request stream with a canned
Fetch response of the same version holding the same batches (base offsets patched), so
``system / ceiling`` compares a server against loopback + this client loop.
"""

from __future__ import annotations

import collections
import socket
import time
import uuid

from bench import wire
from bench.common import (Context, fmt, fmt_ratio, median, ratio, rotated, settle, table,
                          verdict)
from bench.dataset import Dataset, ensure_dataset
from bench.servers import HOST, CeilingServer, PyFloorServer

NAME = "raw_consume"
TITLE = "(a) raw consume: Fetch client counting bytes (1 partition, 1 MiB partition max bytes)"
TARGET_VS_CEILING = 0.6
PARTITION_MAX_BYTES = 1 << 20



def consume_range(port: int, template: wire.FetchTemplate, start: int, end: int, *,
                  depth: int = 2, time_box: float | None = None,
                  timeout_s: float = 300.0) -> dict:
    """Fetch [start, end) as fast as possible (or until ``time_box`` seconds have passed);
    returns bytes/seconds/fetch counts."""
    v = template.version
    sock = socket.create_connection((HOST, port), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frames = wire.FrameReader(sock)
    send = sock.sendall
    make = template.make
    inflight: collections.deque[tuple[int, int]] = collections.deque()
    expected = start
    step = 0
    corr = 0
    useful = 0
    wire_bytes = 0
    fetches = 0
    discarded = 0
    empty = 0
    resync = False
    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    box_end = time.monotonic() + time_box if time_box else None
    boxed = False
    try:
        while expected < end:
            if box_end is not None and time.monotonic() > box_end:
                boxed = True
                break
            # keep the pipeline full (only once the step is known)
            while not resync and len(inflight) < (depth if step > 0 else 1):
                nxt = inflight[-1][1] + step if inflight else expected
                if nxt >= end:
                    break
                corr += 1
                send(make(corr, nxt))
                inflight.append((corr, nxt))
            if not inflight:
                raise wire.WireError("no request in flight")
            frame = frames.read()
            wire_bytes += len(frame) + 4
            fetches += 1
            r = wire.parse_fetch(frame, v)
            rcorr, off = inflight.popleft()
            if r.corr != rcorr:
                raise wire.WireError(f"correlation {r.corr} != {rcorr}")
            if r.error:
                raise wire.WireError(f"fetch error {r.error} at offset {off}")
            if off != expected:
                discarded += 1
                resync = True
            elif r.next_offset <= expected:
                empty += 1
                if empty > 50:
                    raise wire.WireError(f"no progress at offset {expected} (hw {r.high_watermark})")
            else:
                useful += r.useful
                step = r.next_offset - off
                expected = r.next_offset
            if resync and not inflight:
                resync = False
            if time.monotonic() > deadline:
                raise wire.WireError(f"raw consume timed out at offset {expected}/{end}")
        secs = time.perf_counter() - t0
    finally:
        sock.close()
    return dict(bytes=useful, wire_bytes=wire_bytes, seconds=secs, fetches=fetches,
                discarded=discarded, empty=empty, mb_s=useful / secs / 1e6,
                complete=not boxed, end_offset=expected)


def consume_passes(port: int, template: wire.FetchTemplate, end: int, *,
                   time_box: float | None, min_seconds: float) -> dict:
    """Sweep [0, end) again and again until `min_seconds` have passed (at least once; a
    time-boxed sweep ends it), and sum the sweeps: MB/s over the whole time."""
    total: dict | None = None
    while True:
        res = consume_range(port, template, 0, end, time_box=time_box)
        if total is None:
            total = dict(res, sweeps=1)
        else:
            for k in ("bytes", "wire_bytes", "seconds", "fetches", "discarded", "empty"):
                total[k] += res[k]
            total["sweeps"] += 1
            total["complete"] = total["complete"] and res["complete"]
        if not res["complete"] or total["seconds"] >= min_seconds:
            break
    total["mb_s"] = total["bytes"] / total["seconds"] / 1e6
    return total


def ceiling_server(ds: Dataset, version: int) -> CeilingServer:
    """Build the canned response: as many whole dataset batches as fit in 1 MiB."""
    batch = wire.build_batch(ds.batch_records, wire.record_value(ds.value_size))
    k = max(1, PARTITION_MAX_BYTES // len(batch))
    records_blob = batch * k
    hw = ds.end_offset
    body = dict(throttle_time_ms=0, throttle_time=0, error_code=0, session_id=0, responses=[dict(
        topic=ds.topic, topic_id=ds.topic_id or uuid.UUID(int=0), partitions=[dict(
            partition_index=0, error_code=0, high_watermark=hw, last_stable_offset=hw,
            log_start_offset=0, aborted_transactions=[], preferred_read_replica=-1,
            records=records_blob)])], node_endpoints=[])
    frame = wire.encode_response(wire.FETCH, version, 0, body)
    pos = frame.index(records_blob)
    total_chunks = max(1, ds.records // (k * ds.batch_records))
    srv = CeilingServer(frame, pos, len(batch), k, ds.batch_records, total_chunks)
    srv.info["end_offset"] = total_chunks * k * ds.batch_records
    return srv


def py_floor_server(kraftd, ds: Dataset, ceiling: CeilingServer,
                    template: wire.FetchTemplate) -> PyFloorServer | None:
    """The Python floor over kraftd's first segment of the dataset (None if it is not there:
    kraftd runs elsewhere, or the segment does not start with the dataset's batches)."""
    import glob
    import os
    import struct
    if not kraftd.tmpdir:
        return None
    segs = sorted(glob.glob(os.path.join(kraftd.tmpdir, "data", f"{ds.topic}-0", "*.log")))
    if not segs:
        return None
    with open(segs[0], "rb") as f:
        head = f.read(1 << 16)
    pos = 0
    while pos + 12 <= len(head):  # skip the LeaderChange control batch(es) before the data
        base, length = struct.unpack_from(">qi", head, pos)
        if base == ds.start_offset:
            break
        pos += 12 + length
    else:
        return None
    records_pos, batch, k, r, _ = ceiling.layout
    chunks = (os.path.getsize(segs[0]) - pos) // batch // k - 1
    if chunks < 1:
        return None
    srv = PyFloorServer(segs[0], ceiling.template,
                        (records_pos, batch, k, r, pos, ds.start_offset, template.offset_pos))
    srv.info["end_offset"] = ds.start_offset + chunks * k * r
    return srv


def run(ctx: Context) -> dict:
    systems = ctx.kafka_servers()
    datasets: dict[str, Dataset] = {}
    versions: dict[str, int] = {}
    templates: dict[str, wire.FetchTemplate] = {}
    ports: dict[str, int] = {}
    ends: dict[str, int] = {}
    errors: dict[str, str] = {}
    for name, srv in systems:
        try:
            ds = ensure_dataset(srv, mib=ctx.data_mib, value_size=ctx.value_size,
                                batch_records=ctx.batch_records, log=ctx.log)
            with wire.Conn(HOST, srv.port) as c:
                v = c.version(wire.FETCH, ctx.fetch_version)
            datasets[name], versions[name], ports[name] = ds, v, srv.port
            ends[name] = ds.end_offset
            templates[name] = wire.FetchTemplate(v, ds.topic, ds.topic_id, PARTITION_MAX_BYTES)
        except Exception as e:  # a broken system must not kill the whole run
            errors[name] = f"{type(e).__name__}: {e}"
            ctx.log(f"  [{name}] raw consume setup failed: {errors[name]}")
    if not datasets and "ceiling" not in ctx.systems:
        return dict(name=NAME, error="no system available", errors=errors)

    # the ceiling uses the same dataset shape and the highest Fetch version of the brokers
    ceiling = None
    extra: list = []  # reference servers started here (the Python floor)
    if "ceiling" in ctx.systems:
        ref = next(iter(datasets.values()), None)
        if ref is None:
            from bench.dataset import Dataset as _D
            batch = wire.build_batch(ctx.batch_records, wire.record_value(ctx.value_size))
            recs = (ctx.data_mib * (1 << 20) // ctx.value_size) // ctx.batch_records \
                * ctx.batch_records
            ref = _D("bench-data", None, recs, 0, ctx.batch_records, len(batch), ctx.value_size,
                     recs, 0.0)
        cv = ctx.fetch_version or (max(versions.values()) if versions else 12)
        ceiling = ceiling_server(ref, cv)
        ceiling.start()
        datasets["ceiling"], versions["ceiling"], ports["ceiling"] = ref, cv, ceiling.port
        ends["ceiling"] = ceiling.info["end_offset"]
        templates["ceiling"] = wire.FetchTemplate(cv, ref.topic, ref.topic_id,
                                                  PARTITION_MAX_BYTES)
        kraftd = dict(systems).get("kraftd")
        if kraftd is not None and "kraftd" in datasets and versions["kraftd"] == cv:
            floor = py_floor_server(kraftd, datasets["kraftd"], ceiling, templates["kraftd"])
            if floor is not None:
                floor.start()
                extra.append(floor)
                datasets["pyfloor"], versions["pyfloor"], ports["pyfloor"] = \
                    datasets["kraftd"], cv, floor.port
                ends["pyfloor"] = floor.info["end_offset"]
                templates["pyfloor"] = templates["kraftd"]
    runs: dict[str, list[dict]] = {n: [] for n in templates}
    order = list(templates)
    try:
        for name in order:  # unmeasured warm-up pass (page cache, allocator, connections)
            consume_range(ports[name], templates[name], 0, ends[name],
                          time_box=ctx.options.get("raw_warmup_s", 3.0))
        all_servers = [srv for _, srv in systems] + extra + ([ceiling] if ceiling else [])
        repeats = ctx.options.get("raw_repeats") or ctx.repeats
        for rep in range(repeats):
            for name in rotated(order, rep):
                waited = settle(all_servers)
                if waited > 1.0:
                    ctx.log(f"  (waited {waited:.1f}s for the servers to go idle)")
                try:
                    res = consume_passes(ports[name], templates[name], ends[name],
                                         time_box=ctx.options.get("raw_time_box"),
                                         min_seconds=ctx.options.get("raw_min_seconds", 0.0))
                except Exception as e:
                    errors[name] = f"{type(e).__name__}: {e}"
                    ctx.log(f"  [{name}] raw consume failed: {errors[name]}")
                    continue
                runs[name].append(res)
                ctx.log(f"  raw consume rep {rep + 1}/{repeats} {name:8s} "
                        f"{res['mb_s']:8.1f} MB/s  ({res['bytes'] / 1e6:.0f} MB in "
                        f"{res['seconds']:.2f}s, {res['sweeps']} sweep(s), {res['fetches']} fetches"
                        f"{'' if res['complete'] else ', time-boxed'})")
    finally:
        for srv in extra:
            srv.stop()
        if ceiling is not None:
            ceiling.stop()
    med = {n: median([r["mb_s"] for r in rs]) for n, rs in runs.items()}
    ratios = {}
    for n in med:
        if n != "ceiling":
            ratios[f"{n}/ceiling"] = ratio(med[n], med.get("ceiling"))
    if "pyfloor" in med:
        ratios["kraftd/pyfloor"] = ratio(med.get("kraftd"), med["pyfloor"])
    if "kraftd" in med and "tansu" in med:
        ratios["kraftd/tansu"] = ratio(med["kraftd"], med["tansu"])
    return dict(name=NAME, fetch_versions=versions, medians_mb_s=med, runs=runs,
                ratios=ratios, errors=errors,
                datasets={n: d.as_dict() for n, d in datasets.items()},
                target={"kraftd/ceiling": TARGET_VS_CEILING},
                verdict={"kraftd/ceiling >= 0.6": verdict(ratios.get("kraftd/ceiling"),
                                                          TARGET_VS_CEILING)})


def report(res: dict) -> str:
    if res.get("error"):
        return f"{TITLE}\n  skipped: {res['error']}"
    med = res["medians_mb_s"]
    ceil = med.get("ceiling")
    rows = []
    for n, rs in res["runs"].items():
        vals = [r["mb_s"] for r in rs]
        rows.append([n, f"v{res['fetch_versions'][n]}", fmt(med[n]),
                     fmt(min(vals)) if vals else "-", fmt(max(vals)) if vals else "-",
                     str(len(vals)), fmt_ratio(ratio(med[n], ceil)) if n != "ceiling" else ""])
    out = [TITLE, table(["system", "fetch", "median MB/s", "min", "max", "runs", "vs ceiling"],
                        rows)]
    r = res["ratios"].get("kraftd/ceiling")
    out.append(f"  target kraftd >= {TARGET_VS_CEILING}x ceiling: {fmt_ratio(r)} -> "
               f"{verdict(r, TARGET_VS_CEILING)}")
    if "kraftd/tansu" in res["ratios"]:
        out.append(f"  kraftd/tansu: {fmt_ratio(res['ratios']['kraftd/tansu'])} (info)")
    if "kraftd/pyfloor" in res["ratios"]:
        out.append(f"  kraftd/pyfloor: {fmt_ratio(res['ratios']['kraftd/pyfloor'])} (info: pyfloor "
                   "= canned header + mmap slice of kraftd's segment, no Kafka logic)")
    for n, e in res.get("errors", {}).items():
        out.append(f"  {n}: ERROR {e}")
    return "\n".join(out)
