"""A TCP proxy for fault-injection tests: one loopback listener forwarding to one target, with
switches for a cut link and for a one-way blackhole. Threads only, so synchronous tests can use it.

    proxy = TcpProxy(("127.0.0.1", 9092))   # clients connect to proxy.address
    proxy.cut()                    # existing connections reset, new ones reset at once
    proxy.cut_one_way("forward")   # client→target bytes are read and dropped; the client sees a stall
    proxy.heal()                   # new connections work again
    proxy.close()

Dropping bytes breaks a stream's framing, so `heal()` resets every connection that lost bytes
while blackholed: the peers reconnect, as they would after a real partition outlasting their
timeouts. Connections that lost nothing carry on.
"""
from __future__ import annotations

import socket
import struct
import threading

DIRECTIONS = ("forward", "backward")  # forward: client→target; backward: target→client
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST


def _reset(sock: socket.socket) -> None:
    """Abortive close: the peer sees a reset at once, and a thread blocked in recv wakes up."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


class _Link:
    """One proxied connection: the accepted client socket and our socket to the target."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.lost_bytes = False  # some bytes were blackholed: the stream is no longer intact
        self._finished: set[str] = set()  # directions whose sender closed its side
        self._closed = False
        self._lock = threading.Lock()

    def finish(self, direction: str) -> bool:
        """One direction reached end of stream; True when both have (the link is done)."""
        with self._lock:
            self._finished.add(direction)
            return len(self._finished) == 2

    def close(self, *, graceful: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for sock in (self.client, self.upstream):
            sock.close() if graceful else _reset(sock)


class TcpProxy:
    def __init__(self, target: tuple[str, int], *, host: str = "127.0.0.1", connect_timeout: float = 5.0) -> None:
        self.target = target
        self.connect_timeout = connect_timeout
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.2)  # how often the accept loop notices close()
        self.host, self.port = self._listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._cut = False
        self._blackholed: set[str] = set()
        self._links: set[_Link] = set()
        self._closed = False
        self.accepted = 0  # connections accepted, refused ones included
        self._accept_thread = threading.Thread(target=self._accept_loop, daemon=True,
                                               name=f"tcp-proxy:{self.port}->{target[1]}")
        self._accept_thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        state = "cut" if self._cut else ("blackholed " + ",".join(sorted(self._blackholed)) if self._blackholed
                                         else "open")
        return f"<TcpProxy {self.address} -> {self.target[0]}:{self.target[1]} {state}>"

    # -- switches ----------------------------------------------------------------------------
    def cut(self) -> None:
        """Drop both directions: reset every connection, and reset new ones as they arrive."""
        with self._lock:
            self._cut = True
            links, self._links = self._links, set()
        for link in links:
            link.close()

    def cut_one_way(self, direction: str) -> None:
        """Blackhole one direction ("forward": client→target, "backward": target→client) on
        existing and new connections: bytes are read and dropped, sockets stay open. Repeat with
        the other direction for a silent two-way partition."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        with self._lock:
            self._blackholed.add(direction)

    def heal(self) -> None:
        """Forward everything again; connections that lost bytes meanwhile are reset."""
        with self._lock:
            self._cut = False
            self._blackholed.clear()
            broken = {link for link in self._links if link.lost_bytes}
            self._links -= broken
        for link in broken:
            link.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            links, self._links = self._links, set()
        for link in links:
            link.close()
        self._accept_thread.join(5)
        self._listener.close()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def connections(self) -> int:
        """Connections being forwarded now."""
        with self._lock:
            return len(self._links)

    # -- forwarding --------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            client.settimeout(None)
            if self._cut or self._closed:
                _reset(client)
                continue
            threading.Thread(target=self._open_link, args=(client,), daemon=True).start()

    def _open_link(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=self.connect_timeout)
        except OSError:
            _reset(client)  # the target is down: the client sees what it would have seen
            return
        upstream.settimeout(None)
        link = _Link(client, upstream)
        with self._lock:
            if self._cut or self._closed:
                link.close()
                return
            self._links.add(link)
        threading.Thread(target=self._pump, args=(link, client, upstream, "forward"), daemon=True).start()
        threading.Thread(target=self._pump, args=(link, upstream, client, "backward"), daemon=True).start()

    def _pump(self, link: _Link, source: socket.socket, sink: socket.socket, direction: str) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if direction in self._blackholed:
                    link.lost_bytes = True
                    continue
                sink.sendall(data)
            if direction in self._blackholed:  # the end of stream is lost too
                link.lost_bytes = True
                return
            sink.shutdown(socket.SHUT_WR)  # pass the half-close on; the other direction goes on
            if not link.finish(direction):
                return
            graceful = True
        except OSError:  # reset by either side, or by cut()/heal()/close()
            graceful = False
        with self._lock:
            self._links.discard(link)
        link.close(graceful=graceful)
