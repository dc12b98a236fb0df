"""Record-batch compression codecs (attributes bits 0-2), wire-compatible with Kafka clients.

- gzip: a gzip container (zlib, wbits=31); reading accepts concatenated members.
- snappy: written with snappy-java's "xerial" framing, as the Java client does; read either
  xerial-framed or raw snappy (older/other clients send raw blocks).
- lz4: the LZ4 frame format exactly as Kafka's Lz4BlockOutputStream writes it: FLG 0x60
  (version 1, independent blocks, no block/content checksums, no content size), BD 0x40
  (64 KiB blocks), a correct header checksum. Reading accepts 64 KiB..4 MiB blocks, block
  checksums and content size/checksum fields (checksums are skipped: the batch CRC32C already
  covers the compressed bytes), but not dependent blocks (Kafka rejects them too).
- zstd: a standard zstd frame (level 3, Kafka's default).

Every decompressor stops at `max_size` output bytes (default `MAX_DECOMPRESSED_SIZE`) and
raises CorruptRecordError, so a tiny batch cannot expand into gigabytes (decompression bomb).
"""

from __future__ import annotations

import enum
import struct
import zlib

import cramjam

from .errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "Compression", "compress", "decompress", "MAX_DECOMPRESSED_SIZE", "xxh32",
]

# Module-level default; callers may pass max_size per call, or assign this (read at call time).
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


def _bomb(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"{codec} payload decompresses to more than {limit} bytes")


def _as_bytes(data) -> bytes:
    return data if type(data) is bytes else bytes(data)


# ---------------------------------------------------------------- gzip

def _gzip_compress(data, level: int | None) -> bytes:
    c = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out = []
    total = 0
    while True:
        d = zlib.decompressobj(31)
        try:
            chunk = d.decompress(data, limit + 1 - total)
        except zlib.error as e:
            raise CorruptRecordError(f"gzip: {e}") from None
        total += len(chunk)
        if total > limit or d.unconsumed_tail:
            raise _bomb("gzip", limit)
        if not d.eof:
            raise CorruptRecordError("gzip: truncated stream")
        out.append(chunk)
        data = d.unused_data
        # Like java.util.zip.GZIPInputStream: further members are read, trailing junk ignored.
        if not data.startswith(b"\x1f\x8b"):
            break
    return out[0] if len(out) == 1 else b"".join(out)


# ---------------------------------------------------------------- snappy

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_I32 = struct.Struct(">i")


def _snappy_compress(data) -> bytes:
    parts = [_XERIAL_HEADER]
    mv = memoryview(data)
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(mv[i:i + _XERIAL_BLOCK])))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: bytes, limit: int) -> bytes:
    try:
        n = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:  # cramjam raises its own error types
        raise CorruptRecordError(f"snappy: {e}") from None
    if n > limit:
        raise _bomb("snappy", limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise CorruptRecordError(f"snappy: {e}") from None


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC) or len(data) < 16:
        return _snappy_raw(data, limit)
    out = []
    total = 0
    pos, end = 16, len(data)  # magic + version + compatible version
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("snappy: truncated xerial chunk length")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError("snappy: truncated xerial chunk")
        chunk = _snappy_raw(data[pos:pos + n], limit - total)
        pos += n
        total += len(chunk)
        out.append(chunk)
    return b"".join(out)


# ---------------------------------------------------------------- lz4

