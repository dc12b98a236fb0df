"""A recording TCP proxy (loopback only) that decodes Kafka frames with kraftd's own codec,
plus small helpers (metrics scrape, bounded waits) for the sessions/epochs end-to-end tests.

The proxy forwards bytes unchanged, in both directions, as soon as they arrive; it parses the
length-prefixed frames on the side.  Requests are matched to responses by correlation id per
connection.  Only the APIs these tests look at (Fetch, ListOffsets, Metadata,
OffsetForLeaderEpoch) are decoded in full; for the others only the fixed header is read.

kraftd is started with `--advertised-listener 127.0.0.1:<proxy port>`, so clients that learn
the broker address from Metadata keep talking through the proxy.  The proxy's port is bound
before the server starts and stays bound across server restarts (kraftd keeps its own port).
"""
from __future__ import annotations

import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from kraftd.protocol import api, framing
from tests.support.prometheus import scrape_unlabelled
from tests.support.waiting import WaitTimeout, wait_until  # noqa: F401

DECODED = {api.FETCH, api.LIST_OFFSETS, api.METADATA, api.OFFSET_FOR_LEADER_EPOCH}
_FIXED = struct.Struct(">hhi")


@dataclass
class Exchange:
    conn: int
    api_key: int
    api_version: int
    correlation_id: int
    t_request: float
    seq: int                       # global arrival order of requests
    client_id: str | None = None
    request: object = None
    response: object = None
    t_response: float | None = None
    decode_error: str | None = None

    @property
    def answered(self) -> bool:
        return self.response is not None


@dataclass
class _Conn:
    cid: int
    client: socket.socket
    upstream: socket.socket
    pending: dict = field(default_factory=dict)  # correlation id -> Exchange


