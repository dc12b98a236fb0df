"""One Kafka client connection: framing, in-order pipelined responses, backpressure, idle timeout.

The connection knows only the 4-byte length prefix. Decoding, the core and encoding live in the
dispatcher (`Broker.dispatch`), which returns a `ResponseSlot` (or None for acks=0) per frame.
"""
from __future__ import annotations

import asyncio
import os
import socket
import time
from collections import deque
from typing import Any, Protocol as TypingProtocol

import structlog

from .frame_reader import ClaimBudget, FrameReader, FrameSizeError
from .tls import ANONYMOUS, principal_of

log = structlog.get_logger("kraftd.connection")

# Pause reading while the transport buffers more than this (bytes in flight per connection).
WRITE_HIGH_WATER = 1024 * 1024
SEND_BUFFER_BYTES = 4 << 20
WRITE_LOW_WATER = 256 * 1024
# Pause reading while this many responses are owed (a parked fetch holds back later ones).
MAX_PENDING = 128
# Parts shorter than this are joined into one buffer; longer ones are written as-is (no copy).
COALESCE_MAX = 64 * 1024
# A connection handles pipelined frames for at most this long per turn of the event loop, then
# lets the other connections and /metrics have theirs (a client pipelining costly requests,
# Metadata for every topic say, must not hold the loop for seconds).
TURN_BUDGET_S = 0.01
# Each connection reads into a scratch buffer of this size (held only while a read is handled or
# a partial frame waits in it: idle connections hold none); a frame larger than half of it that
# is not complete in one read gets a buffer of its own, which the socket reads into directly.
READ_SCRATCH_BYTES = 32 * 1024
# Client frames announced and not yet arrived, process-wide: within this, a large frame gets a
# buffer of its full size at once; past it, one whose memory follows the bytes that arrive.
CLAIMS = ClaimBudget(64 * 1024 * 1024)


