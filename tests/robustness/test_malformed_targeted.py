"""Item A, targeted: each category of malformed input, against a real server, while a
well-behaved client keeps producing and fetching on its own connection.

Contract checked everywhere: the server answers an error or closes *that* connection; the
good client's every request succeeds with the right data; afterwards the process is alive,
what the good client produced reads back exactly, and the log has no internal failures.
"""
from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from kraftd.protocol import messages as m
from kraftd.protocol.api import API_BY_KEY, API_VERSIONS, LIST_OFFSETS, PRODUCE
from kraftd.protocol.errors import ErrorCode
from kraftd.protocol.records import _HEADER, MAGIC, build_batch

from .support import (GoodClient, Probe, RawClient, batch_of, check_healthy, encode, probe,
                      records_of, rss_kib, sentinel_frame, wait_until)

MAX_BYTES = 1 << 20  # KRAFTD_SOCKET_REQUEST_MAX_BYTES for most tests here


@pytest.fixture
def server(kraftd_factory):
    return kraftd_factory(env={"KRAFTD_SOCKET_REQUEST_MAX_BYTES": str(MAX_BYTES),
                               "KRAFTD_FETCH_MAX_WAIT_CAP_MS": "500"})


@pytest.fixture
def good(server):
    g = GoodClient(server.port)
    g.start()
    assert wait_until(lambda: g.rounds >= 3 or g.errors, 10), "good client made no progress"
    yield g
    # teardown checks live in check_healthy (called explicitly so failures point at the test)
    g.stop_event.set()
    g.join(10)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header_bytes(api_key: int, version: int, cid: int = 7, client_id: str = "x") -> bytes:
    """A valid request header (v1 or v2 as the api/version calls for)."""
    spec = API_BY_KEY.get(api_key)
    cid_b = client_id.encode()
    out = struct.pack(">hhih", api_key, version, cid, len(cid_b)) + cid_b
    if spec is not None and spec.is_flexible(version):
        out += b"\x00"  # empty tagged fields
    return out


def expect_answer_or_close(p: Probe, cids: list[int]) -> None:
    """Responses received (before the close or the sentinel) are for our frames, in order."""
    it = iter(cids)
    assert all(c in it for c in p.cids), (p.cids, cids)


# -- random bytes ------------------------------------------------------------------------------
def test_random_bytes(server, good):
    rng = random.Random(1)
    closed = 0
    for i in range(300):
        blob = rng.randbytes(rng.randrange(1, 2000))
        p = probe(server.port, blob, timeout=3, max_bytes=MAX_BYTES)
        if p.closed:
            closed += 1
        else:
            assert p.waiting, (blob[:16], p)  # a random frame is never a valid request
    # a random size prefix is almost never within [0, 1 MiB]
    assert closed >= 250
    check_healthy(server, good)


