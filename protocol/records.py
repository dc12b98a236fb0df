"""Kafka record batches, magic v2 (KIP-98 format): header access, validation, patching,
record decoding and batch building.

Batch layout (big-endian; offsets from the batch start):
    0 base_offset int64 | 8 batch_length int32 | 12 partition_leader_epoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 last_offset_delta int32 | 27 base_timestamp int64
    35 max_timestamp int64 | 43 producer_id int64 | 51 producer_epoch int16
    53 base_sequence int32 | 57 records_count int32 | 61 records...
batch_length counts from byte 12 to the end (so a batch is batch_length + 12 bytes); the CRC32C
covers byte 21 (attributes) to the end, so base offset and leader epoch can be patched freely.
"""

from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple

from google_crc32c import extend as _crc_extend, value as _crc_value

from .compression import Compression, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .varint import read_varint_slow as _uv, write_varint as _wv

try:  # the C walk (protocol/_record_walk.pyx), when the install could compile it
    from ._record_walk import has_keyless_record as _has_keyless_record
    from ._record_walk import records_are_well_formed as _records_are_well_formed
except ImportError:  # pragma: no cover - an install without a C compiler
    _records_are_well_formed = _has_keyless_record = None

__all__ = [
    "BATCH_HEADER_SIZE", "BatchHeader", "Compression", "Record", "parse_batch_header",
    "iter_batch_headers", "validate_batches", "crc_ok", "compute_crc", "patch_base_offset",
    "patch_leader_epoch", "set_log_append_time", "decode_records", "iter_records",
    "build_batch", "MAGIC", "NO_PRODUCER_ID", "NO_TIMESTAMP",
]

BATCH_HEADER_SIZE = 61
MAGIC = 2
NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_LENGTH_OFFSET = 8  # fields before batch_length are not counted in it
_LOG_OVERHEAD = 12  # base_offset + batch_length
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - _LOG_OVERHEAD  # 49: header with zero records
_CRC_OFFSET = 17
_ATTR_OFFSET = 21  # start of the CRC'd range
_MAX_TS_OFFSET = 35
_EPOCH_OFFSET = 12
_MAGIC_OFFSET = 16

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40

_pack_i64 = struct.Struct(">q").pack_into
_pack_i32 = struct.Struct(">i").pack_into
_pack_u32 = struct.Struct(">I").pack_into
_pack_i16 = struct.Struct(">h").pack_into


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire / in the log."""
        return self.batch_length + _LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)


_new_header = tuple.__new__
_unpack_header = _HEADER.unpack_from


def parse_batch_header(buf, pos: int = 0) -> BatchHeader:
    """Header of the batch at `pos`. Only lengths are checked (magic and CRC are not)."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch header needs {BATCH_HEADER_SIZE} bytes, {len(buf) - pos} available")
    h = _new_header(BatchHeader, _unpack_header(buf, pos))
    if h[1] < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch length {h[1]} is below {_MIN_BATCH_LENGTH}")
    return h