class CloseConnection(Exception):
    """Raised by the dispatcher: drop this connection (malformed or unsupported request).

    str() is the detail for the log; `reason` labels kraftd_disconnects_total and must come
    from a small fixed set (a client's bytes in a label would make one series per request)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class Dispatcher(TypingProtocol):
    def dispatch(self, conn: "KafkaConnection", frame: memoryview) -> "ResponseSlot | None": ...
    def batch_done(self, conn: "KafkaConnection") -> None: ...
    def connection_made(self, conn: "KafkaConnection") -> bool | None: ...  # False: refused
    def connection_lost(self, conn: "KafkaConnection") -> None: ...


class ResponseSlot:
    """A response owed on a connection, in request order. `parts` is None until it is ready."""

    __slots__ = ("conn", "api", "started", "parts")

    def __init__(self, conn: "KafkaConnection", api: str, parts: list | None = None) -> None:
        self.conn = conn
        self.api = api
        self.started = time.perf_counter()
        self.parts = parts


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, *, max_frame_bytes: int, idle_timeout_s: float,
                 metrics: Any = None, tls: bool = False) -> None:
        self._dispatcher = dispatcher
        self._tls = tls  # TLS transports never take the sendfile path (it would bypass the encryption)
        self._max_frame = max_frame_bytes
        self._idle_timeout = idle_timeout_s
        self._metrics = metrics
        self._reader = FrameReader(max_frame_bytes, READ_SCRATCH_BYTES, budget=CLAIMS, keep_scratch=False)
        self._frames: deque = deque()  # complete frames not dispatched yet (paused, or next turn)
        self._pending: deque[ResponseSlot] = deque()
        self._paused: set[str] = set()  # why reading is paused: "write", "pipeline", "shutdown"
        self._unflushed = 0  # bytes of ready responses not yet handed to the transport
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._idle_handle: asyncio.TimerHandle | None = None
        self._last_active = 0.0
        self._closing_reason = ""  # set: close once the answers owed so far are written
        self.peer = ""
        self.peer_host = ""  # the client's address, the key of max_connections_per_ip
        self.parked: set[int] = set()  # tokens of this connection's parked requests (the dispatcher's)
        self.sasl = None  # server.sasl.SaslServerSession, made by the dispatcher on first use
        self.principal = ANONYMOUS  # `User:<certificate subject>` once a TLS client showed one

    @property
    def node_id(self) -> int | None:
        """The node this connection authenticated as (SCRAM with the cluster secret), or None."""
        return self.sasl.node_id if self.sasl is not None else None

    # -- asyncio callbacks -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:  # a 1 MiB fetch response fits the kernel buffer in one writev: no user-space copy
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
            except OSError:
                pass
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_host = peer[0] if isinstance(peer, tuple) else str(peer)
        if self._tls:
            self.principal = principal_of(transport.get_extra_info("ssl_object"))
        self._loop = loop = asyncio.get_running_loop()
        self._last_active = loop.time()
        if self._metrics is not None:
            self._metrics.connections.inc()
            self._metrics.connections_open.inc()
        if self._dispatcher.connection_made(self) is False:
            # Over max_connections or max_connections_per_ip: closed at once, as Kafka does.
            self.abort("connection limit")
            return
        self._idle_handle = loop.call_later(self._idle_timeout, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        if self._metrics is not None:
            self._metrics.connections_open.dec()
        self._closed = True
        self._pending.clear()
        self._frames.clear()
        self._reader.reset()
        self._dispatcher.connection_lost(self)

    def pause_writing(self) -> None:
        self._pause("write")

    def resume_writing(self) -> None:
        self._resume("write")

    # -- reading (asyncio.BufferedProtocol) ---------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self._closed:
            return
        self._last_active = self._loop.time()
        if self._metrics is not None:
            self._metrics.bytes_in.inc(nbytes)
        try:
            self._frames.extend(self._reader.buffer_updated(nbytes))
        except FrameSizeError as exc:
            size, before = exc.args
            self._frames.extend(before)  # the requests ahead of the bad header are answered
            self._process()
            self._size_refused(size)
            return
        self._process()

    def feed(self, data: bytes) -> None:
        """What the transport does with a read of `data` (tests drive a connection with it)."""
        view = memoryview(data)
        while len(view) and not self._closed:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    @property
    def buffered_bytes(self) -> int:
        """Bytes read and not yet dispatched (frames waiting out a pause, a partial frame)."""
        return sum(map(len, self._frames)) + self._reader.buffered_bytes

    def _process(self) -> None:
        try:
            self._dispatch_frames()
            self._dispatcher.batch_done(self)
            self.flush()
        except Exception:
            log.exception("connection failed", peer=self.peer)
            self.abort("internal error")

    # -- framing ---------------------------------------------------------------------------
    def _dispatch_frames(self) -> None:
        """Dispatch the complete frames read so far, until a pause or the turn's budget. Small
        frames are bytes; a large one (a produce request of a MiB) has a buffer of its own
        (within the CLAIMS budget; see server/frame_reader.py), which the socket read straight
        into: decoded fields are views into it, and Produce writes its batches to the log from
        there."""
        started = time.perf_counter()
        frames = self._frames
        while frames:
            if self._paused:
                # Backpressure: requests already read wait here until the client drains its
                # responses; reading is paused, so at most one read's worth waits.
                break
            self._dispatch(memoryview(frames.popleft()))
            if self._closed:
                return
            if self._unflushed >= WRITE_HIGH_WATER:
                self.flush()  # may call pause_writing(), which stops the loop above
            if time.perf_counter() - started > TURN_BUDGET_S and frames and not self._paused:
                self._pause("turn")  # the rest waits for the next turn
                self._loop.call_soon(self._resume, "turn")

    def _size_refused(self, size: int) -> None:
        log.info("closing connection: bad frame size", peer=self.peer, size=size,
                 max=self._max_frame)
        self.abort("frame size")

    def _dispatch(self, frame: memoryview) -> None:
        try:
            slot = self._dispatcher.dispatch(self, frame)
        except CloseConnection as e:
            log.info("closing connection", peer=self.peer, reason=str(e))
            self.close(e.reason)
            return
        if slot is not None:
            if slot.parts is not None:
                self._unflushed += sum(map(len, slot.parts))
            self._pending.append(slot)
            if len(self._pending) >= MAX_PENDING:
                self._pause("pipeline")

    # -- writing ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every response that is ready and not held back by an earlier one, in one go."""
        pending = self._pending
        if self._closed or not pending or pending[0].parts is None:
            return
        out: list = []
        now = time.perf_counter()
        metrics = self._metrics
        while pending and pending[0].parts is not None:
            slot = pending.popleft()
            out.extend(slot.parts)
            if metrics is not None:
                metrics.latency(slot.api).observe(now - slot.started)
        self._unflushed = 0
        nbytes = write_parts(self._transport, out, direct=not self._tls)
        if metrics is not None:
            metrics.bytes_out.inc(nbytes)
        self._last_active = self._loop.time()
        if self._closing_reason and not pending:
            self.close(self._closing_reason)
            return
        if "pipeline" in self._paused and len(pending) <= MAX_PENDING // 2:
            self._resume("pipeline")

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def close(self, reason: str = "") -> None:
        """Close after what is already written has been sent."""
        if not self._closed:
            self._closed = True
            self._count_disconnect(reason)
            self._transport.close()

    def close_after_answers(self, reason: str) -> None:
        """Read no more requests; close once every answer owed so far is written (a failed SASL
        step: the client reads why, then the connection ends, as on Kafka)."""
        self._closing_reason = reason
        self._pause("closing")

    def abort(self, reason: str = "") -> None:
        """Close now, dropping buffered output (protocol violations)."""
        if not self._closed:
            self._closed = True
            self._count_disconnect(reason)
            self._transport.abort()

    def stop_reading(self) -> None:
        """Shutdown: take no new requests, still answer the ones in flight."""
        self._pause("shutdown")

    def _count_disconnect(self, reason: str) -> None:
        if self._metrics is not None and reason:
            self._metrics.disconnects.labels(reason).inc()

    def _pause(self, why: str) -> None:
        if not self._paused and not self._closed:
            self._transport.pause_reading()
        self._paused.add(why)

    def _resume(self, why: str) -> None:
        if why not in self._paused:
            return
        self._paused.discard(why)
        if not self._paused and not self._closed:
            self._transport.resume_reading()
            if self._frames:  # frames read before the pause are still waiting
                self._loop.call_soon(self._resume_buffered)

    def _resume_buffered(self) -> None:
        if not self._closed and not self._paused:
            self._process()

    def _check_idle(self) -> None:
        if self._closed:
            return
        loop = self._loop
        idle_for = loop.time() - self._last_active
        if idle_for >= self._idle_timeout and not self._pending:
            log.info("closing idle connection", peer=self.peer, idle_s=round(idle_for, 1))
            self.close("idle")
            return
        remaining = self._idle_timeout - idle_for
        self._idle_handle = loop.call_later(max(remaining, 0.05) if not self._pending
                                            else self._idle_timeout, self._check_idle)


