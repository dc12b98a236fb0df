"""TcpProxy against a real echo server: bytes flow, cut resets, a one-way blackhole stalls one
direction only, heal restores new connections (and resets the ones that lost bytes)."""
import socket
import threading

import pytest

from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_until

STALL = 0.5  # how long "nothing arrives" is watched for


class EchoServer:
    """Echoes every byte back and records what each connection received."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = self.listener.getsockname()[:2]
        self.received: list[bytearray] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            got = bytearray()
            self.received.append(got)
            threading.Thread(target=self._echo, args=(conn, got), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket, got: bytearray) -> None:
        with conn:
            try:
                while data := conn.recv(65536):
                    got += data
                    conn.sendall(data)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (Linux)
        except OSError:
            pass
        self.listener.close()


@pytest.fixture
def echo():
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo):
    with TcpProxy(echo.address) as p:
        yield p


def _connect(proxy: TcpProxy) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=5)


def _echoes(sock: socket.socket, payload: bytes) -> bool:
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            return False
        got += chunk
    return got == payload


def _is_dead(sock: socket.socket) -> bool:
    """The proxy closed this connection: EOF or a reset, not a stall."""
    sock.settimeout(5)
    try:
        sock.sendall(b"x")
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:  # still open: it stalls
        return False


def _refused(proxy: TcpProxy) -> bool:
    """A new connection is reset at once (the kernel accepts it, the proxy resets it; the reset
    may already arrive during connect)."""
    try:
        sock = _connect(proxy)
    except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
        return True
    with sock:
        return _is_dead(sock)


def _stalls(sock: socket.socket) -> bool:
    """Nothing comes back for STALL seconds, and the connection is still open."""
    sock.settimeout(STALL)
    try:
        sock.recv(1)
    except TimeoutError:
        return True
    return False


def test_bytes_flow_both_ways_on_several_connections(proxy):
    a, b = _connect(proxy), _connect(proxy)
    with a, b:
        assert _echoes(a, b"hello")
        assert _echoes(b, bytes(range(256)) * 1000)  # more than one recv's worth
        assert _echoes(a, b"again")
    assert proxy.accepted == 2


def test_a_half_close_is_passed_on(proxy):
    with _connect(proxy) as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        assert got == b"last words"
    wait_until(lambda: proxy.connections == 0, 5, "the finished link to be dropped")


def test_cut_resets_existing_connections_and_new_ones_until_healed(proxy):
    with _connect(proxy) as old:
        assert _echoes(old, b"before")
        proxy.cut()
        assert _is_dead(old)
    assert _refused(proxy)
    proxy.heal()
    with _connect(proxy) as new:
        assert _echoes(new, b"after")


def test_forward_blackhole_stalls_requests_and_the_target_sees_nothing(proxy, echo):
    with _connect(proxy) as sock:
        assert _echoes(sock, b"before")
        proxy.cut_one_way("forward")
        sock.sendall(b"lost")
        assert _stalls(sock)
        assert bytes(echo.received[0]) == b"before"
        with _connect(proxy) as new:  # new connections are blackholed too, not refused
            new.sendall(b"also lost")
            assert _stalls(new)
        assert all(bytes(r) == b"" for r in echo.received[1:])
        proxy.heal()
        assert _is_dead(sock)  # it lost bytes: its stream cannot be trusted, it is reset
    with _connect(proxy) as healed:
        assert _echoes(healed, b"after")


def test_backward_blackhole_delivers_requests_but_drops_replies(proxy, echo):
    with _connect(proxy) as sock:
        assert _echoes(sock, b"before")
        proxy.cut_one_way("backward")
        sock.sendall(b"delivered")
        wait_until(lambda: bytes(echo.received[0]) == b"beforedelivered", 5, "the request to reach the target")
        assert _stalls(sock)
        proxy.heal()
        assert _is_dead(sock)
    with _connect(proxy) as healed:
        assert _echoes(healed, b"after")


def test_heal_keeps_connections_that_lost_nothing(proxy):
    with _connect(proxy) as idle:
        assert _echoes(idle, b"before")
        proxy.cut_one_way("forward")
        proxy.heal()
        assert _echoes(idle, b"still here")


def test_a_down_target_resets_the_client(echo):
    echo.close()
    with TcpProxy(echo.address) as p:
        assert _refused(p)


def test_close_stops_listening(echo):
    p = TcpProxy(echo.address)
    sock = _connect(p)
    assert _echoes(sock, b"x")
    p.close()
    assert _is_dead(sock)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((p.host, p.port), timeout=5)


def test_unknown_direction_is_refused(proxy):
    with pytest.raises(ValueError):
        proxy.cut_one_way("sideways")
