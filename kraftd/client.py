"""Public client API: `StateReader` materialises a snapshot-policy partition (KIP-630).

It takes the path a follower takes: Fetch from its offset; when the leader answers with a
SnapshotId (the offset is below the log start), download that snapshot with FetchSnapshot in
chunks into `<name>.checkpoint.part` (resuming at the file's size after an interruption),
validate it, rename it, load it, then tail the log with Fetch from the snapshot's end offset.

    with StateReader("127.0.0.1:9092", "config", 0, "./state") as reader:
        reader.sync()
        print(reader.state[b"some-key"])
"""
from __future__ import annotations

import os
import socket
import ssl
import struct
import time

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode, KafkaProtocolError
from kraftd.protocol.framing import decode_response, encode_request, frame_bytes
from kraftd.protocol.records import iter_batch_headers
from kraftd.protocol.sasl_client import SaslClientExchange
from kraftd.quorum.snapshots.state_machine import KeyValueStateMachine
from kraftd.storage.atomic_file import fsync_dir
from kraftd.storage.snapshots import (CorruptSnapshotError, SnapshotId, SnapshotReader, parse_snapshot_filename,
                                      snapshot_filename)

__all__ = ["StateReader", "WireClient", "StateReaderError"]

FETCH_VERSION = 12
FETCH_SNAPSHOT_VERSION = 0
_SIZE = struct.Struct(">i")


class StateReaderError(Exception):
    pass


class _SnapshotGone(Exception):
    """The leader deleted the snapshot being downloaded (a newer one replaced it)."""


