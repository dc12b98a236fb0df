"""Record batch v2: interop with kafka-python and kio, round trips, corruption detection."""

from __future__ import annotations

import datetime
import io
import struct

import cramjam
import pytest
from hypothesis import given, settings, strategies as st

import kafka.codec
import kafka.record.default_records as kdr
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kraftd.protocol import records as R
from kraftd.protocol.compression import Compression
from kraftd.protocol.control_records import (
    ControlType, build_control_batch, end_txn_marker_value, parse_control_record_key,
    parse_end_txn_marker_value)
from kraftd.protocol.errors import CorruptRecordError, InvalidRecordError
from kraftd.protocol.records import (
    BATCH_HEADER_SIZE, Record, build_batch, compute_crc, crc_ok, decode_records,
    iter_batch_headers, iter_records, parse_batch_header, patch_base_offset,
    patch_leader_epoch, set_log_append_time, validate_batches)

ALL_CODECS = list(Compression)


@pytest.fixture
def kafka_codecs(monkeypatch):
    """kafka-python with every codec. Where the optional C libraries (python-snappy, lz4,
    zstandard) are missing, plug in cramjam primitives: kafka-python still does its own xerial
    framing, and the lz4/zstd frames come from cramjam, not from our compression module."""
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", type("S", (), {
            "compress": staticmethod(lambda b: bytes(cramjam.snappy.compress_raw(bytes(b)))),
            "decompress": staticmethod(lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b)))),
        }))
    if not kafka.codec.has_lz4():
        def lz4_encode(b):
            c = cramjam.lz4.Compressor(block_linked=False)
            c.compress(bytes(b))
            return bytes(c.finish())
        monkeypatch.setattr(kafka.codec, "has_lz4", lambda: True)
        monkeypatch.setattr(kdr, "lz4_encode", lz4_encode)
        monkeypatch.setattr(kdr, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(bytes(b))))
    if not kafka.codec.has_zstd():
        monkeypatch.setattr(kafka.codec, "has_zstd", lambda: True)
        monkeypatch.setattr(kdr, "zstd_encode", lambda b: bytes(cramjam.zstd.compress(bytes(b))))
        monkeypatch.setattr(kdr, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(bytes(b))))


def sample_records(n=50):
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"key-%d" % i * (1 + i % 5)
        value = None if i % 11 == 5 else (b"value %d " % i) * (1 + (i * 37) % 90)
        headers = [] if i % 3 else [("h%d" % j, None if j == 1 else b"v" * j) for j in range(i % 4)]
        out.append((key, value, headers, 1_700_000_000_000 + (i * 997) % 5000 - 100))
    return out


def kp_build(records, codec, base_offset=0, **kw):
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=kw.get("txn", False),
        producer_id=kw.get("pid", -1), producer_epoch=kw.get("pepoch", -1),
        base_sequence=kw.get("seq", -1), batch_size=1 << 24)
    for i, (k, v, h, ts) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=h or [])
    buf = bytearray(b.build())
    struct.pack_into(">q", buf, 0, base_offset)
    return bytes(buf)


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for r in records]


def expected(records, base_offset=0):
    return [(base_offset + i, ts, k, v, list(h or [])) for i, (k, v, h, ts) in enumerate(records)]


# ------------------------------------------------------------------ interop


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_kafka_python_built_batches_decode(kafka_codecs, codec):
    recs = sample_records()
    raw = kp_build(recs, codec, base_offset=1234, pid=77, pepoch=3, seq=10)
    h = parse_batch_header(raw)
    assert h.compression == codec  # kafka-python fell back to NONE if compression didn't pay
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 10)
    assert (h.base_offset, h.last_offset, h.next_offset) == (1234, 1283, 1284)
    assert h.size == len(raw)
    assert validate_batches(raw) == [h]
    assert as_tuples(decode_records(raw)) == expected(recs, 1234)


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name)
def test_our_batches_decode_with_kafka_python(kafka_codecs, codec):
    recs = sample_records()
    raw = build_batch(recs, base_offset=99, compression=codec, producer_id=5, producer_epoch=1,
                      base_sequence=42, partition_leader_epoch=9)
    kb = DefaultRecordBatch(raw)
    assert kb.validate_crc()
    assert kb.compression_type == codec
    assert (kb.base_offset, kb.leader_epoch, kb.producer_id, kb.base_sequence) == (99, 9, 5, 42)
    assert kb.last_offset_delta == len(recs) - 1
    assert kb.max_timestamp == max(r[3] for r in recs)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]
    assert got == expected(recs, 99)