# -- truncated frames --------------------------------------------------------------------------
def test_truncated_frames_then_disconnect(server, good):
    """Half a frame (prefix only, prefix + part of the body) then hang-up: nothing breaks."""
    full = encode(PRODUCE, 9, m.ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        m.ProduceRequest.TopicProduceData(name="trunc", partition_data=[
            m.ProduceRequest.PartitionProduceData(index=0, records=batch_of([b"x"]))])]))
    for cut in [1, 2, 3, 4, 5, 8, 12, len(full) // 2, len(full) - 1]:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=3)
        s.sendall(full[:cut])
        time.sleep(0.02)
        s.close()
    # the torn produce must not have been appended
    c = RawClient(server.port)
    assert c.read_all("trunc") == [] if _topic_exists(c, "trunc") else True
    c.close()
    check_healthy(server, good)


def _topic_exists(c: RawClient, name: str) -> bool:
    resp = c.request(3, 9, m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
    return resp.topics[0].error_code == 0


def test_frame_sent_byte_by_byte_is_answered(server, good):
    """Truncation is not an error in itself: a frame dribbled in one byte at a time works."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for b in sentinel_frame():
        s.sendall(bytes([b]))
        time.sleep(0.001)
    from .support import recv_frame
    resp = recv_frame(s)
    assert struct.unpack_from(">i", resp)[0] == 0x5EED
    s.close()
    check_healthy(server, good)


def test_frame_too_short_for_header(server, good):
    for body in [b"", b"\x00", b"\x00\x12", b"\x00\x12\x00\x03", b"\x00\x12\x00\x03\x00\x00\x00"]:
        p = probe(server.port, frame(body))
        assert p.closed and p.cids == [], (body, p)
    check_healthy(server, good)


# -- wrong lengths -----------------------------------------------------------------------------
def test_length_prefix_smaller_than_body(server, good):
    """The prefix cuts the request short: a decode error closes the connection (the rest of
    the bytes must not be answered as if they were a request)."""
    full = encode(3, 9, m.MetadataRequest(topics=None), 11)
    body = full[4:]
    for short in [8, 10, len(body) - 1]:
        p = probe(server.port, struct.pack(">i", short) + body)
        assert p.closed, (short, p)
        assert p.cids == [], (short, p)
    check_healthy(server, good)


def test_length_prefix_larger_than_body(server, good):
    """The server waits for the rest (it cannot know better), answers nothing, and the
    connection does not disturb anybody else. Completing the frame later gets an answer."""
    full = encode(3, 9, m.MetadataRequest(topics=None), 12)
    body = full[4:]
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.sendall(struct.pack(">i", len(body) + 100) + body)
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(1)
    # The following 100 bytes complete the frame: trailing garbage after a valid Metadata v9
    # body. Either answer (Kafka ignores trailing bytes) or close; never hang.
    s.settimeout(5)
    s.sendall(b"\x00" * 100 + sentinel_frame())
    try:
        data = s.recv(1 << 16)
    except ConnectionResetError:
        data = b""
    s.close()
    assert data == b"" or struct.unpack_from(">i", data, 4)[0] in (12, 0x5EED)
    check_healthy(server, good)


@pytest.mark.parametrize("size", [-1, -2**31, MAX_BYTES + 1, 2**31 - 1])
def test_bad_size_prefix_closes(server, good, size):
    p = probe(server.port, struct.pack(">i", size) + b"\x00" * 64)
    assert p.closed and p.cids == []
    check_healthy(server, good)


# -- unknown api keys / versions -------------------------------------------------------------
def test_unknown_api_keys_and_versions(server, good):
    for key in [-1, 4, 10, 17, 60, 1000, 32767, -32768]:
        p = probe(server.port, frame(header_bytes(key, 0, cid=31)))
        assert p.closed and p.cids == [], (key, p)
    for key, spec in API_BY_KEY.items():
        for version in [spec.min_version - 1, spec.max_version + 1, 32767, -1]:
            if key == API_VERSIONS:
                continue
            p = probe(server.port, frame(header_bytes(key, version, cid=32)))
            assert p.closed and p.cids == [], (key, version, p)
    check_healthy(server, good)


def test_api_versions_unknown_version_gets_v0_fallback(server, good):
    """KIP-511: a too-new ApiVersions is answered in v0 layout with UNSUPPORTED_VERSION."""
    for version in [5, 100, 32767]:
        p = probe(server.port, frame(header_bytes(API_VERSIONS, version, cid=33) + b"\x00\x00"))
        assert not p.closed and p.cids == [33], p
        error, = struct.unpack_from(">h", p.frames[0], 4)
        assert error == ErrorCode.UNSUPPORTED_VERSION
    check_healthy(server, good)


# -- oversized frames --------------------------------------------------------------------------
def _claim_and_measure(server, claimed: int, send_bytes: int) -> tuple[bool, int]:
    """Claim `claimed` bytes, send `send_bytes` of them; return (closed, RSS growth KiB)."""
    pid = server.proc.pid
    before = rss_kib(pid)
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    closed = False
    try:
        s.sendall(struct.pack(">i", claimed))
        chunk = b"\x00" * 65536
        sent = 0
        while sent < send_bytes:
            s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    time.sleep(0.3)
    peak = rss_kib(pid)
    if not closed:
        s.settimeout(3)
        try:
            closed = s.recv(1) == b""
        except ConnectionResetError:
            closed = True
        except socket.timeout:
            closed = False
    s.close()
    return closed, peak - before


def test_oversized_frame_refused_before_allocation(server, good):
    """2 GiB claimed, 1 MiB limit: closed at once, RSS does not grow by anything like it."""
    for claimed in [2**31 - 1, 2**30, MAX_BYTES + 1]:
        closed, growth = _claim_and_measure(server, claimed, 1 << 20)
        assert closed, claimed
        assert growth < 32 * 1024, f"RSS grew {growth} KiB after claiming {claimed} bytes"
    check_healthy(server, good)


def test_oversized_frame_refused_with_default_limit(kraftd):
    """Default limit (100 MiB): a 2 GiB claim is refused; a 100 MiB claim is only buffered as
    the bytes arrive (no up-front allocation of the claimed size)."""
    good = GoodClient(kraftd.port)
    good.start()
    closed, growth = _claim_and_measure(kraftd, 2**31 - 1, 4 << 20)
    assert closed
    assert growth < 32 * 1024, growth
    closed, growth = _claim_and_measure(kraftd, 100 * 1024 * 1024 - 1, 1 << 20)
    assert not closed  # within the limit: the server is (rightly) waiting for the rest
    assert growth < 32 * 1024, f"RSS grew {growth} KiB for a 100 MiB claim with 1 MiB sent"
    check_healthy(kraftd, good)


# -- valid headers, garbage bodies, every served api -----------------------------------------
@pytest.mark.timeout(120)
def test_garbage_bodies_for_every_api_and_version(server, good):
    rng = random.Random(2)
    sock = None
    cid = 1000
    answered = closed = 0
    for key, spec in sorted(API_BY_KEY.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            for n in [0, 1, 2, 4, 7, 16, 64, 300]:
                for _ in range(3):
                    cid += 1
                    body = rng.randbytes(n)
                    if sock is None:
                        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                    p = probe(server.port, frame(header_bytes(key, version, cid) + body), sock=sock)
                    expect_answer_or_close(p, [cid])
                    if p.closed:
                        closed += 1
                        sock.close()
                        sock = None
                    else:
                        answered += 1
    if sock is not None:
        sock.close()
    assert closed > 0
    check_healthy(server, good)


# -- hostile array counts ----------------------------------------------------------------------
def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


HOSTILE_INT32 = [2**31 - 1, 2**30, 10**8, -2]
HOSTILE_UVARINT = [2**31 - 1, 2**32 - 1, 2**31, 10**8, 2**63]


@pytest.mark.timeout(120)
def test_hostile_array_counts(server, good):
    """A body that starts (after fixed fields) with a huge array/string count and then ends:
    refused promptly, without allocating for the claimed count."""
    pid = server.proc.pid
    before = rss_kib(pid)
    cid = 5000
    for key, spec in sorted(API_BY_KEY.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            flexible = spec.is_flexible(version)
            counts = ([_uvarint(c) for c in HOSTILE_UVARINT] if flexible
                      else [struct.pack(">i", c) for c in HOSTILE_INT32])
            for count in counts:
                # the count at several plausible positions: right after the header and after
                # 1..16 bytes of zero fixed fields (timeouts, acks, replica ids...)
                for pad in [0, 2, 4, 6, 8, 12, 16]:
                    cid += 1
                    t0 = time.monotonic()
                    p = probe(server.port, frame(header_bytes(key, version, cid) + b"\x00" * pad
                                                 + count + b"\x01" * 8), timeout=5)
                    assert time.monotonic() - t0 < 2, (key, version, pad, count)
                    expect_answer_or_close(p, [cid])
    growth = rss_kib(pid) - before
    assert growth < 64 * 1024, f"RSS grew {growth} KiB"
    check_healthy(server, good)


# -- garbage inside record batches of a Produce ----------------------------------------------
def forged_batch(payload: bytes, count: int = 1, attrs: int = 0, last_offset_delta=None,
                 batch_length=None, magic: int = MAGIC, ts: int | None = None) -> bytes:
    """A v2 batch header with a correct CRC around an arbitrary records section."""
    from google_crc32c import value as crc32c
    ts = int(time.time() * 1000) if ts is None else ts
    length = 49 + len(payload) if batch_length is None else batch_length
    h = bytearray(_HEADER.pack(0, length, -1, magic, 0, attrs,
                               count - 1 if last_offset_delta is None else last_offset_delta,
                               ts, ts, -1, -1, -1, count))
    struct.pack_into(">I", h, 17, crc32c(bytes(h[21:]) + payload))
    return bytes(h) + payload


def _good_record_section() -> bytes:
    return build_batch([(b"k", b"v", [], int(time.time() * 1000))])[61:]


MALFORMED_RECORDS = {
    "varint_too_long": forged_batch(b"\xff" * 11 + b"garbage"),
    "record_length_beyond_batch": forged_batch(b"\x7e" + b"\x00" * 10),   # length 63, 10 bytes
    "record_length_negative": forged_batch(b"\x03" + b"\x00" * 10),       # zigzag(3) = -2
    "records_missing": forged_batch(b"", count=1),                         # count 1, no bytes
    "count_larger_than_records": forged_batch(_good_record_section() * 1, count=3),
    "trailing_garbage_after_records": forged_batch(_good_record_section() + b"\xde\xad"),
    "key_length_beyond_record": forged_batch(b"\x0c\x00\x00\x00\x7e" + b"\x00" * 5),
    "gzip_not_gzip": forged_batch(b"definitely not gzip data", attrs=1),
    "snappy_not_snappy": forged_batch(b"\xff" * 20, attrs=2),
    "lz4_not_lz4": forged_batch(b"\x00" * 20, attrs=3),
    "zstd_not_zstd": forged_batch(b"\x01" * 20, attrs=4),
}


def test_produce_crc_valid_malformed_records_are_rejected(server, good):
    """Kafka's LogValidator walks every record of a produced batch and answers
    CORRUPT_MESSAGE (or INVALID_RECORD) for a malformed one; storing it would poison every
    consumer of the partition (and ListOffsets by timestamp, which decodes records)."""
    accepted = []
    c = RawClient(server.port)
    try:
        for name, batch in sorted(MALFORMED_RECORDS.items()):
            topic = f"garbage-{name}"
            out = c.produce(topic, batch)
            after = c.produce(topic, batch_of([b"after"]))  # a good batch after it
            assert after.error_code == 0, after
            if out.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD):
                continue
            # accepted: does what was stored still read back for a consumer?
            try:
                records_of(c.fetch(topic, 0).records)
                consequence = "fetch decodes"
            except Exception as e:  # noqa: BLE001
                consequence = f"a consumer's fetch of offset 0 cannot decode: {e!r}"
            accepted.append(f"{name}: error_code={out.error_code} base_offset={out.base_offset}"
                            f"; {consequence}")
    finally:
        c.close()
    assert not accepted, "malformed (CRC-valid) batches accepted:\n  " + "\n  ".join(accepted)
    check_healthy(server, good)


BAD_BATCH_FRAMING = {
    "length_below_minimum": forged_batch(b"", count=1, batch_length=20),
    "length_beyond_records": forged_batch(_good_record_section(), batch_length=4000),
    "truncated_header": build_batch([(None, b"v", [], 0)])[:40],
    "magic_1": forged_batch(_good_record_section(), magic=1),
    "magic_7": forged_batch(_good_record_section(), magic=7),
    "bad_crc": bytes(bytearray(build_batch([(None, b"v", [], 0)])[:17]) + b"\0\0\0\0"
                     + build_batch([(None, b"v", [], 0)])[21:]),
    "count_zero": forged_batch(_good_record_section(), count=0, last_offset_delta=0),
    "count_negative": forged_batch(_good_record_section(), count=-5, last_offset_delta=0),
    "delta_mismatch": forged_batch(_good_record_section(), count=1, last_offset_delta=9),
    "codec_7": forged_batch(_good_record_section(), attrs=7),
    "control_bit": forged_batch(_good_record_section(), attrs=0x20),
    "two_batches_second_torn": build_batch([(None, b"a", [], 0)]) + build_batch([(None, b"b", [], 0)])[:-3],
}


def test_produce_bad_batch_framing_is_rejected(server, good):
    c = RawClient(server.port)
    try:
        for name, batch in sorted(BAD_BATCH_FRAMING.items()):
            topic = f"badframing-{name}"
            out = c.produce(topic, batch)
            assert out.error_code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD), (name, out)
            after = c.produce(topic, batch_of([b"after"]))
            assert after.error_code == 0, (name, after)
            assert [v for _, _, v in c.read_all(topic)] == [b"after"], name
    finally:
        c.close()
    check_healthy(server, good)


def test_list_offsets_by_timestamp_over_malformed_records(server, good):
    """If a malformed-but-CRC-valid batch is accepted, ListOffsets(timestamp) decodes it:
    the handler must answer (an error code at worst), not crash and drop the connection."""
    topic = "lo-garbage"
    c = RawClient(server.port)
    try:
        now = int(time.time() * 1000)
        c.produce(topic, forged_batch(b"\xff" * 11 + b"garbage", ts=now + 60_000))
        req = m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                m.ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1,
                    timestamp=now + 30_000)])])
        resp = c.request(LIST_OFFSETS, 7, req)
        assert resp.topics[0].partitions[0].partition_index == 0
    finally:
        c.close()
    check_healthy(server, good)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_by_id_in_v10_v11(server, good, version):
    """Metadata v10/v11 requests may carry a topic id and a null name (the request schema
    allows it), but the v10/v11 *response* name is not nullable. Kafka answers
    INVALID_REQUEST ("Topic IDs are not supported in requests for version N"). The server
    must answer an error or close the connection - without an internal encoding failure."""
    import uuid
    req = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
        name=None, topic_id=uuid.uuid4())], allow_auto_topic_creation=False)
    p = probe(server.port, encode(3, version, req, 77))
    expect_answer_or_close(p, [77])
    check_healthy(server, good)
