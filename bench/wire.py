"""Kafka wire bits for the benchmark clients.

Independent of kraftd's own protocol code on purpose (a bench must not share bugs with the
server it measures):

* cold paths (ApiVersions, CreateTopics, Metadata, ListOffsets, building pre-encoded
  requests) use ``kio`` (an independent codec generated from Apache Kafka's schemas), through
  :func:`build`, which constructs a kio entity for *any* version from a plain dict and simply
  ignores keys the version does not have;
* hot paths are hand-rolled: pre-encoded request frames whose correlation id / fetch offset
  are patched in place (:class:`FetchTemplate`), and :func:`parse_fetch` which decodes only the
  response header and the partition header, then walks record-batch headers to count complete
  batch bytes and find the next fetch offset;
* record batches are built with kafka-python's ``DefaultRecordBatchBuilder``.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import socket
import struct
import time
import typing
import uuid
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

# --------------------------------------------------------------------------------------------
# API keys and versions

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = (
    0, 1, 2, 3, 18, 19, 20)
FETCH_SNAPSHOT = 59

_KIO_MODULE = {
    PRODUCE: "produce",
    FETCH: "fetch",
    LIST_OFFSETS: "list_offsets",
    METADATA: "metadata",
    API_VERSIONS: "api_versions",
    CREATE_TOPICS: "create_topics",
    DELETE_TOPICS: "delete_topics",
    FETCH_SNAPSHOT: "fetch_snapshot",
}
API_NAMES = {
    PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata",
    API_VERSIONS: "ApiVersions", CREATE_TOPICS: "CreateTopics", DELETE_TOPICS: "DeleteTopics",
}

# Versions the bench can speak (bounded by what kio ships and what we tested).  The version
# actually used is the highest one inside both this range and the server's ApiVersions range.
BENCH_RANGE = {
    PRODUCE: (3, 11),
    FETCH: (4, 17),
    LIST_OFFSETS: (1, 9),
    METADATA: (1, 12),
    API_VERSIONS: (0, 0),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    FETCH_SNAPSHOT: (0, 1),
}

FLEXIBLE_MIN = {
    PRODUCE: 9, FETCH: 12, LIST_OFFSETS: 6, METADATA: 9, API_VERSIONS: 3,
    CREATE_TOPICS: 5, DELETE_TOPICS: 4, FETCH_SNAPSHOT: 0,
}

_i32 = struct.Struct(">i")
_i16 = struct.Struct(">h")
_i64 = struct.Struct(">q")


class WireError(Exception):
    pass


class FrameReader:
    """Reads length-prefixed frames into one reusable buffer: the bench client must stay cheap
    (no per-frame allocation), so a returned view is only valid until the next read()."""

    _SIZE = struct.Struct(">i")

    def __init__(self, sock: socket.socket, initial: int = 4 << 20) -> None:
        self._recv_into = sock.recv_into
        self._hdr = bytearray(4)
        self._hmv = memoryview(self._hdr)
        self._buf = bytearray(initial)
        self._mv = memoryview(self._buf)

    def read(self) -> memoryview:
        self._fill(self._hmv, 4)
        (size,) = self._SIZE.unpack(self._hdr)
        if size > len(self._buf):
            self._buf = bytearray(size)
            self._mv = memoryview(self._buf)
        self._fill(self._mv, size)
        return self._mv[:size]

    def _fill(self, view: memoryview, n: int) -> None:
        got = 0
        while got < n:
            k = self._recv_into(view[got:n], n - got)
            if not k:
                raise WireError("connection closed")
            got += k


# --------------------------------------------------------------------------------------------
# kio glue


def _entity_in(module: str, kind: EntityType) -> type:
    mod = importlib.import_module(module)
    for v in vars(mod).values():
        if isinstance(v, type) and getattr(v, "__type__", None) == kind and v.__module__ == mod.__name__:
            return v
    raise LookupError(f"no {kind} entity in {module}")


def kio_classes(api_key: int, version: int) -> tuple[type, type]:
    base = f"kio.schema.{_KIO_MODULE[api_key]}.v{version}"
    return (_entity_in(base + ".request", EntityType.request),
            _entity_in(base + ".response", EntityType.response))


def build(cls: type, data: dict[str, Any]) -> Any:
    """Build a kio entity of class ``cls`` from a dict; keys absent in this version are ignored,
    nested dicts/lists become nested entities, ints become timedeltas where kio wants them."""
    kwargs = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        kwargs[f.name] = _convert(hints[f.name], f, data[f.name])
    return cls(**kwargs)


def _convert(tp: Any, f: dataclasses.Field, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        non_none = [a for a in args if a is not type(None)]
        return _convert(non_none[0], f, value)
    if origin is tuple:
        inner = args[0]
        return tuple(_convert(inner, f, v) for v in value)
    if dataclasses.is_dataclass(tp):
        return build(tp, value)
    kt = f.metadata.get("kafka_type", "")
    if kt.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kt.startswith("datetime") and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
    if kt == "error_code" and isinstance(value, int):
        from kio.schema.errors import ErrorCode
        return ErrorCode(value)
    if kt == "uuid" and isinstance(value, (bytes, str)):
        return uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(value)
    return value


def encode_request(api_key: int, version: int, correlation_id: int, body: dict[str, Any],
                   client_id: str = "kraftd-bench") -> bytes:
    """A complete frame (4-byte size prefix included)."""
    req_cls, _ = kio_classes(api_key, version)
    hdr_cls = req_cls.__header_schema__
    hdr = build(hdr_cls, dict(request_api_key=api_key, request_api_version=version,
                              correlation_id=correlation_id, client_id=client_id))
    buf = io.BytesIO()
    entity_writer(hdr_cls)(buf, hdr)
    entity_writer(req_cls)(buf, build(req_cls, body))
    payload = buf.getvalue()
    return _i32.pack(len(payload)) + payload


def encode_response(api_key: int, version: int, correlation_id: int,
                    body: dict[str, Any]) -> bytes:
    """A complete response frame (used to build the ceiling server's canned response)."""
    _, resp_cls = kio_classes(api_key, version)
    hdr_cls = resp_cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr_cls)(buf, build(hdr_cls, dict(correlation_id=correlation_id)))
    entity_writer(resp_cls)(buf, build(resp_cls, body))
    payload = buf.getvalue()
    return _i32.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, payload: bytes | memoryview) -> tuple[int, Any]:
    """Decode a response frame body (size prefix stripped) -> (correlation_id, response)."""
    _, resp_cls = kio_classes(api_key, version)
    hdr_cls = resp_cls.__header_schema__
    if api_key == API_VERSIONS:  # ApiVersions responses always use header v0
        hdr_cls = importlib.import_module("kio.schema.response_header.v0.header").ResponseHeader
    hdr, n = entity_reader(hdr_cls)(payload, 0)
    resp, _ = entity_reader(resp_cls)(payload, n)
    return int(hdr.correlation_id), resp


