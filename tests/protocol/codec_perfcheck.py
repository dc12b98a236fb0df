"""Micro-check (not a test): our codec versus kio on Fetch.

Run: .venv/bin/python tests/protocol/codec_perfcheck.py
Prints µs per operation for FetchResponse v16 encode and FetchRequest v15 decode, for a
Raft-style fetch (1 topic, 1 partition) and a wide one (1 topic, 50 partitions).
"""
from __future__ import annotations

import datetime
import io
import timeit
import uuid

from kio.schema.errors import ErrorCode as KErr
from kio.schema.fetch.v15 import request as kreq
from kio.schema.fetch.v16 import response as kresp
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records
from kraftd.protocol.messages import FetchRequest, FetchResponse

TOPIC = uuid.UUID(int=0x1234)
RECORDS = bytes(range(256)) * 4   # 1 KiB per partition


def ours_response(n: int) -> FetchResponse:
    parts = [FetchResponse.PartitionData(partition_index=i, high_watermark=1000 + i,
                                         last_stable_offset=1000 + i, log_start_offset=0,
                                         aborted_transactions=None, records=RECORDS) for i in range(n)]
    return FetchResponse(session_id=5, responses=[
        FetchResponse.FetchableTopicResponse(topic_id=TOPIC, partitions=parts)])


def kio_response(n: int):
    parts = tuple(kresp.PartitionData(
        partition_index=i, error_code=KErr.none, high_watermark=1000 + i,
        last_stable_offset=1000 + i, log_start_offset=0, aborted_transactions=None,
        records=Records(RECORDS)) for i in range(n))
    return kresp.FetchResponse(
        throttle_time=datetime.timedelta(0), error_code=KErr.none, session_id=5,
        responses=(kresp.FetchableTopicResponse(topic_id=TOPIC, partitions=parts),))


def request_bytes(n: int) -> bytes:
    parts = [FetchRequest.FetchPartition(partition=i, current_leader_epoch=3, fetch_offset=500,
                                         last_fetched_epoch=3, log_start_offset=0,
                                         partition_max_bytes=1 << 20) for i in range(n)]
    req = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=1),
                       max_wait_ms=500, min_bytes=1, max_bytes=1 << 24, session_id=0,
                       session_epoch=-1,
                       topics=[FetchRequest.FetchTopic(topic_id=TOPIC, partitions=parts)])
    return req.to_bytes(15)


def per_op(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=15)) / number * 1e6


def main() -> None:
    kwrite = entity_writer(kresp.FetchResponse)
    kread = entity_reader(kreq.FetchRequest)
    for n in (1, 50):
        ours, theirs = ours_response(n), kio_response(n)
        ours_parts: list = []
        FetchResponse.encode(ours, 16, ours_parts)
        kbuf = io.BytesIO()
        kwrite(kbuf, theirs)
        assert b"".join(ours_parts) == kbuf.getvalue()

        def enc_ours():
            FetchResponse.encode(ours, 16, [])

        def enc_kio():
            kwrite(io.BytesIO(), theirs)

        data = request_bytes(n)
        view = memoryview(data)
        assert kread(view, 0)[1] == len(data)

        def dec_ours():
            FetchRequest.decode(view, 0, 15)

        def dec_kio():
            kread(view, 0)

        number = 2000 if n == 1 else 200
        e_o, e_k = per_op(enc_ours, number), per_op(enc_kio, number)
        d_o, d_k = per_op(dec_ours, number), per_op(dec_kio, number)
        print(f"{n:3d} partitions  FetchResponse v16 encode: ours {e_o:8.1f} µs  "
              f"kio {e_k:8.1f} µs  ({e_k / e_o:4.1f}x)")
        print(f"{n:3d} partitions  FetchRequest v15 decode:  ours {d_o:8.1f} µs  "
              f"kio {d_k:8.1f} µs  ({d_k / d_o:4.1f}x)")


if __name__ == "__main__":
    main()
