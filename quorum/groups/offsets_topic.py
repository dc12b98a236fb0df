"""`__consumer_offsets`: which partition holds a group, and its records as Kafka stores them.

Every key and value is an int16 schema version followed by the struct: OffsetCommitKey
(version 1) -> OffsetCommitValue (version 3: offset, leader epoch, metadata, commit time), and
GroupMetadataKey (version 2) -> GroupMetadataValue (version 3). A null value is a tombstone.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from ...protocol.messages import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
OFFSET_VALUE_VERSION = 3
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3
_VERSION = struct.Struct(">h")


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits, signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's GroupCoordinator.partitionFor: Utils.abs(hashCode) % partitions (abs(MIN) = 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class OffsetEntry(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


def _with_version(version: int, obj) -> bytes:
    return _VERSION.pack(version) + obj.to_bytes(version)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return _with_version(OFFSET_KEY_VERSION, OffsetCommitKey(group=group_id, topic=topic, partition=partition))


def offset_value(entry: OffsetEntry) -> bytes:
    return _with_version(OFFSET_VALUE_VERSION, OffsetCommitValue(
        offset=entry.offset, leader_epoch=entry.leader_epoch, metadata=entry.metadata,
        commit_timestamp=entry.commit_timestamp))


def group_key(group_id: str) -> bytes:
    return _with_version(GROUP_KEY_VERSION, GroupMetadataKey(group=group_id))


def group_value(value: GroupMetadataValue) -> bytes:
    return _with_version(GROUP_VALUE_VERSION, value)


def decode_key(key: bytes):
    """("offset", group, topic, partition) or ("group", group_id); None for an unknown version."""
    view = memoryview(key)
    (version,) = _VERSION.unpack_from(view, 0)
    if version in (0, 1):
        k, _ = OffsetCommitKey.decode(view, 2, version)
        return ("offset", k.group, k.topic, k.partition)
    if version == 2:
        k, _ = GroupMetadataKey.decode(view, 2, version)
        return ("group", k.group)
    return None


def decode_offset_value(value: bytes) -> OffsetEntry:
    view = memoryview(value)
    (version,) = _VERSION.unpack_from(view, 0)
    v, _ = OffsetCommitValue.decode(view, 2, version)
    return OffsetEntry(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp)


def decode_group_value(value: bytes) -> GroupMetadataValue:
    view = memoryview(value)
    (version,) = _VERSION.unpack_from(view, 0)
    v, _ = GroupMetadataValue.decode(view, 2, version)
    return v