_LZ4_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
_LZ4_FLG = 0x60  # version 01, block independence; no checksums, no content size
_LZ4_BD = 0x40  # max block size code 4 = 64 KiB
_LZ4_BLOCK = 64 * 1024
_U32LE = struct.Struct("<I")

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32; only used on the few bytes of an LZ4 frame descriptor (pure Python is enough)."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                (w,) = _U32LE.unpack_from(data, i + 4 * lane)
                v[lane] = (_rotl((v[lane] + w * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (w,) = _U32LE.unpack_from(data, i)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_HEADER = (_LZ4_MAGIC + bytes([_LZ4_FLG, _LZ4_BD])
               + bytes([(xxh32(bytes([_LZ4_FLG, _LZ4_BD])) >> 8) & 0xFF]))


def _lz4_compress(data) -> bytes:
    parts = [_LZ4_HEADER]
    mv = memoryview(data)
    for i in range(0, len(mv), _LZ4_BLOCK):
        raw = bytes(mv[i:i + _LZ4_BLOCK])
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):  # incompressible: store as-is, flagged by the high bit
            parts.append(_U32LE.pack(len(raw) | 0x80000000))
            parts.append(raw)
        else:
            parts.append(_U32LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")  # EndMark
    return b"".join(parts)


def _lz4_decompress(data: bytes, limit: int) -> bytes:
    end = len(data)
    if end < 7 or data[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4: not an LZ4 frame (bad magic)")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1 or flg & 0x03:
        raise CorruptRecordError(f"lz4: unsupported frame flags 0x{flg:02x}")
    if not flg & 0x20:
        raise CorruptRecordError("lz4: dependent blocks are not supported")
    code = (bd >> 4) & 7
    if bd & 0x8F or code < 4:
        raise CorruptRecordError(f"lz4: bad block descriptor 0x{bd:02x}")
    max_block = 1 << (2 * code + 8)
    block_checksum = flg & 0x10
    pos = 6 + (8 if flg & 0x08 else 0)  # skip the optional content size
    if pos >= end:
        raise CorruptRecordError("lz4: truncated frame descriptor")
    if data[pos] != (xxh32(data[4:pos]) >> 8) & 0xFF:
        raise CorruptRecordError("lz4: frame descriptor checksum mismatch")
    pos += 1
    out = bytearray()
    buf = bytearray(max_block)
    while True:
        if end - pos < 4:
            raise CorruptRecordError("lz4: truncated frame (no EndMark)")
        (n,) = _U32LE.unpack_from(data, pos)
        pos += 4
        if n == 0:
            break  # EndMark; an optional content checksum may follow (covered by the CRC)
        stored = n & 0x80000000
        n &= 0x7FFFFFFF
        if n > max_block or pos + n > end:
            raise CorruptRecordError("lz4: bad or truncated block")
        if stored:
            out += data[pos:pos + n]
        else:
            try:
                k = cramjam.lz4.decompress_block_into(data[pos:pos + n], buf)
            except Exception as e:
                raise CorruptRecordError(f"lz4: {e}") from None
            out += memoryview(buf)[:k]
        if len(out) > limit:
            raise _bomb("lz4", limit)
        pos += n + (4 if block_checksum else 0)
    return bytes(out)


# ---------------------------------------------------------------- zstd

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_content_size(data: bytes) -> int | None:
    """Frame_Content_Size from the first frame header, if it declares one."""
    if len(data) < 6 or data[:4] != _ZSTD_MAGIC:
        return None
    fhd = data[4]
    fcs_flag, single = fhd >> 6, (fhd >> 5) & 1
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or len(data) < pos + size:
        return None
    v = int.from_bytes(data[pos:pos + size], "little")
    return v + 256 if size == 2 else v


def _zstd_decompress(data: bytes, limit: int) -> bytes:
    declared = _zstd_content_size(data)
    if declared is not None and declared > limit:
        raise _bomb("zstd", limit)
    # Decompress into a bounded buffer, growing it geometrically when a frame lacks (or
    # under-declares) its size, never past limit + 1 bytes. cramjam fails with "failed to write
    # whole buffer" when the output does not fit; success means the whole input was decoded.
    guess = declared if declared is not None else max(64 * 1024, 4 * len(data))
    guess = min(max(guess, 1), limit + 1)
    while True:
        buf = bytearray(guess)
        try:
            n = cramjam.zstd.decompress_into(data, buf)
        except Exception as e:
            if "whole buffer" not in str(e):
                raise CorruptRecordError(f"zstd: {e}") from None
            if guess > limit:
                raise _bomb("zstd", limit) from None
            guess = min(guess * 4, limit + 1)
            continue
        if n > limit:
            raise _bomb("zstd", limit)
        return bytes(memoryview(buf)[:n])


# ---------------------------------------------------------------- dispatch

def compress(codec: int, data, *, level: int | None = None) -> bytes:
    """Compress `data` (any bytes-like) with `codec` (a Compression value)."""
    if codec == Compression.NONE:
        return _as_bytes(data)
    if codec == Compression.GZIP:
        return _gzip_compress(data, level)
    if codec == Compression.SNAPPY:
        return _snappy_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(_as_bytes(data), level=3 if level is None else level))
    raise InvalidRecordError(f"unknown compression codec {codec}")


def decompress(codec: int, data, *, max_size: int | None = None) -> bytes:
    """Decompress `data`; CorruptRecordError if malformed or larger than `max_size` bytes."""
    limit = MAX_DECOMPRESSED_SIZE if max_size is None else max_size
    data = _as_bytes(data)
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        return _gzip_decompress(data, limit)
    if codec == Compression.SNAPPY:
        return _snappy_decompress(data, limit)
    if codec == Compression.LZ4:
        return _lz4_decompress(data, limit)
    if codec == Compression.ZSTD:
        return _zstd_decompress(data, limit)
    raise InvalidRecordError(f"unknown compression codec {codec}")
