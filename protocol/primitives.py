"""Wire primitives shared by the generated codecs and by hand-written framing.

The generated code inlines the one-byte varint case and calls these helpers for the rest, so
they are written for clarity rather than for the last nanosecond.
"""
from __future__ import annotations

import struct
import uuid

from .errors import DecodeError
from .varint import append_unsigned

__all__ = [
    "ZERO_UUID",
    "read_uvarint",
    "read_varint",
    "write_uvarint",
    "uvarint_bytes",
    "write_varint",
    "uuid_from_bytes",
    "truncated",
    "bad_length",
    "null_not_allowed",
]

ZERO_UUID = uuid.UUID(int=0)
_ZERO16 = bytes(16)
_UUID_NEW = uuid.UUID.__new__
_SET = object.__setattr__

# Kafka's unsigned varints carry at most 32 bits: five bytes of seven bits.
_MAX_UVARINT_BYTES = 5

# One-byte encodings, indexed by value: avoids building a bytes object per small length.
_SMALL = [bytes((i,)) for i in range(128)]

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at `pos`; returns (value, new_pos)."""
    result = 0
    shift = 0
    end = len(buf)
    for i in range(_MAX_UVARINT_BYTES):
        if pos >= end:
            raise DecodeError(f"truncated varint at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if i == _MAX_UVARINT_BYTES - 1 and b > 0x0F:
                raise DecodeError(f"varint at offset {pos - 5} exceeds 32 bits")
            return result, pos
        shift += 7
    raise DecodeError(f"varint at offset {pos - _MAX_UVARINT_BYTES} is longer than 5 bytes")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag signed varint (32-bit)."""
    v, pos = read_uvarint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


def uvarint_bytes(n: int) -> bytes:
    """Encoding of an unsigned varint as bytes."""
    if n < 0x80:
        if n < 0:
            raise ValueError(f"unsigned varint cannot encode {n}")
        return _SMALL[n]
    if n > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint cannot encode {n} (more than 32 bits)")
    out = bytearray()
    append_unsigned(out, n)
    return bytes(out)


def write_uvarint(out: bytearray, n: int) -> None:
    if 0 <= n < 0x80:
        out.append(n)
    else:
        out += uvarint_bytes(n)


def write_varint(out: bytearray, n: int) -> None:
    write_uvarint(out, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def uuid_from_bytes(b: bytes) -> uuid.UUID:
    """UUID from 16 big-endian bytes; the all-zero id (most common) is a shared constant."""
    if b == _ZERO16:
        return ZERO_UUID
    u = _UUID_NEW(uuid.UUID)
    # UUID forbids attribute assignment; this is what UUID.__init__ itself ends up doing.
    _SET(u, "int", int.from_bytes(b, "big"))
    _SET(u, "is_safe", uuid.SafeUUID.unknown)
    return u


# Error helpers called from generated code (keeps the generated source short).
def truncated(what: str, need: int, pos: int, size: int):
    raise DecodeError(
        f"truncated input: {what} needs {need} bytes at offset {pos}, "
        f"only {max(size - pos, 0)} remain"
    )


def bad_length(what: str, n: int, pos: int):
    raise DecodeError(f"invalid length {n} for {what} at offset {pos}")


def null_not_allowed(what: str, pos: int):
    raise DecodeError(f"null {what} at offset {pos} where the schema does not allow null")
