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
