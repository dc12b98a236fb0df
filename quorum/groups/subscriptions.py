"""The topics a consumer group's members subscribe to, read from their ConsumerProtocol
subscription (the "consumer" protocol type's member metadata: int16 version, then the topic
names as an int32 count of int16-length strings; later versions only append fields)."""
from __future__ import annotations

import struct


def subscribed_topics(group) -> set[str]:
    if group.protocol_type != "consumer":
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        for _, metadata in member.protocols:
            topics |= _topics(bytes(metadata))
    return topics


def _topics(data: bytes) -> set[str]:
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        pos, out = 6, set()
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, pos)
            pos += 2
            out.add(data[pos:pos + length].decode())
            pos += length
        return out
    except (struct.error, UnicodeDecodeError):
        return set()
