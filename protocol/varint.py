"""Zigzag varints as used inside v2 records (protobuf-style, LEB128 of the zigzag value)."""

from __future__ import annotations

from .errors import CorruptRecordError

__all__ = ["encode_varint", "write_varint", "append_unsigned", "read_varint", "read_varint_slow", "varint_size"]

# Single-byte encodings of -64..63: by far the most common case (small lengths and deltas).
_SMALL = {v: bytes([(v << 1) ^ (v >> 63)]) for v in range(-64, 64)}


def _zigzag(v: int) -> int:
    # Python ints are unbounded, so zigzag without relying on a fixed width.
    return v << 1 if v >= 0 else ((-v) << 1) - 1


def append_unsigned(out: bytearray, n: int) -> None:
    """LEB128 of a non-negative int: seven bits a byte, high bit set on all but the last."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode_varint(v: int) -> bytes:
    b = _SMALL.get(v)
    if b is not None:
        return b
    out = bytearray()
    append_unsigned(out, _zigzag(v))
    return bytes(out)


def write_varint(out: bytearray, v: int) -> None:
    b = _SMALL.get(v)
    if b is not None:
        out += b
        return
    append_unsigned(out, _zigzag(v))


def varint_size(v: int) -> int:
    z = _zigzag(v)
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


def read_varint_slow(buf, pos: int) -> tuple[int, int]:
    """Raw (still zigzagged) multi-byte varint at `pos` -> (value, new pos). At most 10 bytes."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]  # IndexError on truncation: callers turn it into CorruptRecordError
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise CorruptRecordError("varint longer than 10 bytes")


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Signed (zigzag) varint at `pos` -> (value, new pos)."""
    try:
        b = buf[pos]
        if b < 0x80:
            z, pos = b, pos + 1
        else:
            z, pos = read_varint_slow(buf, pos)
    except IndexError:
        raise CorruptRecordError("truncated varint") from None
    return (z >> 1) ^ -(z & 1), pos
