"""Producing the benchmark dataset into a server, as fast as the wire allows.

The dataset is ``records`` key-less records of ``value`` (1 KiB by default), in identical
pre-built batches of ``batch_records`` records, each sent as one pipelined Produce request
(acks=1) on one connection.  The broker assigns offsets, so one pre-encoded request frame
(only the correlation id patched) serves the whole dataset.  Datasets are cached per server
(``server.info['datasets']``) so several benches can share one.
"""

from __future__ import annotations

import collections
import os
import struct
import time
import uuid
from dataclasses import asdict, dataclass

from bench import wire
from bench.servers import HOST, Server


@dataclass
class Dataset:
    topic: str
    topic_id: uuid.UUID | None
    records: int
    start_offset: int
    batch_records: int
    batch_size: int
    value_size: int
    end_offset: int
    produce_seconds: float

    @property
    def payload_bytes(self) -> int:
        """Bytes of record batches on the wire (what fetch MB/s counts)."""
        return (self.records // self.batch_records) * self.batch_size

    @property
    def value_bytes(self) -> int:
        return self.records * self.value_size

    def as_dict(self) -> dict:
        d = asdict(self)
        d["topic_id"] = str(self.topic_id) if self.topic_id else None
        d["payload_bytes"] = self.payload_bytes
        return d


def produce_batches(port: int, topic: str, batch: bytes, count: int, *, acks: int = 1,
                    depth: int = 16, timeout_s: float = 600.0,
                    produce_version: int | None = None) -> tuple[float, int, int]:
    """Send ``count`` Produce requests each carrying ``batch``, ``depth`` in flight.
    Returns (seconds, first base offset, last base offset + records in batch)."""
    with wire.Conn(HOST, port, timeout=60) as c:
        v = c.version(wire.PRODUCE, produce_version)
        frame = bytearray(wire.encode_request(wire.PRODUCE, v, 0, wire.produce_body(
            topic, batch, acks=acks)))
        sock = c.sock
        inflight: collections.deque[int] = collections.deque()
        sent = 0
        done = 0
        last_base = -1
        first_base = -1
        nrec = wire.batch_info(batch)[2] + 1
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        while done < count:
            while sent < count and len(inflight) < depth:
                corr = sent + 1
                struct.pack_into(">i", frame, 8, corr)
                sock.sendall(frame)
                inflight.append(corr)
                sent += 1
            rcorr, resp = wire.decode_response(wire.PRODUCE, v, wire.read_frame(sock))
            exp = inflight.popleft()
            if rcorr != exp:
                raise wire.WireError(f"produce: correlation {rcorr} != {exp}")
            p = resp.responses[0].partition_responses[0]
            if int(p.error_code) != 0:
                raise wire.WireError(f"produce error {int(p.error_code)} at request {done}")
            last_base = max(last_base, int(p.base_offset))
            if first_base < 0:
                first_base = int(p.base_offset)
            done += 1
            if time.monotonic() > deadline:
                raise wire.WireError(f"produce did not finish in {timeout_s}s ({done}/{count})")
        return time.perf_counter() - t0, first_base, last_base + nrec


def high_watermark(port: int, topic: str, topic_id, fetch_version: int | None = None) -> int:
    """Log end offset as seen by a Fetch (ListOffsets is not trusted: see README, Tansu)."""
    with wire.Conn(HOST, port) as c:
        v = c.version(wire.FETCH, fetch_version)
        tpl = wire.FetchTemplate(v, topic, topic_id, 1024)
        c.sock.sendall(tpl.make(1, 0))
        r = wire.parse_fetch(wire.read_frame(c.sock), v)
        if r.error:
            raise wire.WireError(f"fetch error {r.error}")
        return r.high_watermark


def ensure_dataset(server: Server, *, mib: int, value_size: int = 1024, batch_records: int = 16,
                   topic: str = "bench-data", log=print) -> Dataset:
    cache = server.info.setdefault("datasets", {})
    key = (topic, mib, value_size, batch_records)
    if key in cache:
        if isinstance(cache[key], Exception):
            raise cache[key]
        return cache[key]
    try:
        cache[key] = _produce_dataset(server, mib, value_size, batch_records, topic, log)
    except Exception as e:
        cache[key] = e
        raise
    return cache[key]


def _produce_dataset(server: Server, mib: int, value_size: int, batch_records: int, topic: str,
                     log) -> Dataset:
    value = wire.record_value(value_size)
    batch = wire.build_batch(batch_records, value)
    records = mib * (1 << 20) // value_size
    nbatches = max(1, records // batch_records)
    records = nbatches * batch_records
    with wire.Conn(HOST, server.port) as c:
        c.create_topic(topic, 1)
        topic_id = None
        if c.version(wire.FETCH) >= 13:
            topic_id = c.topic_id(topic)
    secs, first, end = produce_batches(server.port, topic, batch, nbatches)
    if end - first != records:
        raise wire.WireError(f"{server.name}: produced {records} records but offsets "
                             f"{first}..{end}")
    # acks=1 may be answered before the high watermark moves (e.g. HW = flushed offset)
    deadline = time.monotonic() + 60
    for _ in range(1200):
        hw = high_watermark(server.port, topic, topic_id)
        if hw >= end or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if hw != end:
        raise wire.WireError(f"{server.name}: produced offsets {first}..{end} but the high "
                             f"watermark is {hw}")
    # push dirty pages (a file-backed server just wrote ~data_mib) to disk now, so writeback
    # does not land in the middle of the first measurement
    t_sync = time.perf_counter()
    os.sync()
    t_sync = time.perf_counter() - t_sync
    ds = Dataset(topic=topic, topic_id=topic_id, records=records, start_offset=first,
                 batch_records=batch_records, batch_size=len(batch), value_size=value_size,
                 end_offset=hw, produce_seconds=secs)
    log(f"  [{server.name}] dataset {topic}: {records} x {value_size} B records in "
        f"{nbatches} batches of {len(batch)} B, produced in {secs:.1f}s "
        f"({ds.payload_bytes / secs / 1e6:.0f} MB/s pipelined raw produce; sync {t_sync:.1f}s)")
    return ds
