"""Control batches: one record whose key is (int16 version, int16 type) and whose value is a
type-specific message. ABORT/COMMIT are transaction markers (value: EndTxnMarker); KRaft uses
LEADER_CHANGE, SNAPSHOT_HEADER/FOOTER, KRAFT_VERSION and KRAFT_VOTERS, whose values the generated
codec encodes (LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord,
KRaftVersionRecord, VotersRecord) and callers pass in as bytes.
"""

from __future__ import annotations

import enum
import struct

from .errors import InvalidRecordError
from .records import NO_PRODUCER_ID, build_batch

__all__ = ["ControlType", "build_control_batch", "control_value", "parse_control_record_key",
           "control_record_key", "end_txn_marker_value", "parse_end_txn_marker_value"]

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5   # KRaftVersionRecord (KIP-853)
    KRAFT_VOTERS = 6    # VotersRecord: the voter set from this offset on (KIP-853)


def control_record_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def parse_control_record_key(key) -> tuple[int, int]:
    """(version, type) of a control record key. Newer key versions may append fields, so only
    the first 4 bytes are read (as Kafka does). Known types come back as ControlType."""
    if key is None or len(key) < 4:
        raise InvalidRecordError(
            f"control record key needs 4 bytes, got {None if key is None else len(key)}")
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid control record key version {version}")
    try:
        ctype = ControlType(ctype)
    except ValueError:
        pass  # unknown types are kept as int (Kafka maps them to UNKNOWN and skips them)
    return version, ctype


def control_value(message) -> bytes:
    """The value of a KRaft control record: its generated message (LeaderChangeMessage,
    SnapshotHeaderRecord, KRaftVersionRecord, VotersRecord, ...) encoded at version 0."""
    parts: list = []
    type(message).encode(message, 0, parts)
    return b"".join(bytes(p) for p in parts)


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    """Value of an ABORT/COMMIT marker record: EndTxnMarker v0 (version, coordinator epoch)."""
    return _END_TXN.pack(0, coordinator_epoch)


def parse_end_txn_marker_value(value) -> tuple[int, int]:
    if value is None or len(value) < 6:
        raise InvalidRecordError("end transaction marker value needs 6 bytes")
    return _END_TXN.unpack_from(value, 0)


def build_control_batch(control_type: int, value: bytes, *, base_offset: int, timestamp: int,
                        leader_epoch: int, producer_id: int = NO_PRODUCER_ID,
                        producer_epoch: int = -1) -> bytes:
    """A one-record control batch. `leader_epoch` goes into partition_leader_epoch. ABORT and
    COMMIT markers are transactional and need the producer's id/epoch; the KRaft types are not
    transactional and carry no producer id."""
    transactional = control_type in (ControlType.ABORT, ControlType.COMMIT)
    if transactional and producer_id == NO_PRODUCER_ID:
        raise ValueError("transaction markers need a producer id")
    return build_batch(
        [(control_record_key(control_type), value, None, timestamp)],
        base_offset=base_offset, partition_leader_epoch=leader_epoch, is_control=True,
        is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch)