class RecordingProxy:
    def __init__(self) -> None:
        self._listen = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listen.bind(("127.0.0.1", 0))
        self._listen.listen(64)
        self.port = self._listen.getsockname()[1]
        self.upstream_port: int | None = None
        self.exchanges: list[Exchange] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._conns: list[_Conn] = []
        self._next_conn = 0
        self._seq = 0
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True, name="proxy-accept").start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- plumbing ---------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            if self.upstream_port is None:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()  # server down (restarting): the client will retry
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                conn = _Conn(self._next_conn, client, upstream)
                self._next_conn += 1
                self._conns.append(conn)
            threading.Thread(target=self._pump, args=(conn, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(conn, False), daemon=True).start()

    def _pump(self, conn: _Conn, to_server: bool) -> None:
        src, dst = (conn.client, conn.upstream) if to_server else (conn.upstream, conn.client)
        buf = bytearray()
        try:
            while True:
                chunk = src.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 4:
                    size, = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[4:4 + size])
                    del buf[:4 + size]
                    try:
                        # A request is registered before the server can see (and answer) it.
                        (self._on_request if to_server else self._on_response)(conn, frame)
                    except Exception as exc:  # never disturb the forwarding
                        self.errors.append(f"{'request' if to_server else 'response'} parse: {exc!r}")
                    dst.sendall(struct.pack(">i", size) + frame)
        except OSError:
            pass
        finally:
            for s in (conn.client, conn.upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass

    def _on_request(self, conn: _Conn, frame: bytes) -> None:
        api_key, version, corr = _FIXED.unpack_from(frame, 0)
        with self._lock:
            ex = Exchange(conn.cid, api_key, version, corr, time.monotonic(), self._seq)
            self._seq += 1
            self.exchanges.append(ex)
            conn.pending[corr] = ex
        if api_key in DECODED:
            try:
                header, body = framing.decode_request(frame)
                ex.client_id, ex.request = header.client_id, body
            except Exception as exc:
                ex.decode_error = f"request: {exc!r}"
                self.errors.append(ex.decode_error)
        return ex

    def _on_response(self, conn: _Conn, frame: bytes) -> None:
        corr, = struct.unpack_from(">i", frame, 0)
        with self._lock:
            ex = conn.pending.pop(corr, None)
        if ex is None:
            self.errors.append(f"response with unknown correlation id {corr} on conn {conn.cid}")
            return
        ex.t_response = time.monotonic()
        if ex.api_key in DECODED:
            try:
                _, ex.response = framing.decode_response(frame, ex.api_key, ex.api_version)
            except Exception as exc:
                ex.decode_error = f"response: {exc!r}"
                self.errors.append(ex.decode_error)
        else:
            ex.response = True
        return ex

    def close(self) -> None:
        self._closed = True
        try:
            self._listen.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            for s in (conn.client, conn.upstream):
                try:
                    s.close()
                except OSError:
                    pass

    # -- queries ------------------------------------------------------------------------------
    def mark(self) -> int:
        """The sequence number the next request will get (to split the record at an event)."""
        with self._lock:
            return self._seq

    def snapshot(self, api_key: int | None = None, client_id: str | None = None,
                 answered: bool = True) -> list[Exchange]:
        with self._lock:
            out = list(self.exchanges)
        return [e for e in out
                if (api_key is None or e.api_key == api_key)
                and (client_id is None or e.client_id == client_id)
                and (not answered or e.answered)]

    def topic_names(self) -> dict:
        """topic id -> name, from every Metadata response seen (for Fetch v13+ by topic id)."""
        names = {}
        for ex in self.snapshot(api.METADATA):
            for t in ex.response.topics:
                if t.name:
                    names[t.topic_id] = t.name
        return names

    def metadata_epochs(self, topic: str, client_id: str | None = None) -> list[tuple[int, dict]]:
        """[(seq, {partition: leader_epoch})] for every answered Metadata naming `topic`
        (sent by `client_id`, if given)."""
        out = []
        for ex in self.snapshot(api.METADATA, client_id):
            for t in ex.response.topics:
                if t.name == topic and t.error_code == 0:
                    out.append((ex.seq, {p.partition_index: p.leader_epoch for p in t.partitions}))
        return out


# ------------------------------------------------------------------------------------------
# Fetch views
# ------------------------------------------------------------------------------------------

def fetch_request_partitions(ex: Exchange, names: dict | None = None) -> dict:
    """{(topic, partition): FetchPartition} named in a Fetch request."""
    out = {}
    for t in ex.request.topics:
        name = t.topic if ex.api_version < 13 else (names or {}).get(t.topic_id, t.topic_id)
        for p in t.partitions:
            out[(name, p.partition)] = p
    return out


def fetch_forgotten(ex: Exchange, names: dict | None = None) -> set:
    out = set()
    for t in ex.request.forgotten_topics_data or []:
        name = t.topic if ex.api_version < 13 else (names or {}).get(t.topic_id, t.topic_id)
        out.update((name, p) for p in t.partitions)
    return out


def fetch_response_partitions(ex: Exchange, names: dict | None = None) -> dict:
    """{(topic, partition): PartitionData} in a Fetch response."""
    out = {}
    for t in ex.response.responses:
        name = t.topic if ex.api_version < 13 else (names or {}).get(t.topic_id, t.topic_id)
        for p in t.partitions:
            out[(name, p.partition_index)] = p
    return out


def epoch_checks(ex: Exchange, topic: str, names: dict | None = None) -> list[tuple]:
    """[(api_key, partition, current_leader_epoch, error_code)] for the partitions of `topic`
    in an answered Fetch, ListOffsets or OffsetForLeaderEpoch exchange."""
    out = []
    if ex.api_key == api.FETCH:
        if ex.response.error_code != 0:
            return out  # a session-level error (70/71): no partition was looked at
        sent = fetch_request_partitions(ex, names)
        got = fetch_response_partitions(ex, names)
        for (t, p), fp in sent.items():
            if t == topic:
                err = got[(t, p)].error_code if (t, p) in got else ex.response.error_code
                out.append((ex.api_key, p, fp.current_leader_epoch, err))
    elif ex.api_key == api.LIST_OFFSETS:
        errs = {(t.name, p.partition_index): p.error_code for t in ex.response.topics for p in t.partitions}
        for t in ex.request.topics:
            for p in t.partitions:
                if t.name == topic:
                    out.append((ex.api_key, p.partition_index, p.current_leader_epoch,
                                errs.get((t.name, p.partition_index))))
    elif ex.api_key == api.OFFSET_FOR_LEADER_EPOCH:
        errs = {(t.topic, p.partition): p.error_code for t in ex.response.topics for p in t.partitions}
        for t in ex.request.topics:
            for p in t.partitions:
                if t.topic == topic:
                    out.append((ex.api_key, p.partition, p.current_leader_epoch, errs.get((t.topic, p.partition))))
    return out


def describe_fetches(exs: list[Exchange], names: dict | None = None, limit: int = 40) -> str:
    lines = []
    for ex in exs[:limit]:
        req = ex.request
        sent = {k: (p.fetch_offset, p.current_leader_epoch) for k, p in fetch_request_partitions(ex, names).items()}
        resp = ex.response
        got = {k: (p.error_code, p.high_watermark, len(p.records or b""))
               for k, p in fetch_response_partitions(ex, names).items()} if resp is not None else None
        lines.append(f"#{ex.seq} conn{ex.conn} {ex.client_id} v{ex.api_version} "
                     f"req(sid={req.session_id}, ep={req.session_epoch}, parts={sent}, "
                     f"forget={sorted(fetch_forgotten(ex, names))}) -> "
                     + (f"resp(err={resp.error_code}, sid={resp.session_id}, parts={got})" if resp else "-"))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# metrics and waits
# ------------------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")




Timeout = WaitTimeout
scrape = scrape_unlabelled

