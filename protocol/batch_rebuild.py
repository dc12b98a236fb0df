"""A stored batch written again with some of its records: what the log cleaner keeps.

The rebuilt batch keeps its identity: base offset and last offset delta (so the offsets it
covers, and the producer's sequence range, stay what they were; the removed records become
gaps inside it), partition leader epoch, producer id, epoch and base sequence, timestamp type,
the transactional and control flags, and the codec. A batch left with no record is a header
alone (no codec), as Kafka writes one for a producer's last batch.

KIP-534's delete horizon: a batch that still holds tombstones after its first cleaning gets
the delete-horizon flag (attribute bit 6) and carries the horizon (the time from which its
tombstones may go) in its base timestamp; record timestamps stay right because their deltas
are taken from that base.
"""
from __future__ import annotations

from .records import (_COMPRESSION_MASK, _DELETE_HORIZON_BIT, _TIMESTAMP_TYPE_BIT, BatchHeader, Record,
                      append_record, batch_bytes)

__all__ = ["rebuild_batch"]


def rebuild_batch(header: BatchHeader, kept: list[Record], *, delete_horizon_ms: int | None = None) -> bytes:
    """`header`'s batch holding only `kept` (its own records, in offset order). With
    `delete_horizon_ms`, the batch carries that delete horizon; without, none."""
    attrs = header.attributes & ~_DELETE_HORIZON_BIT
    log_append_time = bool(attrs & _TIMESTAMP_TYPE_BIT)
    if not kept:
        attrs &= ~_COMPRESSION_MASK
        return batch_bytes(b"", attrs, base_offset=header.base_offset,
                           partition_leader_epoch=header.partition_leader_epoch,
                           last_offset_delta=header.last_offset_delta, base_timestamp=header.max_timestamp,
                           max_timestamp=header.max_timestamp, producer_id=header.producer_id,
                           producer_epoch=header.producer_epoch, base_sequence=header.base_sequence, count=0)
    if log_append_time:  # every record reads as the batch's max timestamp
        base_ts, max_ts = header.base_timestamp, header.max_timestamp
    else:
        base_ts, max_ts = kept[0].timestamp, max(r.timestamp for r in kept)
    if delete_horizon_ms is not None:
        attrs |= _DELETE_HORIZON_BIT
        base_ts = delete_horizon_ms
    body = bytearray()
    for r in kept:
        delta = 0 if log_append_time else r.timestamp - base_ts
        append_record(body, delta, r.offset - header.base_offset, r.key, r.value, r.headers)
    return batch_bytes(body, attrs, base_offset=header.base_offset, partition_leader_epoch=header.partition_leader_epoch,
                       last_offset_delta=header.last_offset_delta, base_timestamp=base_ts, max_timestamp=max_ts,
                       producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                       base_sequence=header.base_sequence, count=len(kept))