def write_parts(transport: asyncio.WriteTransport, parts: list, *, direct: bool = True) -> int:
    """Write encoded response parts with as few copies and calls as possible.

    Small bytes are joined; large buffers and storage regions (objects with `.view()`) are
    passed to `writelines` as memoryviews so a 1 MiB fetch payload is never copied here. When
    nothing is queued on the transport, large file regions go out with os.sendfile instead: the
    kernel attaches page-cache pages to the socket without copying them through user space
    (`direct`: never on a TLS transport, whose bytes must go through its encryption).
    """
    buffered = getattr(transport, "get_write_buffer_size", None)
    if direct and _SENDFILE and buffered is not None and buffered() == 0:
        sock = transport.get_extra_info("socket")
        if sock is not None and any(_sendfile_able(p) for p in parts):
            return _write_direct(transport, sock.fileno(), parts)
    chunks: list = []
    small: list = []
    total = 0
    for p in parts:
        if hasattr(p, "view"):
            p = p.view()
        n = len(p)
        total += n
        if n < COALESCE_MAX:
            small.append(p)
            continue
        if small:
            chunks.append(b"".join(small))
            small = []
        chunks.append(p)
    if small:
        chunks.append(b"".join(small) if len(small) > 1 else small[0])
    if len(chunks) == 1:
        transport.write(chunks[0])
    else:
        transport.writelines(chunks)
    return total


# Plaintext sockets only: sendfile would bypass TLS (write_parts' `direct`).
_SENDFILE = hasattr(os, "sendfile")
SENDFILE_MIN = 64 << 10


def _sendfile_able(part) -> bool:
    return hasattr(part, "fileno") and len(part) >= SENDFILE_MIN


def _write_direct(transport, fd: int, parts: list) -> int:
    """Write straight to the socket while it accepts everything; the first short write hands
    the rest, in order, to the transport (which then does the buffering and flow control)."""
    total = 0
    small = bytearray()
    handed_over = False
    for part in parts:
        n = len(part)
        total += n
        if handed_over:
            transport.write(part.view() if hasattr(part, "view") else part)
            continue
        if not _sendfile_able(part):
            small += part.view() if hasattr(part, "view") else part
            continue
        if small and not _send_all(fd, small, transport):
            handed_over = True
            transport.write(part.view())
            continue
        small = bytearray()
        sent = _sendfile_all(fd, part)
        if sent < n:
            handed_over = True
            transport.write(part.view()[sent:])
    if small and not handed_over:
        _send_all(fd, small, transport)
    return total


def _send_all(fd: int, data: bytearray, transport) -> bool:
    """Send `data`; on a short write queue the rest on the transport and return False."""
    view = memoryview(data)
    while view:
        try:
            k = os.write(fd, view)
        except BlockingIOError:
            k = 0
        if k == 0:
            transport.write(view)
            return False
        view = view[k:]
    return True


def _sendfile_all(fd: int, region) -> int:
    offset, left, sent = region.position, len(region), 0
    while left:
        try:
            k = os.sendfile(fd, region.fileno(), offset, left)
        except BlockingIOError:
            break
        if k == 0:
            break
        offset += k
        left -= k
        sent += k
    return sent
