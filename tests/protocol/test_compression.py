"""Compression codecs: wire format checks against independent encoders/decoders, and limits."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest

import kafka.codec
from kraftd.protocol import compression as C
from kraftd.protocol.compression import Compression, compress, decompress, xxh32
from kraftd.protocol.errors import CorruptRecordError, InvalidRecordError
from kraftd.protocol.records import build_batch, decode_records

CODECS = [c for c in Compression if c != Compression.NONE]
PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "random": os.urandom(150_000),  # incompressible: exercises stored lz4 blocks
    "text": b"".join(b"record %d: some json-ish {\"a\": %d}\n" % (i, i * 7) for i in range(20000)),
}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("name", PAYLOADS)
def test_roundtrip(codec, name):
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, bytearray(data)))) == data


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"", 1) == 0x0B2CB792
    # Header checksums written by an independent LZ4 frame encoder.
    frame = bytes(cramjam.lz4.compress(b"hello" * 50))
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF


def test_lz4_frame_matches_kafka_java_layout():
    data = PAYLOADS["text"]
    out = compress(Compression.LZ4, data)
    # magic, FLG 0x60 (v01, independent blocks, no checksums/size), BD 0x40 (64 KiB), HC
    assert out[:6] == b"\x04\x22\x4d\x18\x60\x40"
    assert out[6] == (xxh32(b"\x60\x40") >> 8) & 0xFF
    assert out.endswith(b"\x00\x00\x00\x00")
    pos = 7
    while True:  # every block fits 64 KiB
        (n,) = struct.unpack_from("<I", out, pos)
        if n == 0:
            break
        assert (n & 0x7FFFFFFF) <= 65536
        pos += 4 + (n & 0x7FFFFFFF)
    assert pos + 4 == len(out)
    assert bytes(cramjam.lz4.decompress(out)) == data  # an independent frame decoder


def test_lz4_reads_frames_with_optional_fields():
    lz4frame = pytest.importorskip("lz4.frame")
    data = PAYLOADS["text"] + PAYLOADS["random"]
    for bs in (lz4frame.BLOCKSIZE_MAX64KB, lz4frame.BLOCKSIZE_MAX256KB,
               lz4frame.BLOCKSIZE_MAX1MB, lz4frame.BLOCKSIZE_MAX4MB):
        for extras in ({}, {"content_checksum": True}, {"block_checksum": True},
                       {"store_size": False}):
            frame = lz4frame.compress(data, block_size=bs, block_linked=False, **extras)
            assert decompress(Compression.LZ4, frame) == data
    ours = compress(Compression.LZ4, data)
    assert lz4frame.decompress(ours) == data


def test_lz4_frames_from_kafka_python():
    if not kafka.codec.has_lz4():
        pytest.skip("kafka-python has no lz4 library here")
    data = PAYLOADS["text"]
    assert decompress(Compression.LZ4, kafka.codec.lz4_encode(data)) == data
    assert kafka.codec.lz4_decode(compress(Compression.LZ4, data)) == data


def test_lz4_rejects_dependent_blocks_and_bad_headers():
    linked = bytes(cramjam.lz4.compress(PAYLOADS["text"]))  # cramjam links blocks by default
    with pytest.raises(CorruptRecordError, match="dependent"):
        decompress(Compression.LZ4, linked)
    good = compress(Compression.LZ4, PAYLOADS["text"])
    bad_hc = bytearray(good)
    bad_hc[6] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="checksum"):
        decompress(Compression.LZ4, bytes(bad_hc))
    with pytest.raises(CorruptRecordError, match="magic"):
        decompress(Compression.LZ4, b"\x00" + good[1:])
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, good[:-4])  # no EndMark


def test_snappy_xerial_framing():
    data = PAYLOADS["text"]
    out = compress(Compression.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    # Decode the chunks independently: [int32 length][raw snappy block of <= 32 KiB]
    pos, parts = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        block = bytes(cramjam.snappy.decompress_raw(out[pos + 4:pos + 4 + n]))
        assert len(block) <= 32 * 1024
        parts.append(block)
        pos += 4 + n
    assert b"".join(parts) == data


def test_snappy_reads_raw_and_kafka_python_xerial(monkeypatch):
    data = PAYLOADS["text"]
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", type("S", (), {
            "compress": staticmethod(lambda b: bytes(cramjam.snappy.compress_raw(bytes(b)))),
            "decompress": staticmethod(lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))),
        }))
    framed = kafka.codec.snappy_encode(data, xerial_compatible=True, xerial_blocksize=4096)
    assert decompress(Compression.SNAPPY, framed) == data
    assert kafka.codec.snappy_decode(compress(Compression.SNAPPY, data)) == data


def test_zstd_streaming_frames_without_content_size():
    data = PAYLOADS["text"] * 3
    c = cramjam.zstd.Compressor()
    c.compress(data)
    stream = bytes(c.finish())
    assert C._zstd_content_size(stream) is None
    assert decompress(Compression.ZSTD, stream) == data
    two_frames = compress(Compression.ZSTD, b"abc" * 1000) + compress(Compression.ZSTD, b"xyz")
    assert decompress(Compression.ZSTD, two_frames) == b"abc" * 1000 + b"xyz"
    zstandard = pytest.importorskip("zstandard")
    assert zstandard.ZstdDecompressor().decompress(compress(Compression.ZSTD, data)) == data
    w = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(Compression.ZSTD, w) == data


def test_gzip_container_and_multi_member():
    data = PAYLOADS["text"]
    out = compress(Compression.GZIP, data)
    assert out[:2] == b"\x1f\x8b" and gzip.decompress(out) == data
    assert decompress(Compression.GZIP, gzip.compress(b"a" * 10) + gzip.compress(b"b")) == \
        b"a" * 10 + b"b"
    assert decompress(Compression.GZIP, kafka.codec.gzip_encode(data)) == data


# ------------------------------------------------------------------ limits and garbage

BOMB = b"\0" * (8 * 1024 * 1024)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_decompression_bomb_limit(codec):
    z = compress(codec, BOMB)
    assert len(z) < len(BOMB) // 20
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(codec, z, max_size=1024 * 1024)
    assert len(decompress(codec, z, max_size=len(BOMB))) == len(BOMB)  # exactly at the limit


def test_zstd_bomb_without_declared_size():
    c = cramjam.zstd.Compressor()
    c.compress(BOMB)
    stream = bytes(c.finish())
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(Compression.ZSTD, stream, max_size=100_000)


def test_module_default_limit_and_decode_records(monkeypatch):
    raw = build_batch([(None, BOMB, None, 0)], compression=Compression.ZSTD)
    with pytest.raises(CorruptRecordError, match="more than"):
        decode_records(raw, max_decompressed=1_000_000)
    monkeypatch.setattr(C, "MAX_DECOMPRESSED_SIZE", 1_000_000)
    with pytest.raises(CorruptRecordError, match="more than"):
        decode_records(raw)
    monkeypatch.undo()
    assert decode_records(raw)[0].value == BOMB


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_garbage_and_truncation_raise_corrupt(codec):
    good = compress(codec, PAYLOADS["text"])
    candidates = [os.urandom(200), good[: len(good) // 2], good[:10], b"\x82SNAPPY\x00" + b"\xff" * 12]
    for junk in candidates:
        try:
            out = decompress(codec, junk)
        except CorruptRecordError:
            continue
        # Some prefixes are valid streams (e.g. a gzip header alone never is, but raw snappy
        # of random bytes can be): anything returned must at least not be the full payload.
        assert out != PAYLOADS["text"]


def test_unknown_codec():
    with pytest.raises(InvalidRecordError):
        compress(5, b"x")
    with pytest.raises(InvalidRecordError):
        decompress(7, b"x")