def test_kafka_python_transactional_and_control_markers(kafka_codecs):
    raw = build_control_batch(ControlType.COMMIT, end_txn_marker_value(4), base_offset=10,
                              timestamp=123, leader_epoch=2, producer_id=8, producer_epoch=1)
    kb = DefaultRecordBatch(raw)
    assert kb.validate_crc() and kb.is_control_batch and kb.is_transactional
    (rec,) = list(kb)
    assert rec.commit and rec.version == 0
    h = parse_batch_header(raw)
    assert h.is_control and h.is_transactional and h.partition_leader_epoch == 2
    (r,) = decode_records(raw)
    assert parse_control_record_key(r.key) == (0, ControlType.COMMIT)
    assert parse_end_txn_marker_value(r.value) == (0, 4)


def test_kio_reads_our_batch_and_we_read_kio_batch():
    readers = pytest.importorskip("kio.records.readers")
    writers = pytest.importorskip("kio.records.writers")
    schema = pytest.importorskip("kio.records.schema")
    # kio keeps second-precision timestamps: use whole seconds.
    recs = [(k, v, h, (ts // 1000) * 1000) for k, v, h, ts in sample_records(20)]
    raw = build_batch(recs, base_offset=7, partition_leader_epoch=0)
    kbatch, size = readers.read_batch(raw, 0)
    assert size == len(raw)
    got = [(r.offset, int(r.timestamp.timestamp() * 1000), r.key, r.value,
            [(h.key.decode(), h.value) for h in r.headers]) for r in kbatch.records]
    assert got == expected(recs, 7)

    utc = datetime.timezone.utc
    new = schema.NewRecordBatch(
        producer_id=-1, producer_epoch=-1, base_sequence=-1, attributes=0,
        records=tuple(schema.Record(
            attributes=0, offset=100 + i,
            timestamp=datetime.datetime.fromtimestamp(ts / 1000, utc),
            key=k, value=v,
            headers=tuple(schema.RecordHeader(key=hk.encode(), value=hv) for hk, hv in h or []))
            for i, (k, v, h, ts) in enumerate(recs)))
    buf = io.BytesIO()
    writers.write_new_batch(buf, new)
    kraw = buf.getvalue()
    assert validate_batches(kraw)[0].base_offset == 100
    assert as_tuples(decode_records(kraw)) == expected(recs, 100)


# ------------------------------------------------------------------ round trips

header_st = st.tuples(st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=20)))
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=9000)),
    st.lists(header_st, max_size=4),
    st.integers(min_value=-1, max_value=2**62),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(record_st, min_size=1, max_size=30), st.sampled_from(ALL_CODECS),
       st.integers(min_value=0, max_value=2**62), st.booleans())
def test_roundtrip(recs, codec, base_offset, as_record):
    items = [Record(0, ts, k, v, h) for k, v, h, ts in recs] if as_record else recs
    raw = build_batch(items, base_offset=base_offset, compression=codec)
    (h,) = validate_batches(raw)
    assert h.records_count == len(recs) and h.last_offset_delta == len(recs) - 1
    assert h.base_timestamp == recs[0][3] and h.max_timestamp == max(r[3] for r in recs)
    assert as_tuples(decode_records(raw)) == expected(recs, base_offset)
    assert as_tuples(decode_records(memoryview(bytearray(raw)), h)) == expected(recs, base_offset)


def test_multibyte_varints_and_negative_deltas():
    big = b"x" * 70000  # 3-byte length varint
    recs = [(b"k" * 100, big, [("a" * 200, b"b" * 9000)], 10**12)] + [
        (b"%d" % i, b"v", None, 10**12 - 5000 + i * 3) for i in range(300)]  # 2-byte deltas
    raw = build_batch(recs, base_offset=2**40)
    assert as_tuples(decode_records(raw)) == expected(recs, 2**40)
    assert [r.offset for r in DefaultRecordBatch(raw)] == [2**40 + i for i in range(301)]


