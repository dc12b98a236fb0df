"""Item A, randomized: 10,000 hypothesis-generated frames over real sockets against one
shared server, while a well-behaved client produces and fetches on its own connection.

Every example is a payload of raw bytes (whole frames: size prefix + header + body, or
plain garbage) followed by a well-formed ApiVersions "sentinel". Per example the server
must either answer (responses in request order, for frames we actually sent, then the
sentinel) or close the connection; a connection is reused across examples until the server
closes it (or until a payload leaves the server legitimately waiting for more bytes).

After the run: the server is alive, the good client never saw an error or wrong data,
everything it produced reads back exactly, and the server log has no internal failures.
"""
from __future__ import annotations

import os
import socket
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kraftd.protocol import messages as m
from kraftd.protocol.api import API_BY_KEY
from kraftd.protocol.records import build_batch
from tests.support.kraftd_process import KraftdProcess

from .support import (GoodClient, check_healthy, encode, probe, sentinel_frame, split_frames,
                      wait_until)

MAX_BYTES = 1 << 20
EXAMPLES = int(os.environ.get("KRAFTD_FUZZ_EXAMPLES", "10000"))
FUZZ_TOPICS = ["fz0", "fz1"]


# -- a corpus of valid requests to mutate ----------------------------------------------------
def _batch(n: int = 2, compression: int = 0) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * i, [("h", b"x")], 1_700_000_000_000 + i)
                        for i in range(n)], compression=compression)


def _requests() -> dict[int, list]:
    P = m.ProduceRequest
    F = m.FetchRequest
    L = m.ListOffsetsRequest
    D = m.DeleteRecordsRequest
    O = m.OffsetForLeaderEpochRequest
    S = m.FetchSnapshotRequest
    t = FUZZ_TOPICS[0]
    return {
        0: [P(acks=a, timeout_ms=1000, topic_data=[P.TopicProduceData(name=t, partition_data=[
            P.PartitionProduceData(index=0, records=_batch(2, c))])]) for a, c in [(-1, 0), (1, 1), (0, 4)]],
        1: [F(replica_id=-1, max_wait_ms=50, min_bytes=1, max_bytes=65536, session_id=0, session_epoch=-1,
              topics=[F.FetchTopic(topic=t, topic_id=uuid.UUID(int=0), partitions=[F.FetchPartition(
                  partition=0, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1,
                  log_start_offset=-1, partition_max_bytes=65536)])])],
        2: [L(replica_id=-1, topics=[L.ListOffsetsTopic(name=t, partitions=[
            L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
            for ts in (-1, -2, 1_700_000_000_000)],
        3: [m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=t)],
                              allow_auto_topic_creation=True), m.MetadataRequest(topics=None)],
        18: [m.ApiVersionsRequest(client_software_name="fuzz", client_software_version="1.0")],
        19: [m.CreateTopicsRequest(timeout_ms=1000, topics=[m.CreateTopicsRequest.CreatableTopic(
            name=FUZZ_TOPICS[1], num_partitions=1, replication_factor=1, assignments=[],
            configs=[m.CreateTopicsRequest.CreatableTopicConfig(name="retention.ms", value="1000")])])],
        21: [D(timeout_ms=1000, topics=[D.DeleteRecordsTopic(name=t, partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=1)])])],
        22: [m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                     producer_id=-1, producer_epoch=-1)],
        23: [O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=t, partitions=[
            O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])],
        59: [S(replica_id=-1, max_bytes=65536, topics=[S.TopicSnapshot(name="__cluster_metadata", partitions=[
            S.PartitionSnapshot(partition=0, current_leader_epoch=0, position=0)])])],
    }


