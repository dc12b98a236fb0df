"""Frames, headers and the API registry."""
from __future__ import annotations

import struct
import uuid

import pytest

from kio.schema.api_versions.v0.response import ApiVersionsResponse as KioApiVersionsV0
from kio.serial import entity_reader
from kraftd.protocol import api, framing
from kraftd.protocol.errors import DecodeError, ErrorCode
from kraftd.protocol.messages import (
    ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse, RequestHeader,
    ResponseHeader, VoteRequest,
)


def frame_of(parts) -> bytes:
    return framing.frame_bytes(parts)


def request_frame(api_key, version, body, client_id="test", correlation_id=99) -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id)
    parts: list = []
    framing.encode_request(header, body, parts)
    data = frame_of(parts)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return data


# -- registry -------------------------------------------------------------------------------------
def test_constants():
    assert (api.PRODUCE, api.FETCH, api.LIST_OFFSETS, api.METADATA, api.API_VERSIONS) == \
        (0, 1, 2, 3, 18)
    assert (api.CREATE_TOPICS, api.DELETE_RECORDS, api.INIT_PRODUCER_ID,
            api.OFFSET_FOR_LEADER_EPOCH, api.FETCH_SNAPSHOT) == (19, 21, 22, 23, 59)
    assert (api.VOTE, api.BEGIN_QUORUM_EPOCH, api.END_QUORUM_EPOCH, api.DESCRIBE_QUORUM) == \
        (52, 53, 54, 55)


def test_registry_built_from_schemas():
    spec = api.API_BY_KEY[api.FETCH]
    assert spec.name == "Fetch" and spec.request_cls is FetchRequest
    assert spec.response_cls is FetchResponse and spec.flexible_min == 12
    assert spec.min_version <= 12 <= spec.max_version
    for s in api.API_BY_KEY.values():
        assert s.request_cls.API_KEY == s.key == s.response_cls.API_KEY
    assert api.supported_versions()[0][0] == min(api.API_BY_KEY)


def test_header_versions():
    assert api.header_versions(api.FETCH, 11) == (1, 0)
    assert api.header_versions(api.BEGIN_QUORUM_EPOCH, 0) == (1, 0)   # flexible from v1 only
    assert api.header_versions(api.BEGIN_QUORUM_EPOCH, 1) == (2, 1)
    assert api.header_versions(api.VOTE, 0) == (2, 1)
    assert api.header_versions(api.FETCH, 12) == (2, 1)
    assert api.header_versions(api.API_VERSIONS, 3) == (2, 0)   # KIP-511: response v0
    assert api.header_versions(api.API_VERSIONS, 2) == (1, 0)
    assert api.header_versions(9999, 0) == (1, 0)


# -- headers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [0, 1, 2])
def test_request_header_roundtrip(version):
    h = RequestHeader(request_api_key=1, request_api_version=12, correlation_id=-5,
                      client_id="é" * 3 if version else "")
    data = h.to_bytes(version)
    assert RequestHeader.decode(memoryview(data), 0, version) == (h, len(data))
    if version == 2:   # ClientId stays a classic int16 string in the flexible header
        assert data[8:10] == struct.pack(">h", 6) and data.endswith(b"\x00")


@pytest.mark.parametrize("version", [0, 1])
def test_response_header_roundtrip(version):
    h = ResponseHeader(correlation_id=123)
    data = h.to_bytes(version)
    assert data == struct.pack(">i", 123) + (b"\x00" if version else b"")
    assert ResponseHeader.decode(memoryview(data), 0, version) == (h, len(data))


# -- requests -------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", list(api.API_BY_KEY.values()), ids=lambda s: s.name)
def test_request_frames_roundtrip_at_both_ends_of_the_range(spec):
    for version in (spec.min_version, spec.max_version):
        body = spec.request_cls()
        data = request_frame(spec.key, version, body)
        header, decoded = framing.decode_request(memoryview(data)[4:])
        assert (header.request_api_key, header.request_api_version) == (spec.key, version)
        assert header.correlation_id == 99 and header.client_id == "test"
        assert decoded.to_bytes(version) == body.to_bytes(version)


