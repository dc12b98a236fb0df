"""Shared helpers for robustness tests: a raw blocking Kafka client on our codec, a
well-behaved background client that checks every answer, and server-log checks."""
from __future__ import annotations

import re
import socket
import struct
import threading
import time
from pathlib import Path

from kraftd.protocol import messages as m
from kraftd.protocol.api import FETCH, METADATA, PRODUCE
from kraftd.protocol.framing import decode_response, encode_request, frame_bytes
from kraftd.protocol.records import build_batch, iter_batch_headers, decode_records
from tests.support.waiting import poll_until

PRODUCE_V = 9   # flexible, topic names
FETCH_V = 12    # flexible, topic names (v13+ uses topic ids)


class ConnectionClosed(Exception):
    pass


def encode(api_key: int, version: int, request, correlation_id: int = 1,
           client_id: str | None = "robust") -> bytes:
    header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                             correlation_id=correlation_id, client_id=client_id)
    parts: list = []
    encode_request(header, request, parts)
    return frame_bytes(parts)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionClosed(f"closed after {len(buf)}/{n} bytes")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    size, = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


class RawClient:
    """Blocking one-request-at-a-time client speaking through kraftd.protocol."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def request(self, api_key: int, version: int, request):
        self.correlation += 1
        cid = self.correlation
        self.sock.sendall(encode(api_key, version, request, cid))
        header, body = decode_response(memoryview(recv_frame(self.sock)), api_key, version)
        assert header.correlation_id == cid, (header.correlation_id, cid)
        return body

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- convenience ------------------------------------------------------------------------
    def produce(self, topic: str, batch: bytes, acks: int = -1, partition: int = 0,
                version: int = PRODUCE_V):
        req = m.ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[
            m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
                m.ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
        resp = self.request(PRODUCE, version, req)
        return resp.responses[0].partition_responses[0]

    def fetch(self, topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1,
              max_bytes: int = 1 << 20, partition: int = 0):
        req = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                             max_bytes=max_bytes, isolation_level=0, session_id=0,
                             session_epoch=-1, topics=[
            m.FetchRequest.FetchTopic(topic=topic, partitions=[
                m.FetchRequest.FetchPartition(partition=partition, fetch_offset=offset,
                                              current_leader_epoch=-1, last_fetched_epoch=-1,
                                              log_start_offset=-1, partition_max_bytes=max_bytes)])])
        resp = self.request(FETCH, FETCH_V, req)
        assert resp.error_code == 0, resp
        return resp.responses[0].partitions[0]

    def read_all(self, topic: str, start: int = 0, partition: int = 0) -> list:
        """Every data record from `start` to the high watermark: list of (offset, key, value).
        Control batches (leader changes) are skipped like a client does."""
        out = []
        offset = start
        for _ in range(10_000):
            p = self.fetch(topic, offset, partition=partition)
            assert p.error_code == 0, p
            nxt = next_offset_of(p.records)
            if nxt is None or nxt <= offset:
                assert offset >= p.high_watermark, (offset, p.high_watermark)
                return out
            out.extend(r for r in records_of(p.records) if r[0] >= offset)
            offset = nxt
        raise AssertionError("read_all did not converge")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        # auto-create via a Metadata request (allow_auto_topic_creation)
        req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                                allow_auto_topic_creation=True)
        self.request(METADATA, 9, req)


def records_of(buf) -> list:
    if buf is None:
        return []
    out = []
    mv = memoryview(bytes(buf))
    for pos, h in iter_batch_headers(mv):
        if h.is_control:
            continue
        for r in decode_records(mv[pos:pos + h.size], h):
            out.append((r.offset, None if r.key is None else bytes(r.key),
                        None if r.value is None else bytes(r.value)))
    return out


def next_offset_of(buf) -> int | None:
    """The offset after the last complete batch in `buf` (control batches included)."""
    if buf is None:
        return None
    nxt = None
    for _, h in iter_batch_headers(memoryview(bytes(buf))):
        nxt = h.last_offset + 1
    return nxt


def batch_of(values: list[bytes], key: bytes | None = None) -> bytes:
    ts = int(time.time() * 1000)
    return build_batch([(key, v, [], ts) for v in values])


class GoodClient(threading.Thread):
    """A well-behaved client on its own connection: produce (acks=-1) a batch, then fetch it
    back, forever; every request must succeed with exactly the data produced. Failures are
    collected in `errors` (the thread stops at the first one)."""

    def __init__(self, port: int, topic: str = "good-topic", batch_size: int = 3,
                 pause_s: float = 0.0) -> None:
        super().__init__(daemon=True, name="good-client")
        self.port = port
        self.topic = topic
        self.batch_size = batch_size
        self.pause_s = pause_s
        self.stop_event = threading.Event()
        self.errors: list[str] = []
        self.produced: list[tuple[int, bytes]] = []  # (offset, value) acknowledged
        self.rounds = 0
        self.max_latency = 0.0
        self.slow: list[tuple[str, float]] = []  # (UTC time, seconds) of rounds over 0.5 s

    def run(self) -> None:
        try:
            client = RawClient(self.port, timeout=15.0)
        except OSError as e:
            self.errors.append(f"connect: {e!r}")
            return
        try:
            seq = 0
            while not self.stop_event.is_set():
                values = [f"good-{seq + i}".encode() for i in range(self.batch_size)]
                seq += self.batch_size
                t0 = time.monotonic()
                pr = client.produce(self.topic, batch_of(values))
                if pr.error_code != 0:
                    self.errors.append(f"produce error {pr.error_code}: {pr}")
                    return
                base = pr.base_offset
                expected_base = self.produced[-1][0] + 1 if self.produced else base
                if base != expected_base:
                    self.errors.append(f"produce base offset {base}, expected {expected_base}")
                    return
                got = client.fetch(self.topic, base)
                recs = [r for r in records_of(got.records) if r[0] >= base][:len(values)]
                want = [(base + i, None, v) for i, v in enumerate(values)]
                if got.error_code != 0 or recs != want:
                    self.errors.append(f"fetch at {base}: error {got.error_code}, got {recs}, "
                                       f"want {want}")
                    return
                self.produced.extend((base + i, v) for i, v in enumerate(values))
                took = time.monotonic() - t0
                self.max_latency = max(self.max_latency, took)
                if took > 0.5:
                    self.slow.append((time.strftime("%H:%M:%S", time.gmtime()), round(took, 2)))
                self.rounds += 1
                if self.pause_s:
                    time.sleep(self.pause_s)
        except Exception as e:  # noqa: BLE001 — any failure of the good client is a finding
            self.errors.append(f"good client failed: {e!r}")
        finally:
            client.close()

    def finish(self, timeout: float = 20.0) -> None:
        self.stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), "good client did not stop"


# -- server log checks ------------------------------------------------------------------------
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# Log events that mean the server itself failed (not a peer's fault).
_BAD_EVENTS = ("request handler failed", "connection failed", "encoding a completed response",
               "write failed", "node.poll failed", "fsync failed", "Exception in callback",
               "Task exception was never retrieved", "Unhandled error")


def server_failures(lines: list[str]) -> list[str]:
    """Lines (with a little context) showing an unhandled exception or an internal error.

    Peer faults are logged by the server at info level without a traceback ("closing
    connection: malformed request ...", "bad frame size", "closing idle connection"), so
    any traceback, or any of the internal-error events above, counts as a server failure."""
    found = []
    for i, line in enumerate(lines):
        if _TRACEBACK.search(line) or any(ev in line for ev in _BAD_EVENTS):
            found.append("\n".join(lines[max(0, i - 2):i + 30]))
    return found


def first_traceback(lines: list[str]) -> str:
    f = server_failures(lines)
    return f[0] if f else ""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def segment_files(data_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((Path(data_dir) / f"{topic}-{partition}").glob("*.log"))




# -- probing with raw bytes -------------------------------------------------------------------
SENTINEL_CID = 0x5EED


def sentinel_frame(cid: int = SENTINEL_CID) -> bytes:
    return encode(18, 3, m.ApiVersionsRequest(client_software_name="robust",
                                             client_software_version="1"), cid)


def split_frames(data: bytes, max_bytes: int) -> tuple[str, list[bytes]]:
    """What the server's framing makes of `data`: ("close", frames before a bad size),
    ("wait", complete frames before an incomplete one) or ("complete", frames)."""
    frames = []
    pos = 0
    while len(data) - pos >= 4:
        size, = struct.unpack_from(">i", data, pos)
        if not 0 <= size <= max_bytes:
            return "close", frames
        if len(data) - pos - 4 < size:
            return "wait", frames
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return ("complete" if pos == len(data) else "wait"), frames


class Probe:
    """Outcome of sending bytes followed by a well-formed ApiVersions 'sentinel'."""

    def __init__(self, closed: bool, cids: list[int], frames: list[bytes],
                 waiting: bool = False) -> None:
        self.closed = closed        # the server closed the connection (before the sentinel)
        self.cids = cids            # correlation ids of the responses received before it
        self.frames = frames
        self.waiting = waiting      # the sentinel was swallowed by an incomplete frame

    def __repr__(self) -> str:
        return f"Probe(closed={self.closed}, waiting={self.waiting}, cids={self.cids})"


def probe(port: int, payload: bytes, timeout: float = 5.0, sock: socket.socket | None = None,
          max_bytes: int | None = None) -> Probe:
    """Send `payload` + a sentinel request; read until the sentinel's answer or EOF.

    With `max_bytes` (the server's socket_request_max_bytes) a payload whose framing leaves
    the server legitimately waiting for more bytes is detected up front: then we only read
    for a short moment (responses to the complete frames, or a close)."""
    own = sock is None
    if own:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = payload + sentinel_frame()
    waiting = max_bytes is not None and split_frames(data, max_bytes)[0] == "wait"
    sock.settimeout(0.05 if waiting else timeout)
    cids, frames = [], []
    try:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return Probe(True, cids, frames)
        while True:
            try:
                frame = recv_frame(sock)
            except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
                return Probe(True, cids, frames)
            except socket.timeout:
                if waiting:
                    return Probe(False, cids, frames, waiting=True)
                raise
            cid, = struct.unpack_from(">i", frame, 0)
            if cid == SENTINEL_CID:
                return Probe(False, cids, frames)
            cids.append(cid)
            frames.append(frame)
    finally:
        if own:
            sock.close()


def failure_signatures(lines: list[str]) -> dict[str, int]:
    """Distinct internal failures: 'event | last frame | exception line' -> count."""
    out: dict[str, int] = {}
    for i, line in enumerate(lines):
        if not any(ev in line for ev in _BAD_EVENTS) and not _TRACEBACK.search(line):
            continue
        if _TRACEBACK.search(line) and i > 0 and any(ev in lines[i - 1] for ev in _BAD_EVENTS):
            continue  # the traceback of the event on the previous line: counted there
        event = re.sub(r"^\S+\s+\S*\s*\[[^\]]*\]\s*", "", line).split("  ")[0].strip()
        frame, exc = "", ""
        for j in range(i + 1, min(i + 200, len(lines))):
            nxt = lines[j]
            if nxt.strip().startswith("File "):
                frame = nxt.strip()
            elif frame and nxt and not nxt.startswith(" ") and not nxt.startswith("Traceback"):
                exc = nxt.strip()
                break
        exc = re.sub(r"\d+", "N", exc)
        key = f"{event} | {frame} | {exc}"
        out[key] = out.get(key, 0) + 1
    return out


wait_until = poll_until  # these tests assert on the boolean themselves


def check_healthy(server, good: "GoodClient") -> None:
    """After the abuse: the good client still makes progress, the server is alive, everything
    the good client produced reads back exactly, and the log shows no internal failure."""
    rounds = good.rounds
    assert wait_until(lambda: good.rounds >= rounds + 3 or good.errors, 10)
    good.finish()
    assert not good.errors, good.errors
    assert server.alive(), "server died:\n" + "\n".join(server.log_lines[-40:])
    c = RawClient(server.port)
    try:
        got = [(o, v) for o, _, v in c.read_all(good.topic)]
    finally:
        c.close()
    assert got == good.produced, "the good client's data does not read back exactly"
    failures = server_failures(server.log_lines)
    kinds = failure_signatures(server.log_lines)
    assert not failures, (f"{len(failures)} internal failures in the server log, by kind:\n"
                          + "\n".join(f"  {n} x {k}" for k, n in kinds.items())
                          + "\nfirst:\n" + failures[0])