def _corpus() -> list[bytes]:
    out = []
    reqs = _requests()
    for key, spec in sorted(API_BY_KEY.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            for req in reqs.get(key, [spec.request_cls()]):
                try:
                    out.append(encode(key, version, req, correlation_id=len(out) + 1))
                except Exception:  # noqa: BLE001 — a field this version cannot carry
                    out.append(encode(key, version, spec.request_cls(), correlation_id=len(out) + 1))
    return out


CORPUS = _corpus()
HOSTILE_INTS = [0, -1, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, -2**31, 2**30]

# -- strategies --------------------------------------------------------------------------------
valid_key = st.sampled_from(sorted(API_BY_KEY))
any_key = st.one_of(valid_key, st.integers(-2**15, 2**15 - 1))


def _header(key: int, version: int, cid: int, client_id: bytes | None, flexible: bool) -> bytes:
    out = struct.pack(">hhi", key, version, cid)
    out += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return out + (b"\x00" if flexible else b"")


@st.composite
def header_plus_garbage(draw):
    key = draw(any_key)
    spec = API_BY_KEY.get(key)
    if spec is not None and draw(st.booleans()):
        version = draw(st.integers(spec.min_version, spec.max_version))
    else:
        version = draw(st.integers(-2**15, 2**15 - 1))
    flexible = spec is not None and spec.is_flexible(version)
    cid = draw(st.integers(0, 2**31 - 1))
    client_id = draw(st.one_of(st.none(), st.binary(max_size=12)))
    body = _header(key, version, cid, client_id, flexible) + draw(st.binary(max_size=300))
    return struct.pack(">i", len(body)) + body


@st.composite
def mutated_valid(draw):
    frame = bytearray(draw(st.sampled_from(CORPUS)))
    body = frame[4:]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "int32", "int16",
                                     "varint", "delete"]))
        if len(body) <= 8:
            break
        # keep api key / version mostly intact so the body decoder is what gets exercised
        i = draw(st.integers(8 if draw(st.integers(0, 9)) else 0, len(body) - 1))
        if kind == "flip":
            body[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            body[i] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del body[i:]
        elif kind == "delete":
            del body[i:i + draw(st.integers(1, 8))]
        elif kind == "insert":
            body[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "int32" and i + 4 <= len(body):
            struct.pack_into(">i", body, i, draw(st.sampled_from(HOSTILE_INTS)))
        elif kind == "int16" and i + 2 <= len(body):
            struct.pack_into(">h", body, i, draw(st.sampled_from(HOSTILE_INTS)) & 0x7FFF)
        elif kind == "varint":
            body[i:i + 1] = draw(st.sampled_from([b"\xff\xff\xff\xff\x07", b"\xff" * 11,
                                                  b"\x80\x80\x80\x80\x10", b"\x00", b"\x01"]))
    size = len(body)
    if draw(st.integers(0, 9)) == 0:  # occasionally a lying size prefix
        size += draw(st.integers(-8, 8))
    return struct.pack(">i", size) + bytes(body)


@st.composite
def produce_with_forged_batch(draw):
    """A well-formed Produce whose record set is hostile but CRC-valid."""
    from google_crc32c import value as crc32c
    from kraftd.protocol.records import _HEADER
    payload = draw(st.one_of(st.binary(max_size=200),
                             st.just(_batch(draw(st.integers(1, 3)))[61:])))
    count = draw(st.one_of(st.integers(1, 4), st.sampled_from([0, -1, 2**31 - 1, 2**16])))
    attrs = draw(st.one_of(st.just(0), st.integers(0, 0x7F)))
    lod = draw(st.one_of(st.just(count - 1), st.integers(-2**31, 2**31 - 1)))
    length = 49 + len(payload)
    if draw(st.integers(0, 4)) == 0:
        length = draw(st.integers(-2**31, 2**31 - 1))
    ts = 1_700_000_000_000
    h = bytearray(_HEADER.pack(0, length, -1, 2, 0, attrs, lod, ts, ts,
                               draw(st.sampled_from([-1, 0, 7])), -1, -1, count))
    struct.pack_into(">I", h, 17, crc32c(bytes(h[21:]) + payload))
    batch = bytes(h) + payload
    if draw(st.booleans()):
        batch = batch + draw(st.binary(max_size=70))  # a torn second batch
    P = m.ProduceRequest
    req = P(acks=draw(st.sampled_from([-1, 1])), timeout_ms=1000, topic_data=[P.TopicProduceData(
        name=draw(st.sampled_from(FUZZ_TOPICS)), partition_data=[P.PartitionProduceData(
            index=0, records=batch)])])
    return encode(0, draw(st.integers(3, 11)), req, correlation_id=draw(st.integers(0, 2**31 - 1)))


@st.composite
def hostile_count(draw):
    """A valid header and then an array/string count that would need gigabytes."""
    key = draw(valid_key)
    spec = API_BY_KEY[key]
    version = draw(st.integers(spec.min_version, spec.max_version))
    flexible = spec.is_flexible(version)
    head = _header(key, version, draw(st.integers(0, 2**31 - 1)), b"fz", flexible)
    pad = b"\x00" * draw(st.integers(0, 20))
    if flexible:
        count = draw(st.sampled_from([b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f",
                                      b"\x80\x80\x80\x80\x08", b"\xff" * 9 + b"\x01"]))
    else:
        count = struct.pack(">i", draw(st.sampled_from([2**31 - 1, 2**30, 10**9, -7])))
    body = head + pad + count + draw(st.binary(max_size=16))
    return struct.pack(">i", len(body)) + body


@st.composite
def bad_size(draw):
    size = draw(st.one_of(st.integers(-2**31, -1), st.integers(MAX_BYTES + 1, 2**31 - 1)))
    return struct.pack(">i", size) + draw(st.binary(max_size=64))


single = st.one_of(
    st.binary(min_size=1, max_size=300),
    header_plus_garbage(),
    mutated_valid(),
    mutated_valid(),
    produce_with_forged_batch(),
    hostile_count(),
    bad_size(),
    st.sampled_from(CORPUS),  # valid requests between the bad ones (pipelining)
)
payloads = st.lists(single, min_size=1, max_size=3).map(b"".join)


# -- the shared server and state ---------------------------------------------------------------
class FuzzState:
    def __init__(self, server: KraftdProcess) -> None:
        self.server = server
        self.sock: socket.socket | None = None
        self.examples = 0
        self.closed = self.waiting = self.answered = self.connections = 0

    def socket(self) -> socket.socket:
        if self.sock is None:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
            except OSError as e:
                raise AssertionError(f"cannot connect ({e!r}); server alive={self.server.alive()}:\n"
                                     + "\n".join(self.server.log_lines[-40:])) from None
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections += 1
        return self.sock

    def drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    server = KraftdProcess(tmp_path_factory.mktemp("fuzz") / "data", env={
        "KRAFTD_SOCKET_REQUEST_MAX_BYTES": str(MAX_BYTES),
        "KRAFTD_FETCH_MAX_WAIT_CAP_MS": "200",
    }).start()
    yield server
    server.kill()


@pytest.mark.long
@pytest.mark.timeout(280)
def test_fuzz_frames_while_good_client_runs(fuzz_server):
    server = fuzz_server
    good = GoodClient(server.port, topic="good-fuzz")
    good.start()
    assert wait_until(lambda: good.rounds >= 3 or good.errors, 10), good.errors
    state = FuzzState(server)
    t0 = time.monotonic()

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(payload=payloads)
    def run(payload: bytes) -> None:
        state.examples += 1
        sock = state.socket()
        try:
            check(payload, sock)
        except BaseException:
            state.drop()  # unread answers must not leak into the next example's probe
            raise

    def check(payload: bytes, sock: socket.socket) -> None:
        outcome, frames = split_frames(payload + sentinel_frame(), MAX_BYTES)
        sent_cids = [struct.unpack_from(">i", f, 4)[0] for f in frames if len(f) >= 8]
        p = probe(server.port, payload, sock=sock, timeout=10, max_bytes=MAX_BYTES)
        # answers are only for frames we sent, in order (a subsequence of ours)
        it = iter(sent_cids)
        assert all(c in it for c in p.cids), (p, sent_cids)
        if outcome == "close":
            assert p.closed, f"a bad size prefix did not close the connection: {p}"
        if p.closed:
            state.closed += 1
            state.drop()
        elif p.waiting:
            state.waiting += 1
            state.drop()
        else:
            state.answered += 1
        assert not good.errors, good.errors

    try:
        run()
    finally:
        state.drop()
        elapsed = time.monotonic() - t0
        print(f"\nfuzz: {state.examples} examples in {elapsed:.1f}s "
              f"({state.examples / max(elapsed, 1e-9):.0f}/s); connections {state.connections}, "
              f"closed {state.closed}, waiting {state.waiting}, answered {state.answered}; "
              f"good client rounds {good.rounds}, max latency {good.max_latency * 1000:.0f} ms, "
              f"slow rounds {good.slow[:5]}")
    assert good.rounds > 0
    check_healthy(server, good)