def test_vote_request_v2_pre_vote_roundtrip():
    """KIP-996: PreVote exists from Vote v2 on; it survives framing and encode/decode."""
    part = VoteRequest.PartitionData(partition_index=0, replica_epoch=7, replica_id=1,
                                     replica_directory_id=uuid.UUID(int=5),
                                     voter_directory_id=uuid.UUID(int=6), last_offset_epoch=6,
                                     last_offset=123, pre_vote=True)
    body = VoteRequest(cluster_id="c", voter_id=2, topics=[VoteRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[part])])
    data = request_frame(api.VOTE, 2, body)
    header, decoded = framing.decode_request(memoryview(data)[4:])
    assert (header.request_api_key, header.request_api_version) == (api.VOTE, 2)
    assert decoded == body and decoded.topics[0].partitions[0].pre_vote is True
    v2 = body.to_bytes(2)
    assert len(v2) == len(body.to_bytes(1)) + 1   # one bool more than v1
    assert VoteRequest.decode(memoryview(v2), 0, 2) == (body, len(v2))


def test_unknown_api_still_yields_the_header():
    frame = struct.pack(">hhih", 4242, 7, 31, 3) + b"cli" + b"\xde\xad\xbe\xef"
    header, body = framing.decode_request(memoryview(frame))
    assert body is None
    assert (header.request_api_key, header.request_api_version) == (4242, 7)
    assert (header.correlation_id, header.client_id) == (31, "cli")


def test_unsupported_version_still_yields_the_header():
    frame = struct.pack(">hhih", api.API_VERSIONS, 99, 8, -1) + b"\x00\x05junk"
    header, body = framing.decode_request(memoryview(frame))
    assert body is None and header.correlation_id == 8 and header.client_id is None


def test_short_or_malformed_frames_raise_decode_error():
    with pytest.raises(DecodeError):
        framing.decode_request(memoryview(b"\x00\x01\x00"))
    good = request_frame(api.FETCH, 12, FetchRequest(max_wait_ms=5))[4:]
    for cut in (9, 12, len(good) - 1):
        with pytest.raises(DecodeError):
            framing.decode_request(memoryview(good[:cut]))


# -- responses ------------------------------------------------------------------------------------
class FakeRegion:
    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def view(self):
        return memoryview(self.data)


def fetch_response_with(records) -> FetchResponse:
    part = FetchResponse.PartitionData(partition_index=0, high_watermark=10, records=records)
    topic = FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=7), partitions=[part])
    return FetchResponse(responses=[topic])


@pytest.mark.parametrize("version", [11, 12, 16])
def test_encode_response_frames_zero_copy_records(version):
    region = FakeRegion(b"\x01" * 5000)
    header = RequestHeader(request_api_key=api.FETCH, request_api_version=version,
                           correlation_id=77)
    parts: list = []
    framing.encode_response(header, fetch_response_with(region), parts)
    assert any(p is region for p in parts)
    data = frame_of(parts)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    rh, body = framing.decode_response(memoryview(data)[4:], api.FETCH, version)
    assert rh.correlation_id == 77
    assert bytes(body.responses[0].partitions[0].records) == b"\x01" * 5000


def test_api_versions_response_uses_header_v0_even_when_flexible():
    header = RequestHeader(request_api_key=api.API_VERSIONS, request_api_version=3,
                           correlation_id=5)
    resp = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(
        api_key=1, min_version=4, max_version=17)])
    parts: list = []
    framing.encode_response(header, resp, parts)
    data = frame_of(parts)
    assert data[4:8] == struct.pack(">i", 5)
    assert data[8:] == resp.to_bytes(3)           # no tagged-field byte after the id


def test_api_versions_fallback_is_readable_as_v0_by_kio():
    header = RequestHeader(request_api_key=api.API_VERSIONS, request_api_version=99,
                           correlation_id=1234)
    parts: list = []
    framing.encode_api_versions_fallback(header, parts)
    data = frame_of(parts)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    assert data[4:8] == struct.pack(">i", 1234)
    entity, size = entity_reader(KioApiVersionsV0)(memoryview(data[8:]), 0)
    assert size == len(data) - 8
    assert entity.error_code.value == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in entity.api_keys] == \
        api.supported_versions()


def test_request_with_flexible_header_client_roundtrip():
    body = ApiVersionsRequest(client_software_name="kraftd", client_software_version="0.1")
    data = request_frame(api.API_VERSIONS, 3, body, client_id=None)
    header, decoded = framing.decode_request(memoryview(data)[4:])
    assert header.client_id is None and decoded == body