def test_iter_records_over_many_batches():
    bufs = [build_batch([(b"k", b"%d" % i, None, i)], base_offset=i) for i in range(5)]
    joined = b"".join(bufs)
    assert [r.value for r in iter_records(joined + bufs[0][:30])] == [b"%d" % i for i in range(5)]


def test_build_rejects_empty():
    with pytest.raises(ValueError):
        build_batch([])


# ------------------------------------------------------------------ header-level API

def small_batch(**kw):
    return build_batch([(b"key", b"value", [("h", b"x")], 1000), (None, b"v2", None, 1001)], **kw)


def test_every_flip_in_crc_range_is_detected():
    raw = small_batch(base_offset=5)
    assert crc_ok(raw, 0, parse_batch_header(raw))
    for i in range(len(raw)):
        for bit in (0x01, 0x80):
            bad = bytearray(raw)
            bad[i] ^= bit
            if i >= 21:
                h = parse_batch_header(bad)
                assert not crc_ok(bad, 0, h), i
                with pytest.raises(CorruptRecordError):
                    validate_batches(bad)
            elif 17 <= i < 21:  # the CRC field itself
                with pytest.raises(CorruptRecordError):
                    validate_batches(bad)
            elif i == 16:
                with pytest.raises(InvalidRecordError, match="magic"):
                    validate_batches(bad)
            elif 8 <= i < 12:  # batch_length: now too long, too short or below the minimum
                with pytest.raises(CorruptRecordError):
                    validate_batches(bad)
            else:  # base offset / leader epoch: outside the CRC by design
                assert validate_batches(bad)


def test_truncated_batches():
    raw = small_batch()
    two = raw + raw
    for n in range(1, len(raw)):
        with pytest.raises(CorruptRecordError):
            validate_batches(raw[:n])
        with pytest.raises(CorruptRecordError):
            validate_batches(two[:len(raw) + n])
        assert [p for p, _ in iter_batch_headers(two[:len(raw) + n])] == [0]
        assert list(iter_batch_headers(raw[:n])) == []
        if n < BATCH_HEADER_SIZE:
            with pytest.raises(CorruptRecordError):
                parse_batch_header(raw[:n])
        else:
            with pytest.raises(CorruptRecordError):
                decode_records(raw[:n])
    assert [p for p, _ in iter_batch_headers(two)] == [0, len(raw)]
    assert [p for p, _ in iter_batch_headers(b"\0" * 5 + two, 5)] == [5, 5 + len(raw)]


def test_validate_errors():
    with pytest.raises(InvalidRecordError):
        validate_batches(b"")
    legacy = bytearray(small_batch())
    legacy[16] = 1
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_batches(legacy)
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_batches(bytes(legacy[:30]))  # a short magic-1 message is still "bad magic"
    short = bytearray(small_batch())
    struct.pack_into(">i", short, 8, 48)
    with pytest.raises(CorruptRecordError):
        validate_batches(short)
    with pytest.raises(CorruptRecordError):
        list(iter_batch_headers(short))
    with pytest.raises(CorruptRecordError):
        parse_batch_header(short)


def rewrite(raw, **fields):
    """Change header fields and re-sign the CRC, to test checks beyond the CRC."""
    buf = bytearray(raw)
    h = parse_batch_header(buf)._replace(**fields)
    struct.pack_into(">qiibIhiqqqhii", buf, 0, *h)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, h))
    return bytes(buf)


def test_validate_semantic_checks():
    raw = small_batch()
    with pytest.raises(InvalidRecordError, match="last_offset_delta"):
        validate_batches(rewrite(raw, last_offset_delta=5))
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batches(rewrite(raw, records_count=0, last_offset_delta=-1))
    with pytest.raises(InvalidRecordError, match="codec"):
        validate_batches(rewrite(raw, attributes=6))
    with pytest.raises(InvalidRecordError, match="producer id"):
        validate_batches(rewrite(raw, attributes=0x10))
    ctrl = build_control_batch(ControlType.LEADER_CHANGE, b"\0\0", base_offset=0, timestamp=1,
                               leader_epoch=1)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(ctrl)
    assert validate_batches(ctrl + raw, from_client=False)[0].is_control
    # A compacted batch (records removed, offsets kept) is fine for replicated data.
    compacted = rewrite(build_batch([(b"k", b"v", None, 1)]), last_offset_delta=9)
    assert validate_batches(compacted, from_client=False)[0].last_offset == 9


