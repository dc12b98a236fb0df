"""Request/response frames: 4-byte size, header, body.

`decode_request` takes a frame *without* its size prefix (the server's reader strips it);
the encoders append a complete frame including the size prefix.
"""
from __future__ import annotations

import struct

from . import planted
from .api import KNOWN_API_BY_KEY, header_versions, supported_versions
from .errors import DecodeError, ErrorCode
from .messages import RequestHeader, ResponseHeader

__all__ = [
    "decode_request", "encode_response", "encode_request", "decode_response",
    "encode_api_versions_fallback", "frame_bytes",
]

# api_key, api_version, correlation_id: present in every request header version.
_FIXED_HEADER = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_API_RANGE = struct.Struct(">hhh")


def decode_request(frame) -> tuple:
    """Decode a request frame (no size prefix) into (RequestHeader, body).

    body is None when the api key or version is not one we have codecs for (`KNOWN_API_BY_KEY`,
    which includes APIs we do not advertise); the header is then parsed
    only as far as every version agrees (key, version, correlation id, client id), so the
    server can still answer with UNSUPPORTED_VERSION.
    """
    if type(frame) is not memoryview:
        frame = memoryview(frame)
    if len(frame) < _FIXED_HEADER.size:
        raise DecodeError(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame, 0)
    spec = KNOWN_API_BY_KEY.get(api_key)
    if spec is None or not spec.supports(api_version):
        client_id = _client_id(frame, _FIXED_HEADER.size)
        header = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                               correlation_id=correlation_id, client_id=client_id)
        return header, None
    header_version = 2 if spec.is_flexible(api_version) else 1
    header, pos = RequestHeader.decode(frame, 0, header_version)
    body, pos = spec.request_cls.decode(frame, pos, api_version)
    return header, body


def _client_id(frame: memoryview, pos: int) -> str | None:
    """Client id as a classic nullable string; lenient: garbage or absence gives None."""
    if len(frame) < pos + 2:
        return None
    n, = _INT16.unpack_from(frame, pos)
    if n < 0 or pos + 2 + n > len(frame):
        return None
    try:
        return str(frame[pos + 2:pos + 2 + n], "utf-8")
    except UnicodeDecodeError:
        return None


def _finish(head: bytearray, out: bytearray, parts: list, first: int) -> None:
    """Append the tail chunk and patch the total size into the frame's first 4 bytes."""
    if out:
        parts.append(out)
    total = 0
    for i in range(first, len(parts)):
        total += len(parts[i])
    _INT32.pack_into(head, 0, total - 4)


def encode_response(header, response, parts: list) -> None:
    """Append a complete response frame (size, response header, body) for `header`'s request."""
    api_key, version = header.request_api_key, header.request_api_version
    if planted.drop_diverging_epoch:  # a simulation run's planted codec bug; never in production
        response = planted.as_encoded(api_key, response)
    _, header_version = header_versions(api_key, version)
    first = len(parts)
    head = bytearray(4)
    head += _INT32.pack(header.correlation_id)
    if header_version >= 1:
        head.append(0)  # no tagged fields in the response header
    out = KNOWN_API_BY_KEY[api_key].response_cls.encode_into(response, version, head, parts)
    _finish(head, out, parts, first)


def encode_request(header, request, parts: list) -> None:
    """Append a complete request frame (for clients, replication and tests)."""
    api_key, version = header.request_api_key, header.request_api_version
    header_version, _ = header_versions(api_key, version)
    first = len(parts)
    head = bytearray(4)
    out = RequestHeader.encode_into(header, header_version, head, parts)
    out = type(request).encode_into(request, version, out, parts)
    _finish(head, out, parts, first)


def decode_response(buf, api_key: int, api_version: int) -> tuple:
    """Decode a response frame (no size prefix) into (ResponseHeader, body)."""
    if type(buf) is not memoryview:
        buf = memoryview(buf)
    _, header_version = header_versions(api_key, api_version)
    header, pos = ResponseHeader.decode(buf, 0, header_version)
    spec = KNOWN_API_BY_KEY.get(api_key)
    if spec is None:
        raise DecodeError(f"unknown api key {api_key}")
    body, pos = spec.response_cls.decode(buf, pos, api_version)
    return header, body


def encode_api_versions_fallback(header, parts: list, api_keys=None,
                                 error_code: int = ErrorCode.UNSUPPORTED_VERSION) -> None:
    """ApiVersions answer to a version we do not serve: v0 body, response header v0.

    KIP-511: the client cannot know our format yet, so the broker falls back to the v0
    layout (error code + api ranges) which every client can read, then retries with a
    version from the list. `api_keys` defaults to everything we serve.
    """
    ranges = supported_versions() if api_keys is None else list(api_keys)
    out = bytearray(4)
    out += _INT32.pack(header.correlation_id)
    out += _INT16.pack(error_code)
    out += _INT32.pack(len(ranges))
    for key, lo, hi in ranges:
        out += _API_RANGE.pack(key, lo, hi)
    _INT32.pack_into(out, 0, len(out) - 4)
    parts.append(out)


def frame_bytes(parts: list) -> bytes:
    """Join encoded parts into one bytes object (tests/tools; the server writes parts as-is)."""
    return b"".join(p.view() if hasattr(p, "view") else p for p in parts)