class WireClient:
    """A minimal blocking Kafka-protocol connection (one request in flight)."""

    def __init__(self, bootstrap: str, *, client_id: str = "kraftd-client", timeout: float = 30.0,
                 tls: ssl.SSLContext | None = None, sasl: tuple | None = None) -> None:
        host, _, port = bootstrap.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        if tls is not None:  # a listener with security_protocol SSL
            try:
                sock = tls.wrap_socket(sock, server_hostname=host.strip("[]"))
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        self._client_id = client_id
        self._correlation = 0
        if sasl is not None:  # (mechanism, user, password): log in before anything else
            try:
                self._log_in(SaslClientExchange(*sasl))
            except BaseException:
                sock.close()
                raise

    def _log_in(self, exchange: SaslClientExchange) -> None:
        """A SASL_PLAINTEXT/SASL_SSL listener's login; AuthenticationFailed if refused."""
        while (step := exchange.next_request()) is not None:
            exchange.on_response(self.request(*step))

    def request(self, api_key: int, version: int, request):
        self._correlation += 1
        header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=self._correlation, client_id=self._client_id)
        parts: list = []
        encode_request(header, request, parts)
        self._sock.sendall(frame_bytes(parts))
        size = _SIZE.unpack(self._recv(4))[0]
        response_header, body = decode_response(self._recv(size), api_key, version)
        if response_header.correlation_id != self._correlation:
            raise KafkaProtocolError("response out of order")
        return body

    def _recv(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self._sock.recv_into(view[got:])
            if k == 0:
                raise ConnectionError("server closed the connection")
            got += k
        return buf

    def close(self) -> None:
        self._sock.close()


class StateReader:
    def __init__(self, bootstrap: str, topic: str, partition: int, directory, *, chunk_bytes: int = 1 << 20,
                 client_id: str = "kraftd-state-reader", timeout: float = 30.0) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.chunk_bytes = chunk_bytes
        self.machine = KeyValueStateMachine()
        self.last_fetched_epoch = -1
        self.high_watermark = -1
        self.snapshot_id: SnapshotId | None = None
        self._client = WireClient(bootstrap, client_id=client_id, timeout=timeout)
        self._load_local_snapshot()

    @property
    def state(self) -> dict:
        return self.machine.state

    @property
    def offset(self) -> int:
        return self.machine.applied_offset

    def __enter__(self) -> "StateReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- catching up -----------------------------------------------------------------------
    def sync(self, timeout: float = 60.0) -> None:
        """Fetch until the state reflects everything committed when sync() began (or later)."""
        deadline = time.monotonic() + timeout
        # A poll that installs a snapshot (or resets) reads no log and learns no high watermark:
        # keep fetching until one answers from the log, then read up to that high watermark.
        self.high_watermark = -1
        self.poll()
        while self.high_watermark < 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"at offset {self.offset}, no fetch has answered from the log yet")
            self.poll()
        target = self.high_watermark
        while self.offset < target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"at offset {self.offset}, the high watermark was {target}")
            self.poll()

    def poll(self, max_wait_ms: int = 0) -> int:
        """One Fetch; returns how many records were applied."""
        data = self._fetch(max_wait_ms)
        if data.snapshot_id.end_offset >= 0:
            self._install(SnapshotId(data.snapshot_id.end_offset, data.snapshot_id.epoch))
            return 0
        if data.diverging_epoch.end_offset >= 0 or data.diverging_epoch.epoch >= 0:
            # The log we read from was truncated under us: the state cannot be rolled back.
            self._reset()
            return 0
        if data.error_code:
            raise StateReaderError(f"fetch failed: {ErrorCode(data.error_code).name}")
        self.high_watermark = data.high_watermark
        records = data.records
        if records is None or len(records) == 0:
            return 0
        for _, header in iter_batch_headers(records):
            self.last_fetched_epoch = header.partition_leader_epoch
        return self.machine.apply_batches(records)

    def _fetch(self, max_wait_ms: int):
        request = m.FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=self.chunk_bytes,
                                 isolation_level=0, session_id=0, session_epoch=-1, topics=[
                m.FetchRequest.FetchTopic(topic=self.topic, partitions=[m.FetchRequest.FetchPartition(
                    partition=self.partition, current_leader_epoch=-1, fetch_offset=self.offset,
                    last_fetched_epoch=self.last_fetched_epoch, log_start_offset=-1,
                    partition_max_bytes=self.chunk_bytes)])])
        response = self._client.request(api.FETCH, FETCH_VERSION, request)
        if response.error_code:
            raise StateReaderError(f"fetch failed: {ErrorCode(response.error_code).name}")
        return response.responses[0].partitions[0]

    def _reset(self) -> None:
        self.machine = KeyValueStateMachine()
        self.last_fetched_epoch = -1
        self.snapshot_id = None

    # -- snapshots ------------------------------------------------------------------------
    def _load_local_snapshot(self) -> None:
        ids = sorted(sid for name in os.listdir(self.directory) if (sid := parse_snapshot_filename(name)))
        if ids:
            try:
                self._load(ids[-1])
            except CorruptSnapshotError:
                os.unlink(os.path.join(self.directory, snapshot_filename(ids[-1])))

    def _install(self, sid: SnapshotId) -> None:
        try:
            self._download(sid)
        except _SnapshotGone:
            return  # replaced by a newer one while we downloaded: the next Fetch names it
        self._load(sid)

    def _load(self, sid: SnapshotId) -> None:
        reader = SnapshotReader.open(os.path.join(self.directory, snapshot_filename(sid)))
        self.machine = KeyValueStateMachine()
        self.machine.load(reader.items(), sid.end_offset, reader.last_contained_log_timestamp)
        self.last_fetched_epoch = sid.epoch
        self.snapshot_id = sid

    def _download(self, sid: SnapshotId) -> str:
        final = os.path.join(self.directory, snapshot_filename(sid))
        part = final + ".part"
        for name in os.listdir(self.directory):  # partial downloads of other snapshots are stale
            if name.endswith(".part") and os.path.join(self.directory, name) != part:
                os.unlink(os.path.join(self.directory, name))
        position = os.path.getsize(part) if os.path.exists(part) else 0
        with open(part, "ab") as out:
            while True:
                chunk = self._fetch_snapshot_chunk(sid, position)
                if chunk is None:  # the leader no longer has it: start over from a Fetch
                    out.close()
                    os.unlink(part)
                    raise _SnapshotGone(sid)
                data, size = chunk
                if position > size:  # not a prefix of this snapshot: start it over
                    out.truncate(0)
                    position = 0
                    continue
                if position < size and not data:
                    raise StateReaderError(f"fetch snapshot at {position} of {size} returned no bytes")
                out.write(data)
                position += len(data)
                if position >= size:  # also a complete .part left by a crash before its rename
                    break
            out.flush()
            os.fsync(out.fileno())
        try:
            SnapshotReader.open(part)  # validates every CRC, header and footer
        except CorruptSnapshotError:
            os.unlink(part)
            raise
        os.replace(part, final)
        fsync_dir(self.directory)
        return final

    def _fetch_snapshot_chunk(self, sid: SnapshotId, position: int):
        request = m.FetchSnapshotRequest(replica_id=-1, max_bytes=self.chunk_bytes, topics=[
            m.FetchSnapshotRequest.TopicSnapshot(name=self.topic, partitions=[
                m.FetchSnapshotRequest.PartitionSnapshot(
                    partition=self.partition, current_leader_epoch=-1, position=position,
                    snapshot_id=m.FetchSnapshotRequest.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch))])])
        response = self._client.request(api.FETCH_SNAPSHOT, FETCH_SNAPSHOT_VERSION, request)
        if response.error_code:
            raise StateReaderError(f"fetch snapshot failed: {ErrorCode(response.error_code).name}")
        p = response.topics[0].partitions[0]
        if p.error_code == ErrorCode.SNAPSHOT_NOT_FOUND:
            return None
        if p.error_code == ErrorCode.POSITION_OUT_OF_RANGE and 0 <= p.size <= position:
            return b"", p.size  # we already have it all (or more than it: _download starts over)
        if p.error_code:
            raise StateReaderError(f"fetch snapshot failed: {ErrorCode(p.error_code).name}")
        return bytes(p.unaligned_records), p.size
