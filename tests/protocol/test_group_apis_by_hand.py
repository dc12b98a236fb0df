"""Group-protocol versions kio lacks, laid out by hand from the protocol guide.

Kafka 4 (which kio follows) dropped OffsetCommit v0-1 and OffsetFetch v0; old clients still
send them. The `__consumer_offsets` key/value schemas are Kafka's stored record format (each
key and value is an int16 schema version followed by the struct), which kio does not model.
Classic encoding throughout: int16 string lengths (-1 for null), int32 array counts.
"""
from __future__ import annotations

import struct

import pytest

from kraftd.protocol.messages import (GroupMetadataKey, GroupMetadataValue, OffsetCommitKey,
                                      OffsetCommitRequest, OffsetCommitResponse, OffsetCommitValue,
                                      OffsetFetchRequest, OffsetFetchResponse)


def _str16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


def _decode(cls, data: bytes, version: int):
    obj, pos = cls.decode(memoryview(data), 0, version)
    assert pos == len(data)
    return obj


def _commit_request(version: int) -> OffsetCommitRequest:
    R = OffsetCommitRequest
    part = R.OffsetCommitRequestPartition(partition_index=2, committed_offset=41, commit_timestamp=1700 if version else -1,
                                          committed_metadata="m")
    return R(group_id="g", generation_id_or_member_epoch=7, member_id="m-1",
             topics=[R.OffsetCommitRequestTopic(name="events", partitions=[part])])


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_request_v0_v1(version):
    expected = _str16("g")
    if version == 1:
        expected += struct.pack(">i", 7) + _str16("m-1")          # generation, member id (v1+)
    expected += struct.pack(">i", 1) + _str16("events") + struct.pack(">i", 1)
    expected += struct.pack(">iq", 2, 41)                          # partition, offset
    if version == 1:
        expected += struct.pack(">q", 1700)                        # commit timestamp (v1 only)
    expected += _str16("m")
    request = _commit_request(version)
    if version == 0:   # v0 has no generation or member: they decode as the defaults
        request.generation_id_or_member_epoch, request.member_id = -1, ""
    assert request.to_bytes(version) == expected
    assert _decode(OffsetCommitRequest, expected, version) == request


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_response_v0_v1(version):
    R = OffsetCommitResponse
    response = R(topics=[R.OffsetCommitResponseTopic(name="events", partitions=[
        R.OffsetCommitResponsePartition(partition_index=2, error_code=25)])])
    expected = struct.pack(">i", 1) + _str16("events") + struct.pack(">iih", 1, 2, 25)  # no throttle time
    assert response.to_bytes(version) == expected
    assert _decode(R, expected, version) == response


def test_offset_fetch_v0_is_v1_on_the_wire():
    R = OffsetFetchRequest
    request = R(group_id="g", topics=[R.OffsetFetchRequestTopic(name="events", partition_indexes=[0, 3])])
    expected = _str16("g") + struct.pack(">i", 1) + _str16("events") + struct.pack(">iii", 2, 0, 3)
    assert request.to_bytes(0) == request.to_bytes(1) == expected
    assert _decode(R, expected, 0) == request

    P = OffsetFetchResponse
    response = P(topics=[P.OffsetFetchResponseTopic(name="events", partitions=[
        P.OffsetFetchResponsePartition(partition_index=3, committed_offset=9, metadata=None, error_code=0)])])
    expected = (struct.pack(">i", 1) + _str16("events") + struct.pack(">iiq", 1, 3, 9) + _str16(None)
                + struct.pack(">h", 0))   # v0-1: no group error code, no throttle time
    assert response.to_bytes(0) == response.to_bytes(1) == expected
    assert _decode(P, expected, 0) == response


# -- __consumer_offsets records (after the int16 version prefix) ------------------------------
def test_offset_commit_key_and_value():
    key = OffsetCommitKey(group="g", topic="events", partition=5)
    assert key.to_bytes(1) == _str16("g") + _str16("events") + struct.pack(">i", 5)
    value = OffsetCommitValue(offset=100, leader_epoch=4, metadata="", commit_timestamp=1_700_000_000_000)
    v3 = struct.pack(">qi", 100, 4) + _str16("") + struct.pack(">q", 1_700_000_000_000)
    assert value.to_bytes(3) == v3
    assert _decode(OffsetCommitValue, v3, 3) == value
    # v1 (Kafka 2.0) has an expire timestamp and no leader epoch
    v1 = struct.pack(">q", 100) + _str16("") + struct.pack(">qq", 1_700_000_000_000, -1)
    old = _decode(OffsetCommitValue, v1, 1)
    assert (old.offset, old.leader_epoch, old.expire_timestamp) == (100, -1, -1)
    # v4 is flexible: compact string (length + 1) and an empty tagged-field section
    v4 = struct.pack(">qi", 100, 4) + b"\x01" + struct.pack(">q", 1_700_000_000_000) + b"\x00"
    assert value.to_bytes(4) == v4


def test_group_metadata_key_and_value_v3():
    assert GroupMetadataKey(group="g").to_bytes(2) == _str16("g")
    M = GroupMetadataValue.MemberMetadata
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m-1",
                               current_state_timestamp=1234, members=[
        M(member_id="m-1", group_instance_id=None, client_id="c", client_host="/127.0.0.1",
          rebalance_timeout=300_000, session_timeout=10_000, subscription=b"\x00\x01", assignment=b"")])
    expected = (_str16("consumer") + struct.pack(">i", 3) + _str16("range") + _str16("m-1")
                + struct.pack(">q", 1234) + struct.pack(">i", 1)
                + _str16("m-1") + _str16(None) + _str16("c") + _str16("/127.0.0.1")
                + struct.pack(">ii", 300_000, 10_000)
                + struct.pack(">i", 2) + b"\x00\x01" + struct.pack(">i", 0))
    assert value.to_bytes(3) == expected
    assert _decode(GroupMetadataValue, expected, 3) == value
