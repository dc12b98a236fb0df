"""Produce v0-2, which kio (following Kafka 4) no longer has, checked against bytes laid out by
hand from the protocol guide: v0-2 requests are v3 without TransactionalId; responses gain
ThrottleTimeMs in v1 (after the array) and LogAppendTimeMs in v2."""
import struct

import pytest

from kraftd.protocol.messages import ProduceRequest, ProduceResponse


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


RECORDS = b"\x01\x02\x03"
REQUEST = (struct.pack(">hi", -1, 1500) + struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", 1)
           + struct.pack(">i", 4) + struct.pack(">i", len(RECORDS)) + RECORDS)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_request_bytes(version):
    request, end = ProduceRequest.decode(memoryview(REQUEST), 0, version)
    assert end == len(REQUEST)
    assert (request.acks, request.timeout_ms, request.transactional_id) == (-1, 1500, None)
    data = request.topic_data[0]
    assert data.name == "t" and data.partition_data[0].index == 4
    assert bytes(data.partition_data[0].records) == RECORDS
    assert ProduceRequest.to_bytes(request, version) == REQUEST


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_response_bytes(version):
    response = ProduceResponse(throttle_time_ms=7, responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=4, error_code=0, base_offset=42, log_append_time_ms=99)])])
    expected = (struct.pack(">i", 1) + _string(b"t") + struct.pack(">i", 1) + struct.pack(">ihq", 4, 0, 42)
                + (struct.pack(">q", 99) if version >= 2 else b"")
                + (struct.pack(">i", 7) if version >= 1 else b""))
    assert ProduceResponse.to_bytes(response, version) == expected