def test_decode_count_and_length_errors():
    raw = small_batch()
    with pytest.raises(InvalidRecordError, match="declares 3"):
        decode_records(rewrite(raw, records_count=3))
    with pytest.raises(InvalidRecordError, match="left after"):
        decode_records(rewrite(raw, records_count=1))
    bad = bytearray(raw)
    bad[BATCH_HEADER_SIZE] = 0x7E  # first record length 63: overruns into the next record
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        decode_records(bytes(bad))
    with pytest.raises(InvalidRecordError):
        decode_records(rewrite(raw, magic=1))


def test_garbage_payloads_never_raise_other_errors():
    raw = small_batch()
    for i in range(BATCH_HEADER_SIZE, len(raw)):
        for v in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            bad = bytearray(raw)
            bad[i] = v
            try:
                decode_records(bytes(bad))
            except (CorruptRecordError, InvalidRecordError):
                pass


def test_patches_keep_crc_valid():
    buf = bytearray(small_batch() * 2)
    second = len(buf) // 2
    patch_base_offset(buf, second, 2**50)
    patch_leader_epoch(buf, second, 123)
    hs = validate_batches(buf)
    assert hs[1].base_offset == 2**50 and hs[1].partition_leader_epoch == 123
    assert hs[0].base_offset == 0
    assert [r.offset for r in decode_records(memoryview(buf)[second:])] == [2**50, 2**50 + 1]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD], ids=lambda c: c.name)
def test_set_log_append_time(kafka_codecs, codec):
    buf = bytearray(build_batch(sample_records(5), compression=codec))
    h = set_log_append_time(buf, 0, parse_batch_header(buf), 424242)
    assert h == parse_batch_header(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 424242 and h.compression == codec
    assert crc_ok(buf, 0, h) and validate_batches(buf) == [h]
    assert {r.timestamp for r in decode_records(buf)} == {424242}
    assert {r.timestamp for r in DefaultRecordBatch(bytes(buf))} == {424242}
    assert DefaultRecordBatch(bytes(buf)).validate_crc()
    h2 = set_log_append_time(buf, 0, 555)  # header-less form
    assert h2.max_timestamp == 555 and crc_ok(buf, 0, h2)


def test_header_properties():
    raw = build_batch([(b"k", b"v", None, 5)] * 3, base_offset=10, compression=Compression.GZIP,
                      is_transactional=True, producer_id=3, timestamp_type=1)
    h = parse_batch_header(raw)
    assert h.magic == 2 and h.size == len(raw) and h.batch_length == len(raw) - 12
    assert (h.last_offset, h.next_offset) == (12, 13)
    assert h.compression is Compression.GZIP and h.timestamp_type == 1
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert R.BATCH_HEADER_SIZE == 61


def test_control_batch_kraft_types():
    for ct in (ControlType.LEADER_CHANGE, ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER):
        raw = build_control_batch(ct, b"payload", base_offset=42, timestamp=99, leader_epoch=6)
        (h,) = validate_batches(raw, from_client=False)
        assert h.is_control and not h.is_transactional and h.producer_id == -1
        assert h.partition_leader_epoch == 6 and h.base_offset == 42
        (r,) = decode_records(raw)
        assert (r.offset, r.timestamp, r.value) == (42, 99, b"payload")
        assert parse_control_record_key(r.key) == (0, ct)
    assert parse_control_record_key(b"\x00\x01\x00\x63extra") == (1, 99)
    for bad in (None, b"\x00\x00\x00", b"\xff\xff\x00\x00"):
        with pytest.raises(InvalidRecordError):
            parse_control_record_key(bad)
    with pytest.raises(ValueError):
        build_control_batch(ControlType.ABORT, b"", base_offset=0, timestamp=0, leader_epoch=0)