# --------------------------------------------------------------------------------------------
# Blocking connection for setup / control operations


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    mv = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(mv[got:], n - got)
        if k == 0:
            raise WireError("connection closed by peer")
        got += k
    return bytes(buf)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = _i32.unpack(recv_exact(sock, 4))
    if size < 4 or size > 1 << 30:
        raise WireError(f"bad frame size {size}")
    return recv_exact(sock, size)


class Conn:
    """A blocking Kafka connection with ApiVersions negotiation (control plane only)."""

    def __init__(self, host: str, port: int, timeout: float = 30.0):
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = 0
        self.server_versions = self._api_versions()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        # Hand-rolled v0 so that negotiation works even against a server kio disagrees with.
        corr = self.next_corr()
        cid = b"kraftd-bench"
        body = struct.pack(">hhih", API_VERSIONS, 0, corr, len(cid)) + cid
        self.sock.sendall(_i32.pack(len(body)) + body)
        r = read_frame(self.sock)
        rcorr, err, n = struct.unpack_from(">ihi", r, 0)
        if rcorr != corr or err != 0:
            raise WireError(f"ApiVersions failed: corr={rcorr} error={err}")
        out = {}
        for i in range(n):
            k, lo, hi = struct.unpack_from(">hhh", r, 10 + 6 * i)
            out[k] = (lo, hi)
        return out

    def version(self, api_key: int, want: int | None = None) -> int:
        """Highest version both sides speak (or ``want`` if given and acceptable)."""
        if api_key not in self.server_versions:
            raise WireError(f"server does not support {API_NAMES.get(api_key, api_key)}")
        slo, shi = self.server_versions[api_key]
        blo, bhi = BENCH_RANGE[api_key]
        lo, hi = max(slo, blo), min(shi, bhi)
        if lo > hi:
            raise WireError(f"no common {API_NAMES.get(api_key, api_key)} version: "
                            f"server {slo}..{shi}, bench {blo}..{bhi}")
        if want is not None:
            if not lo <= want <= hi:
                raise WireError(f"{API_NAMES.get(api_key)} v{want} not in common range {lo}..{hi}")
            return want
        return hi

    def request(self, api_key: int, body: dict[str, Any], version: int | None = None) -> Any:
        v = self.version(api_key, version)
        corr = self.next_corr()
        self.sock.sendall(encode_request(api_key, v, corr, body))
        rcorr, resp = decode_response(api_key, v, read_frame(self.sock))
        if rcorr != corr:
            raise WireError(f"correlation mismatch {rcorr} != {corr}")
        return resp

    # -- control operations -----------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 30.0) -> None:
        """Create ``name`` (idempotent: TOPIC_ALREADY_EXISTS is fine) and wait until Metadata
        shows it with a leader."""
        body = dict(topics=[dict(name=name, num_partitions=partitions, replication_factor=1,
                                 assignments=[], configs=[])],
                    timeout=30000, timeout_ms=30000, validate_only=False)
        resp = self.request(CREATE_TOPICS, body)
        err = int(resp.topics[0].error_code)
        if err not in (0, 36):  # 36 TOPIC_ALREADY_EXISTS
            raise WireError(f"CreateTopics {name}: error {err} {resp.topics[0].error_message}")
        deadline = time.monotonic() + timeout_s
        for _ in range(1000):
            t = self.topic_metadata(name)
            if t is not None and int(t.error_code) == 0 and len(t.partitions) >= partitions \
                    and all(int(p.leader_id) >= 0 for p in t.partitions):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise WireError(f"topic {name} not ready after {timeout_s}s")

    def topic_metadata(self, name: str) -> Any:
        body = dict(topics=[dict(name=name, topic_id=uuid.UUID(int=0))],
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
        resp = self.request(METADATA, body)
        for t in resp.topics:
            if t.name == name:
                return t
        return None

    def topic_id(self, name: str) -> uuid.UUID:
        t = self.topic_metadata(name)
        tid = getattr(t, "topic_id", None) if t is not None else None
        if tid is None or tid.int == 0:
            raise WireError(f"server gave no topic id for {name}")
        return tid

    def delete_topic(self, name: str) -> None:
        try:
            self.request(DELETE_TOPICS, dict(topic_names=[name],
                                             topics=[dict(name=name, topic_id=uuid.UUID(int=0))],
                                             timeout=30000, timeout_ms=30000))
        except Exception:  # best effort (only used to free broker memory)
            pass

    def list_offsets(self, topic: str, partition: int = 0, timestamp: int = -1) -> int:
        body = list_offsets_body(topic, partition, timestamp)
        resp = self.request(LIST_OFFSETS, body)
        p = resp.topics[0].partitions[0]
        if int(p.error_code) != 0:
            raise WireError(f"ListOffsets error {p.error_code}")
        return int(p.offset)


def list_offsets_body(topic: str, partition: int = 0, timestamp: int = -1) -> dict[str, Any]:
    return dict(replica_id=-1, isolation_level=0,
                topics=[dict(name=topic, partitions=[dict(
                    partition_index=partition, current_leader_epoch=-1, timestamp=timestamp,
                    max_num_offsets=1)])],
                timeout_ms=30000)


def metadata_body(topic: str) -> dict[str, Any]:
    return dict(topics=[dict(name=topic, topic_id=uuid.UUID(int=0))],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)


# --------------------------------------------------------------------------------------------
# Record batches


def record_value(size: int = 1024) -> bytes:
    """The one record value used by every bench: printable, no newline (kcat -l friendly)."""
    pat = b"kraftd-bench-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTUVWXYZ-"
    return (pat * (size // len(pat) + 1))[:size]


def build_batch(records: int, value: bytes, timestamp_ms: int | None = None) -> bytes:
    """One uncompressed magic-2 batch with ``records`` key-less records (base offset 0)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 30)
    for i in range(records):
        if b.append(i, timestamp=ts, key=None, value=value, headers=[]) is None:
            raise WireError("batch builder refused a record")
    return bytes(b.build())


BATCH_HEADER = 61


def batch_info(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int, int]:
    """(base_offset, size, last_offset_delta) of the batch at ``pos``."""
    base, blen = struct.unpack_from(">qi", buf, pos)
    (lod,) = _i32.unpack_from(buf, pos + 23)
    return base, blen + 12, lod


# --------------------------------------------------------------------------------------------
# Hot path: fetch


def produce_body(topic: str, batch: bytes, acks: int = 1, partition: int = 0) -> dict[str, Any]:
    return dict(transactional_id=None, acks=acks, timeout=30000, timeout_ms=30000,
                topic_data=[dict(name=topic, partition_data=[dict(index=partition,
                                                                  records=batch)])])


def fetch_body(topic: str, topic_id: uuid.UUID | None, offset: int, partition_max_bytes: int,
               max_wait_ms: int = 500, partition: int = 0,
               max_bytes: int | None = None) -> dict[str, Any]:
    """Request-level max_bytes defaults to the partition max (Tansu ignores the latter)."""
    return dict(
        replica_id=-1, max_wait=max_wait_ms, min_bytes=1,
        max_bytes=partition_max_bytes if max_bytes is None else max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
        replica_state=dict(replica_id=-1, replica_epoch=-1),
        topics=[dict(topic=topic, topic_id=topic_id or uuid.UUID(int=0), partitions=[dict(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[])


_SENTINEL_OFFSET = 0x5EEDC0DE5EEDC0DE

# Tansu answers a Fetch with max_wait_ms=0 with an empty topic list even when data is there,
# and with a large in-memory log a fetch can take >100 ms to assemble and comes back empty if
# that exceeds max_wait; so the bench waits up to 500 ms (min_bytes=1: data returns at once).
DEFAULT_MAX_WAIT_MS = 500


class FetchTemplate:
    """A pre-encoded Fetch request frame: only the correlation id and the fetch offset are
    patched per request (a few bytes), so building a request costs ~nothing."""

    def __init__(self, version: int, topic: str, topic_id: uuid.UUID | None,
                 partition_max_bytes: int, max_wait_ms: int = DEFAULT_MAX_WAIT_MS):
        frame = encode_request(FETCH, version, 0x7EADBEEF, fetch_body(
            topic, topic_id, _SENTINEL_OFFSET, partition_max_bytes, max_wait_ms))
        self.version = version
        self.frame = bytearray(frame)
        self.offset_pos = frame.index(_i64.pack(_SENTINEL_OFFSET))
        self.corr_pos = 8  # size(4) api_key(2) api_version(2)
        assert _i32.unpack_from(frame, self.corr_pos)[0] == 0x7EADBEEF

    def make(self, corr: int, offset: int) -> bytes:
        _i32.pack_into(self.frame, self.corr_pos, corr)
        _i64.pack_into(self.frame, self.offset_pos, offset)
        return bytes(self.frame)


def _uvarint(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    for _ in range(5):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise WireError("bad varint")


def _skip_tagged(buf: memoryview | bytes, pos: int) -> int:
    n, pos = _uvarint(buf, pos)
    for _ in range(n):
        _, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


class FetchResult:
    __slots__ = ("corr", "error", "high_watermark", "records_size", "useful", "next_offset",
                 "first_offset")

    def __init__(self) -> None:
        self.corr = 0
        self.error = 0
        self.high_watermark = -1
        self.records_size = 0
        self.useful = 0
        self.next_offset = -1
        self.first_offset = -1


def _array_len(buf, pos: int, flex: bool) -> tuple[int, int]:
    """An array's element count: compact (uvarint, +1) in flexible versions, else int32."""
    if flex:
        n, pos = _uvarint(buf, pos)
        return n - 1, pos
    return _i32.unpack_from(buf, pos)[0], pos + 4


def parse_fetch(buf: memoryview | bytes, version: int) -> FetchResult:
    """Decode the response header and the (single) partition header of a Fetch response frame
    body, then walk the record-batch headers: ``useful`` counts complete batches only (a
    trailing partial batch, which Kafka brokers may send, is not counted)."""
    r = FetchResult()
    flex = version >= 12
    (r.corr,) = _i32.unpack_from(buf, 0)
    pos = 4
    if flex:
        pos = _skip_tagged(buf, pos)
    pos += 4  # throttle_time_ms (v1+)
    if version >= 7:
        (err,) = _i16.unpack_from(buf, pos)
        pos += 6  # error_code, session_id
        if err:
            r.error = err
            return r
    ntopics, pos = _array_len(buf, pos, flex)
    if ntopics < 1:
        r.error = -1
        return r
    if version >= 13:
        pos += 16
    elif flex:
        n, pos = _uvarint(buf, pos)
        pos += n - 1
    else:
        (n,) = _i16.unpack_from(buf, pos)
        pos += 2 + n
    nparts, pos = _array_len(buf, pos, flex)
    if nparts < 1:
        r.error = -1
        return r
    _, r.error, r.high_watermark = struct.unpack_from(">ihq", buf, pos)
    pos += 14
    pos += 8  # last_stable_offset (v4+)
    if version >= 5:
        pos += 8  # log_start_offset
    # aborted_transactions (nullable array, v4+)
    if flex:
        n, pos = _uvarint(buf, pos)
        for _ in range(max(n - 1, 0)):
            pos = _skip_tagged(buf, pos + 16)
    else:
        (n,) = _i32.unpack_from(buf, pos)
        pos += 4 + 16 * max(n, 0)
    if version >= 11:
        pos += 4  # preferred_read_replica
    if flex:
        n, pos = _uvarint(buf, pos)
        size = n - 1 if n > 0 else 0
    else:
        (size,) = _i32.unpack_from(buf, pos)
        pos += 4
        size = max(size, 0)
    r.records_size = size
    end = pos + size
    useful = 0
    nxt = -1
    first = -1
    unpack_hdr = _BATCH_HDR.unpack_from
    for _ in range(1 << 20):
        if pos + BATCH_HEADER > end:
            break
        base, blen, _epoch, _magic, _crc, _attr, lod = unpack_hdr(buf, pos)
        bsize = blen + 12
        if pos + bsize > end:
            break
        if first < 0:
            first = base
        useful += bsize
        nxt = base + lod + 1
        pos += bsize
    r.useful = useful
    r.next_offset = nxt
    r.first_offset = first
    return r


_BATCH_HDR = struct.Struct(">qiibIhi")