def iter_batch_headers(buf, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) for each complete batch from `pos`; stops silently at an incomplete
    tail (a torn write). Raises CorruptRecordError on a batch_length below the minimum, since
    the walk cannot continue past it. Magic and CRC are not checked."""
    end = len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        h = _new_header(BatchHeader, _unpack_header(buf, pos))
        if h[1] < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at {pos}: length {h[1]} is below {_MIN_BATCH_LENGTH}")
        size = h[1] + _LOG_OVERHEAD
        if pos + size > end:
            return
        yield pos, h
        pos += size


def compute_crc(buf, pos: int, header: BatchHeader) -> int:
    """CRC32C over attributes..end of the batch at `pos`."""
    return _crc_value(bytes(memoryview(buf)[pos + _ATTR_OFFSET:pos + header[1] + _LOG_OVERHEAD]))


def crc_ok(buf, pos: int, header: BatchHeader) -> bool:
    if len(buf) - pos < header[1] + _LOG_OVERHEAD:
        return False
    return compute_crc(buf, pos, header) == header[4]


def validate_batches(buf, *, from_client: bool = True) -> list[BatchHeader]:
    """Check the record set of a Produce request; return the batch headers in order.

    CorruptRecordError: truncated/partial batch, batch_length < 49, CRC mismatch
    (Kafka's CORRUPT_MESSAGE). InvalidRecordError (INVALID_RECORD): empty record set, magic != 2,
    unknown compression codec, records_count < 1 or != last_offset_delta + 1, transactional
    batch without a producer id, and (with from_client) control batches.

    Magic 0/1 gets InvalidRecordError, as Kafka's ProduceRequest does for v3+ requests (which
    may only carry magic v2); UNSUPPORTED_FOR_MESSAGE_FORMAT is for down-conversion paths we do
    not have. With from_client=False (replicated data) control batches and empty (compacted)
    batches are accepted. Record contents are not decoded: checks are header-only and cheap.
    """
    end = len(buf)
    if end == 0:
        raise InvalidRecordError("empty record set")
    headers = []
    pos = 0
    while pos < end:
        left = end - pos
        if left > _MAGIC_OFFSET and buf[pos + _MAGIC_OFFSET] != MAGIC:
            raise InvalidRecordError(
                f"record batch at {pos} has magic {buf[pos + _MAGIC_OFFSET]}; only magic 2")
        if left < BATCH_HEADER_SIZE:
            raise CorruptRecordError(f"truncated record batch header at {pos} ({left} bytes)")
        h = _new_header(BatchHeader, _unpack_header(buf, pos))
        length = h[1]
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at {pos}: length {length} below minimum")
        if length + _LOG_OVERHEAD > left:
            raise CorruptRecordError(
                f"record batch at {pos} claims {length + _LOG_OVERHEAD} bytes, {left} present")
        if compute_crc(buf, pos, h) != h[4]:
            raise CorruptRecordError(f"record batch at {pos}: CRC mismatch")
        attrs = h[5]
        if attrs & _COMPRESSION_MASK > Compression.ZSTD:
            raise InvalidRecordError(f"unknown compression codec {attrs & _COMPRESSION_MASK}")
        count = h[12]
        if count < 0 or (from_client and count == 0):
            raise InvalidRecordError(f"invalid record count {count}")
        if from_client and h[6] != count - 1:
            raise InvalidRecordError(
                f"inconsistent batch: last_offset_delta {h[6]} with {count} records")
        if h[6] < 0 and count > 0:
            raise InvalidRecordError(f"negative last_offset_delta {h[6]}")
        if attrs & _TRANSACTIONAL_BIT and h[9] == NO_PRODUCER_ID:
            raise InvalidRecordError("transactional batch without a producer id")
        if from_client and attrs & _CONTROL_BIT:
            raise InvalidRecordError("clients may not write control batches")
        headers.append(h)
        pos += length + _LOG_OVERHEAD
    return headers


def patch_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Assign the batch's base offset in place (outside the CRC: no recompute)."""
    _pack_i64(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Stamp the partition leader epoch in place (outside the CRC: no recompute)."""
    _pack_i32(buf, pos + _EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray, pos: int, header_or_ts, ts: int | None = None
                        ) -> BatchHeader:
    """Switch the batch to LogAppendTime with max_timestamp = ts, recompute the CRC, and return
    the updated header. Like Kafka, base_timestamp and per-record deltas stay as sent: readers
    report max_timestamp for every record of a LogAppendTime batch.

    Accepts both `set_log_append_time(buf, pos, ts)` and `set_log_append_time(buf, pos, header,
    ts)` (the header just saves a re-parse)."""
    if ts is None:
        ts = header_or_ts
        header = parse_batch_header(buf, pos)
    else:
        header = header_or_ts
    attrs = header[5] | _TIMESTAMP_TYPE_BIT
    if attrs == header[5] and header[8] == ts:
        return header  # already stamped: keep the bytes (and CRC) untouched
    _pack_i16(buf, pos + _ATTR_OFFSET, attrs)
    _pack_i64(buf, pos + _MAX_TS_OFFSET, ts)
    header = header._replace(attributes=attrs, max_timestamp=ts)
    crc = compute_crc(buf, pos, header)
    _pack_u32(buf, pos + _CRC_OFFSET, crc)
    return header._replace(crc=crc)


# ------------------------------------------------------------------ records

class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list  # list[tuple[str, bytes | None]]


_new_record = tuple.__new__
# zigzag decode of a one-byte varint, by table: cheaper than the arithmetic in the hot loop
_ZZ = [(b >> 1) ^ -(b & 1) for b in range(128)]


def _bad(msg: str, base_offset: int) -> CorruptRecordError:
    return CorruptRecordError(f"batch at offset {base_offset}: {msg}")


def _decode_payload(d: bytes, count: int, base_offset: int, base_ts: int,
                    append_ts: int | None) -> list[Record]:
    """Parse `count` records from the (decompressed) records section `d`.

    One flat loop with local variables; one-byte varints (the common case) take a fast path,
    longer ones go through read_varint_slow. Truncation surfaces as IndexError and is turned
    into CorruptRecordError once, outside the loop.
    """
    out = []
    append = out.append
    zz = _ZZ
    R = Record
    new = _new_record
    end = len(d)
    pos = start = 0
    i = 0
    try:
        while i < count:
            start = pos
            b = d[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                if d[pos + 1] < 0x80:  # two-byte varints inline too (64..8191)
                    z = (b & 0x7F) | (d[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = _uv(d, pos)
                length = (z >> 1) ^ -(z & 1)
            rec_end = pos + length
            if length < 6 or rec_end > end:  # 6 = attrs + 5 one-byte varints, the minimum
                raise _bad(f"record {i} has invalid length {length}", base_offset)
            pos += 1  # record attributes: unused in v2
            b = d[pos]
            if b < 0x80:
                ts = zz[b]
                pos += 1
            else:
                if d[pos + 1] < 0x80:
                    z = (b & 0x7F) | (d[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = _uv(d, pos)
                ts = (z >> 1) ^ -(z & 1)
            b = d[pos]
            if b < 0x80:
                od = zz[b]
                pos += 1
            else:
                if d[pos + 1] < 0x80:
                    z = (b & 0x7F) | (d[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = _uv(d, pos)
                od = (z >> 1) ^ -(z & 1)
            b = d[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                if d[pos + 1] < 0x80:
                    z = (b & 0x7F) | (d[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = _uv(d, pos)
                n = (z >> 1) ^ -(z & 1)
            if n >= 0:
                key = d[pos:pos + n]
                pos += n
            elif n == -1:
                key = None
            else:
                raise _bad(f"record {i} has key length {n}", base_offset)
            b = d[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                if d[pos + 1] < 0x80:
                    z = (b & 0x7F) | (d[pos + 1] << 7)
                    pos += 2
                else:
                    z, pos = _uv(d, pos)
                n = (z >> 1) ^ -(z & 1)
            if n >= 0:
                value = d[pos:pos + n]
                pos += n
            elif n == -1:
                value = None
            else:
                raise _bad(f"record {i} has value length {n}", base_offset)
            b = d[pos]
            if b == 0:
                headers = []
                pos += 1
            else:
                headers, pos = _decode_headers(d, pos, i, base_offset)
            if pos != rec_end:
                raise _bad(f"record {i} length {length} does not match its fields", base_offset)
            append(new(R, (base_offset + od, append_ts if append_ts is not None else base_ts + ts,
                           key, value, headers)))
            i += 1
    except IndexError:
        if start >= end:  # ran out exactly at a record boundary
            raise InvalidRecordError(
                f"batch at offset {base_offset} declares {count} records, found {i}") from None
        raise _bad(f"record {i} is truncated", base_offset) from None
    except UnicodeDecodeError:
        raise _bad(f"record {i} has a header key that is not UTF-8", base_offset) from None
    if pos != end:
        raise InvalidRecordError(
            f"batch at offset {base_offset}: {end - pos} bytes left after {count} records")
    return out


def _decode_headers(d: bytes, pos: int, i: int, base_offset: int):
    zz = _ZZ
    b = d[pos]
    if b < 0x80:
        count = zz[b]
        pos += 1
    else:
        z, pos = _uv(d, pos)
        count = (z >> 1) ^ -(z & 1)
    if count < 0:
        raise _bad(f"record {i} has header count {count}", base_offset)
    headers = []
    for _ in range(count):
        b = d[pos]
        if b < 0x80:
            n = zz[b]
            pos += 1
        else:
            z, pos = _uv(d, pos)
            n = (z >> 1) ^ -(z & 1)
        if n < 0:
            raise InvalidRecordError(f"batch at offset {base_offset}: record {i} header key "
                                     f"length {n}")
        k = d[pos:pos + n].decode()
        pos += n
        b = d[pos]
        if b < 0x80:
            n = zz[b]
            pos += 1
        else:
            z, pos = _uv(d, pos)
            n = (z >> 1) ^ -(z & 1)
        if n >= 0:
            v = d[pos:pos + n]
            pos += n
        elif n == -1:
            v = None
        else:
            raise _bad(f"record {i} has header value length {n}", base_offset)
        headers.append((k, v))
    if pos > len(d):  # a slice ran past the end
        raise IndexError
    return headers, pos


def decode_records(batch, header: BatchHeader | None = None, *,
                   max_decompressed: int | None = None) -> list[Record]:
    """Records of the batch starting at batch[0] (decompressing if needed).

    Record offsets are base_offset + offset_delta (gaps allowed: compacted batches); timestamps
    are base_timestamp + delta, or max_timestamp for LogAppendTime batches. Keys and values are
    bytes (copies). Errors: CorruptRecordError (truncated, bad lengths/varints, bad
    compression, non-UTF-8 header key), InvalidRecordError (record count mismatch).
    The CRC is not checked here: use crc_ok/validate_batches for untrusted input.
    """
    if header is None:
        header = parse_batch_header(batch)
    data, count = _records_section(batch, header, max_decompressed)
    append_ts = header[8] if header[5] & _TIMESTAMP_TYPE_BIT else None
    return _decode_payload(data, count, header[0], header[7], append_ts)


class KeylessRecordError(InvalidRecordError):
    """A record without a key, where keys are required (a compacted topic)."""


def check_records(batch, header: BatchHeader, *, max_decompressed: int | None = None,
                  require_keys: bool = False) -> None:
    """Everything decode_records checks, without building the records (the produce path checks
    every record, as Kafka's LogValidator does; building them cost ~2.3 µs per 1 KiB record).
    The walk runs in C when protocol/_record_walk.pyx is built (it answers only "well formed or
    not"); the Python walk runs when it is not, and names the problem when it is not well formed.
    `require_keys`: a record without a key raises KeylessRecordError."""
    if _records_are_well_formed is None or header[5] & _COMPRESSION_MASK:
        data, count = _records_section(batch, header, max_decompressed)
    else:  # walked where it lies: no copy
        _check_section_bounds(batch, header)
        data, count = memoryview(batch)[BATCH_HEADER_SIZE:header[1] + _LOG_OVERHEAD], header[12]
    if _records_are_well_formed is None or not _records_are_well_formed(data, count):
        _check_payload(bytes(data), count, header[0])
    if require_keys:
        keyless = (_has_keyless_record(data, count) if _has_keyless_record is not None
                   else any(r.key is None for r in _decode_payload(bytes(data), count, header[0], header[7], None)))
        if keyless:
            raise KeylessRecordError(f"batch at offset {header[0]} holds a record without a key")


def _check_section_bounds(batch, header: BatchHeader) -> None:
    """The checks every reader of a batch's records needs before it walks them."""
    size = header[1] + _LOG_OVERHEAD
    if len(batch) < size:
        raise CorruptRecordError(f"batch at offset {header[0]} needs {size} bytes, "
                                 f"{len(batch)} present")
    if header[3] != MAGIC:
        raise InvalidRecordError(f"batch at offset {header[0]} has magic {header[3]}")
    count = header[12]
    if count < 0:
        raise InvalidRecordError(f"batch at offset {header[0]} has record count {count}")


def _records_section(batch, header: BatchHeader, max_decompressed: int | None):
    """The (decompressed) records bytes of a batch and its record count, after the checks
    every reader needs."""
    _check_section_bounds(batch, header)
    count = header[12]
    data = memoryview(batch)[BATCH_HEADER_SIZE:header[1] + _LOG_OVERHEAD]
    codec = header[5] & _COMPRESSION_MASK
    if codec:
        return decompress(codec, bytes(data), max_size=max_decompressed), count
    return bytes(data), count


def _check_payload(d: bytes, count: int, base_offset: int) -> None:
    """_decode_payload's checks over the records section, with no slices and no objects.
    One-byte varints (nearly all lengths and deltas) are handled inline: this runs per record
    on the produce path."""
    zz = _ZZ
    uv = _uv
    end = len(d)
    pos = start = i = 0
    try:
        while i < count:
            start = pos
            b = d[pos]
            if b < 0x80:
                length = zz[b]
                pos += 1
            else:
                z, pos = uv(d, pos)
                length = (z >> 1) ^ -(z & 1)
            rec_end = pos + length
            if length < 6 or rec_end > end:
                raise _bad(f"record {i} has invalid length {length}", base_offset)
            pos += 1  # attributes
            # Timestamp and offset deltas: only their extent matters.
            if d[pos] < 0x80:
                pos += 1
            else:
                _, pos = uv(d, pos)
            if d[pos] < 0x80:
                pos += 1
            else:
                _, pos = uv(d, pos)
            # Key and value lengths, unrolled: a helper call per field costs as much as the walk.
            b = d[pos]  # key length
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                z, pos = uv(d, pos)
                n = (z >> 1) ^ -(z & 1)
            if n > 0:
                pos += n
            elif n < -1:
                raise _bad(f"record {i} has key length {n}", base_offset)
            b = d[pos]  # value length
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                z, pos = uv(d, pos)
                n = (z >> 1) ^ -(z & 1)
            if n > 0:
                pos += n
            elif n < -1:
                raise _bad(f"record {i} has value length {n}", base_offset)
            b = d[pos]
            if b == 0:
                pos += 1
            else:
                pos = _check_headers(d, pos, i, base_offset)
            if pos != rec_end:
                raise _bad(f"record {i} length {length} does not match its fields", base_offset)
            i += 1
    except IndexError:
        if start >= end:
            raise InvalidRecordError(
                f"batch at offset {base_offset} declares {count} records, found {i}") from None
        raise _bad(f"record {i} is truncated", base_offset) from None
    except UnicodeDecodeError:
        raise _bad(f"record {i} has a header key that is not UTF-8", base_offset) from None
    if pos != end:
        raise InvalidRecordError(
            f"batch at offset {base_offset}: {end - pos} bytes left after {count} records")


def _signed_varint(d: bytes, p: int) -> tuple[int, int]:
    b = d[p]
    if b < 0x80:
        return _ZZ[b], p + 1
    z, p = _uv(d, p)
    return (z >> 1) ^ -(z & 1), p


def _check_headers(d: bytes, pos: int, i: int, base_offset: int) -> int:
    sv = _signed_varint
    count, pos = sv(d, pos)
    if count < 0:
        raise _bad(f"record {i} has header count {count}", base_offset)
    for _ in range(count):
        n, pos = sv(d, pos)
        if n < 0:
            raise InvalidRecordError(f"batch at offset {base_offset}: record {i} header key length {n}")
        str(d[pos:pos + n], "utf-8")  # header keys are strings
        pos += n
        n, pos = sv(d, pos)
        if n > 0:
            pos += n
        elif n < -1:
            raise _bad(f"record {i} has header value length {n}", base_offset)
    return pos


def iter_records(buf, *, max_decompressed: int | None = None) -> Iterator[Record]:
    """Records of every complete batch in `buf` (e.g. a log read or a snapshot chunk)."""
    mv = memoryview(buf)
    for pos, h in iter_batch_headers(mv):
        yield from decode_records(mv[pos:pos + h[1] + _LOG_OVERHEAD], h,
                                  max_decompressed=max_decompressed)


# ------------------------------------------------------------------ building

def _write_bytes(out: bytearray, b) -> None:
    if b is None:
        out += b"\x01"  # zigzag(-1)
    else:
        _wv(out, len(b))
        out += b


def build_batch(records: Iterable, *, base_offset: int = 0,
                compression: int = Compression.NONE, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = -1, base_sequence: int = -1,
                partition_leader_epoch: int = -1, is_transactional: bool = False,
                is_control: bool = False, timestamp_type: int = 0,
                compression_level: int | None = None) -> bytes:
    """Encode one v2 batch. `records` holds (key, value, headers, timestamp) tuples or Record
    objects (whose offset is ignored: offset deltas are 0, 1, 2, ...). Header keys may be str
    or bytes; a None timestamp means -1. base_timestamp is the first record's timestamp,
    max_timestamp the largest. Raises ValueError for an empty batch."""
    body = bytearray()
    base_ts = None
    max_ts = NO_TIMESTAMP
    n = 0
    for r in records:
        if isinstance(r, Record):
            _, ts, key, value, headers = r
        else:
            key, value, headers, ts = r
        if ts is None:
            ts = NO_TIMESTAMP
        if base_ts is None:
            base_ts = ts
        if ts > max_ts:
            max_ts = ts
        append_record(body, ts - base_ts, n, key, value, headers)
        n += 1
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    attrs = int(compression) & _COMPRESSION_MASK
    if timestamp_type:
        attrs |= _TIMESTAMP_TYPE_BIT
    if is_transactional:
        attrs |= _TRANSACTIONAL_BIT
    if is_control:
        attrs |= _CONTROL_BIT
    return batch_bytes(body, attrs, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       last_offset_delta=n - 1, base_timestamp=base_ts, max_timestamp=max_ts,
                       producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                       count=n, compression_level=compression_level)


def append_record(body: bytearray, timestamp_delta: int, offset_delta: int, key, value, headers) -> None:
    """One record (attributes 0) onto `body`, length-prefixed."""
    rec = bytearray(b"\x00")  # record attributes
    _wv(rec, timestamp_delta)
    _wv(rec, offset_delta)
    _write_bytes(rec, key)
    _write_bytes(rec, value)
    if headers:
        _wv(rec, len(headers))
        for hk, hv in headers:
            _write_bytes(rec, hk.encode() if isinstance(hk, str) else hk)
            _write_bytes(rec, hv)
    else:
        rec += b"\x00"
    _wv(body, len(rec))
    body += rec


def batch_bytes(body, attrs: int, *, base_offset: int, partition_leader_epoch: int, last_offset_delta: int,
                base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
                base_sequence: int, count: int, compression_level: int | None = None) -> bytes:
    """A whole batch: the header, then the records section `body` compressed with the codec in
    `attrs`, with its CRC32C."""
    payload = compress(attrs & _COMPRESSION_MASK, body, level=compression_level) if attrs & 7 else bytes(body)
    header = bytearray(_HEADER.pack(
        base_offset, _MIN_BATCH_LENGTH + len(payload), partition_leader_epoch, MAGIC, 0, attrs,
        last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count))
    crc = _crc_extend(_crc_value(bytes(header[_ATTR_OFFSET:])), payload)
    _pack_u32(header, _CRC_OFFSET, crc)
    return bytes(header) + payload
