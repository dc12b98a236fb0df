"""The value framing of KRaft metadata records (the `__cluster_metadata` log).

A metadata record's value is, as Kafka's MetadataRecordSerde writes it:

    frame version (unsigned varint, always 1)
    record type   (unsigned varint: the schema's apiKey, e.g. 2 for TopicRecord)
    record version (unsigned varint)
    the record in that version's encoding (every metadata record is flexible, "0+")

The record types are the `data` schemas in `schemas/` that carry an `apiKey`.
"""
from __future__ import annotations

from typing import NamedTuple

from .errors import DecodeError, EncodeError, UnsupportedVersionError
from .messages import ALL_MESSAGES
from .primitives import read_uvarint, write_uvarint

__all__ = [
    "FRAME_VERSION", "RECORD_TYPE_BY_KEY", "VersionedRecord",
    "encode_metadata_record", "decode_metadata_record", "decode_metadata_record_versioned",
]

# Frame version 0 was the KRaft preview of Kafka 2.8; Kafka reads only 1, and so do we.
FRAME_VERSION = 1
# Kafka reads the three header varints into Java shorts and refuses anything larger.
_MAX_HEADER_VALUE = 0x7FFF

#: Every metadata record class we have a schema for, by record type (apiKey).
RECORD_TYPE_BY_KEY: dict[int, type] = {
    cls.API_KEY: cls for cls in ALL_MESSAGES.values()
    if cls.SCHEMA_TYPE == "data" and cls.API_KEY is not None
}


class VersionedRecord(NamedTuple):
    record: object     # a generated class from RECORD_TYPE_BY_KEY
    version: int


def encode_metadata_record(message, version: int | None = None) -> bytes:
    """The framed value of `message` at `version` (default: the newest its schema knows)."""
    cls = type(message)
    if RECORD_TYPE_BY_KEY.get(getattr(cls, "API_KEY", None)) is not cls:
        raise EncodeError(f"{cls.__qualname__} is not a metadata record type")
    if version is None:
        version = cls.MAX_VERSION
    elif not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise EncodeError(f"{cls.__name__} has versions {cls.MIN_VERSION}-{cls.MAX_VERSION}, "
                          f"not {version}")
    head = bytearray()
    write_uvarint(head, FRAME_VERSION)
    write_uvarint(head, cls.API_KEY)
    write_uvarint(head, version)
    parts: list = [head]
    cls.encode(message, version, parts)
    return b"".join(p.view() if hasattr(p, "view") else p for p in parts)


def decode_metadata_record(buf) -> object:
    """The record in a framed value; raises DecodeError for anything but exactly one record."""
    return decode_metadata_record_versioned(buf).record


def decode_metadata_record_versioned(buf) -> VersionedRecord:
    """Like decode_metadata_record, also returning the record version the value was written in
    (needed to write the record back unchanged)."""
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    frame_version, pos = _header_value(buf, 0, "frame version")
    if frame_version != FRAME_VERSION:
        raise DecodeError(f"metadata record frame version {frame_version} is not supported "
                          f"(only {FRAME_VERSION})")
    record_type, pos = _header_value(buf, pos, "record type")
    version, pos = _header_value(buf, pos, "record version")
    cls = RECORD_TYPE_BY_KEY.get(record_type)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {record_type}")
    if not cls.MIN_VERSION <= version <= cls.MAX_VERSION:
        raise UnsupportedVersionError(
            f"{cls.__name__} (type {record_type}) version {version} is not supported "
            f"(versions {cls.MIN_VERSION}-{cls.MAX_VERSION})")
    record, end = cls.decode(buf, pos, version)
    if end != len(buf):
        raise DecodeError(f"{len(buf) - end} bytes after the {cls.__name__} v{version} record")
    return VersionedRecord(record, version)


def _header_value(buf, pos: int, what: str) -> tuple[int, int]:
    try:
        value, pos = read_uvarint(buf, pos)
    except DecodeError as e:
        raise DecodeError(f"metadata record {what}: {e}") from None
    if value > _MAX_HEADER_VALUE:
        raise DecodeError(f"metadata record {what} {value} is out of range")
    return value, pos
