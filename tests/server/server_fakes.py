"""Test doubles for the asyncio shell: a recording transport and a scriptable dispatcher."""
from __future__ import annotations

import struct

from kraftd.server.connection import CloseConnection, KafkaConnection, ResponseSlot


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class FakeTransport:
    """Records what the connection does to its transport (no socket)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []  # one entry per write()/writelines() call
        self.closed = self.aborted = False
        self.reading_paused = False
        self.pause_calls = self.resume_calls = 0
        self.limits = None

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks) -> None:
        self.writes.append(b"".join(bytes(c) for c in chunks))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def pause_reading(self) -> None:
        self.reading_paused = True
        self.pause_calls += 1

    def resume_reading(self) -> None:
        self.reading_paused = False
        self.resume_calls += 1

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        self.limits = (high, low)

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    @property
    def output(self) -> bytes:
        return b"".join(self.writes)


class ScriptedDispatcher:
    """Decides per frame from its first byte:
    R<body>: respond now with frame(body); P<token>: park under that token; N: no response;
    X: close the connection; E: raise (a bug); B<n>: respond with n bytes of 'b' (a region).
    """

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.parked: dict[str, ResponseSlot] = {}
        self.connections: list[KafkaConnection] = []
        self.batches = 0

    def connection_made(self, conn) -> None:
        self.connections.append(conn)

    def connection_lost(self, conn) -> None:
        pass

    def batch_done(self, conn) -> None:
        self.batches += 1

    def dispatch(self, conn, f: memoryview):
        data = bytes(f)
        self.frames.append(data)
        kind, rest = data[:1], data[1:]
        if kind == b"R":
            return ResponseSlot(conn, "test", [frame(rest)])
        if kind == b"B":
            n = int(rest)
            return ResponseSlot(conn, "test", [struct.pack(">i", n), Region(b"b" * n)])
        if kind == b"P":
            slot = self.parked[rest.decode()] = ResponseSlot(conn, "test")
            return slot
        if kind == b"N":
            return None
        if kind == b"X":
            raise CloseConnection("scripted close")
        raise RuntimeError("scripted bug")

    def complete(self, token: str, body: bytes) -> None:
        slot = self.parked.pop(token)
        slot.parts = [frame(body)]
        slot.conn.flush()


class Region:
    """Stands in for a storage FileRegion: has len() and view()."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def view(self) -> memoryview:
        return memoryview(self._data)


def split_frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        out.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return out
