"""Varints, UUIDs, error codes and the schema-model helpers."""
from __future__ import annotations

import uuid

import pytest

from kraftd.protocol.errors import (
    CorruptRecordError, DecodeError, ErrorCode, InvalidRecordError, KafkaProtocolError,
)
from kraftd.protocol.primitives import (
    ZERO_UUID, read_uvarint, read_varint, uuid_from_bytes, uvarint_bytes, write_varint,
)
from kraftd.protocol.schema_model import Versions, load_json, snake_case


@pytest.mark.parametrize("n, encoded", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
])
def test_uvarint_known_encodings(n, encoded):
    assert uvarint_bytes(n) == encoded
    assert read_uvarint(memoryview(b"\xaa" + encoded + b"\xbb"), 1) == (n, 1 + len(encoded))


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 2**31 - 1, -2**31])
def test_zigzag_varint_roundtrip(n):
    out = bytearray()
    write_varint(out, n)
    assert read_varint(out, 0) == (n, len(out))


@pytest.mark.parametrize("data", [
    b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80",          # truncated
    b"\x80\x80\x80\x80\x80\x01",                             # six bytes
    b"\xff\xff\xff\xff\x1f",                                 # more than 32 bits
])
def test_bad_uvarints_raise_decode_error(data):
    with pytest.raises(DecodeError):
        read_uvarint(memoryview(data), 0)


def test_uvarint_refuses_out_of_range():
    with pytest.raises(ValueError):
        uvarint_bytes(-1)
    with pytest.raises(ValueError):
        uvarint_bytes(2**32)


def test_uuid_from_bytes():
    u = uuid.uuid4()
    assert uuid_from_bytes(u.bytes) == u
    assert uuid_from_bytes(memoryview(u.bytes)) == u
    assert uuid_from_bytes(bytes(16)) is ZERO_UUID
    assert str(uuid_from_bytes(u.bytes)) == str(u)
    assert hash(uuid_from_bytes(u.bytes)) == hash(u)


def test_error_codes():
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.NONE == 0
    assert ErrorCode(70).name == "FETCH_SESSION_ID_NOT_FOUND"
    assert ErrorCode(74).name == "FENCED_LEADER_EPOCH"
    assert ErrorCode(98).name == "SNAPSHOT_NOT_FOUND"
    assert ErrorCode(106).name == "FETCH_SESSION_TOPIC_ID_ERROR"
    values = [e.value for e in ErrorCode]
    assert values == list(range(-1, max(values) + 1)), "no gaps, no duplicates"
    assert max(values) >= 120
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert not ErrorCode.INVALID_REQUEST.retriable


def test_exception_hierarchy():
    for exc in (DecodeError, CorruptRecordError, InvalidRecordError):
        assert issubclass(exc, KafkaProtocolError)


@pytest.mark.parametrize("text, inside, outside", [
    ("0+", [0, 5, 999], [-1]), ("3-5", [3, 4, 5], [2, 6]), ("7", [7], [6, 8]),
    ("none", [], [0, 1]), ("", [], [0]),
])
def test_versions(text, inside, outside):
    v = Versions.parse(text)
    assert all(i in v for i in inside)
    assert not any(o in v for o in outside)


@pytest.mark.parametrize("name, attr", [
    ("PartitionIndex", "partition_index"), ("MaxWaitMs", "max_wait_ms"),
    ("TopicId", "topic_id"), ("HighWatermark", "high_watermark"),
    ("ClusterId", "cluster_id"), ("validateOnly", "validate_only"),
    ("IsrNodes", "isr_nodes"), ("ZkMigrationReady", "zk_migration_ready"),
    ("Async", "async_"), ("Encode", "encode_"), ("Decode", "decode_"),
])
def test_snake_case(name, attr):
    assert snake_case(name) == attr


def test_load_json_strips_comment_lines():
    assert load_json('// licence\n{"a": "http://x"}\n  // trailing\n') == {"a": "http://x"}
