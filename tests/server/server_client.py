"""A minimal pipelining Kafka client for the shell's tests (generated codec, asyncio streams)."""
from __future__ import annotations

import asyncio
import struct

from kraftd.protocol import framing
from kraftd.protocol import messages as m


class TestClient:
    __test__ = False  # not a pytest class

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._correlation = 0
        self._sent: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, host: str, port: int) -> "TestClient":
        return cls(*await asyncio.open_connection(host, port))

    def send(self, api_key: int, version: int, request) -> int:
        self._correlation += 1
        header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=self._correlation, client_id="shell-test")
        parts: list = []
        framing.encode_request(header, request, parts)
        self.writer.write(framing.frame_bytes(parts))
        self._sent[self._correlation] = (api_key, version)
        return self._correlation

    def send_raw(self, payload: bytes) -> None:
        self.writer.write(struct.pack(">i", len(payload)) + payload)

    async def recv(self, timeout: float = 5.0):
        """-> (correlation_id, body) of the next response on the wire."""
        size, = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), timeout))
        payload = await asyncio.wait_for(self.reader.readexactly(size), timeout)
        correlation, = struct.unpack_from(">i", payload)
        api_key, version = self._sent.pop(correlation)
        header, body = framing.decode_response(payload, api_key, version)
        return header.correlation_id, body

    async def request(self, api_key: int, version: int, request, timeout: float = 5.0):
        correlation = self.send(api_key, version, request)
        got, body = await self.recv(timeout)
        assert got == correlation
        return body

    async def closed_by_server(self, timeout: float = 3.0) -> bool:
        try:
            return await asyncio.wait_for(self.reader.read(), timeout) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


def produce(acks: int) -> m.ProduceRequest:
    return m.ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name="t", partition_data=[
            m.ProduceRequest.PartitionProduceData(index=0, records=b"")])])


def fetch(max_wait_ms: int) -> m.FetchRequest:
    return m.FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20)
