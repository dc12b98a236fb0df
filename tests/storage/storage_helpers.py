"""Shared builders for the storage tests."""
from kraftd.protocol.records import build_batch


def batch(n=1, *, ts=1000, value=b"v", producer_id=-1, producer_epoch=-1, base_sequence=-1,
          epoch=-1, base_offset=0, ts_step=0) -> bytearray:
    recs = [(b"k%d" % i, value, None, ts + i * ts_step) for i in range(n)]
    return bytearray(build_batch(recs, base_offset=base_offset, producer_id=producer_id,
                                 producer_epoch=producer_epoch, base_sequence=base_sequence,
                                 partition_leader_epoch=epoch))


