"""The code generator on a purpose-built schema that uses every feature at once."""
from __future__ import annotations

import struct
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftd.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kraftd.protocol.generator import build_classes, source_for
from kraftd.protocol.primitives import ZERO_UUID, read_uvarint
from kraftd.protocol.schema_model import parse_schema

SCHEMA = {
    "type": "data", "name": "Sample", "validVersions": "0-2", "flexibleVersions": "1+",
    "fields": [
        {"name": "Count", "type": "int64", "versions": "1+", "taggedVersions": "1+",
         "tag": 0, "default": "7"},
        {"name": "Id", "type": "int32", "versions": "0+"},
        {"name": "Epoch", "type": "int16", "versions": "0+", "default": "-1"},
        {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "1+"},
        {"name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Recs", "type": "records", "versions": "0+", "nullableVersions": "0+"},
        {"name": "Items", "type": "[]Item", "versions": "0+", "nullableVersions": "2+",
         "fields": [
             {"name": "Key", "type": "int16", "versions": "0+"},
             {"name": "Value", "type": "string", "versions": "0+"},
             {"name": "Tags", "type": "[]int32", "versions": "0+"},
         ]},
        {"name": "TopicId", "type": "uuid", "versions": "1+"},
        {"name": "Weight", "type": "float64", "versions": "0+", "default": "1.5"},
        {"name": "Flag", "type": "bool", "versions": "0+", "default": "true"},
        {"name": "Note", "type": "string", "versions": "1+", "nullableVersions": "1+",
         "taggedVersions": "1+", "tag": 1, "default": "null"},
        {"name": "Leader", "type": "LeaderInfo", "versions": "1+", "taggedVersions": "1+",
         "tag": 3},
        {"name": "Opt", "type": "Opt", "versions": "2+", "nullableVersions": "2+",
         "fields": [{"name": "X", "type": "int8", "versions": "2+"}]},
        {"name": "Names", "type": "[]string", "versions": "0+"},
        {"name": "Ids", "type": "[]uuid", "versions": "1+"},
    ],
    "commonStructs": [
        {"name": "LeaderInfo", "versions": "0+", "fields": [
            {"name": "LeaderId", "type": "int32", "versions": "0+", "default": "-1"},
            {"name": "LeaderEpoch", "type": "int32", "versions": "0+", "default": "-1"},
        ]},
    ],
}

Sample = build_classes(parse_schema(SCHEMA))
VERSIONS = [0, 1, 2]


def full(version: int) -> "Sample":
    """An instance using every field present in `version` with non-default values."""
    kw = dict(
        id=42, epoch=3, name="name", blob=b"\x00\x01", recs=b"RECORDS" * 3,
        items=[Sample.Item(key=1, value="v" * 200, tags=[1, -2, 3]), Sample.Item(key=2)],
        weight=-0.25, flag=False, names=["a", "é"],
    )
    if version >= 1:
        kw.update(count=8, topic_id=uuid.UUID(int=12345), note="note",
                  leader=Sample.LeaderInfo(leader_id=1, leader_epoch=2),
                  ids=[uuid.UUID(int=1), ZERO_UUID])
    if version >= 2:
        kw.update(opt=Sample.Opt(x=-3))
    return Sample(**kw)


def decode(data, version):
    obj, pos = Sample.decode(memoryview(data), 0, version)
    assert pos == len(data)
    return obj


# -- class contract ---------------------------------------------------------------------------
def test_defaults_and_constructor():
    s = Sample()
    assert (s.count, s.id, s.epoch, s.name, s.weight, s.flag) == (7, 0, -1, "", 1.5, True)
    assert s.note is None and s.blob == b"" and s.topic_id == ZERO_UUID
    assert s.items == [] and s.items is not Sample().items
    assert s.leader == Sample.LeaderInfo(leader_id=-1, leader_epoch=-1)
    assert s._unknown_tagged_fields is None
    with pytest.raises(TypeError):
        Sample(1)
    with pytest.raises(AttributeError):
        s.not_a_field = 1          # __slots__
    assert not hasattr(s, "__dict__")
    assert Sample.Item.__qualname__ == "Sample.Item"
    assert repr(Sample.Item(key=5)) == "Sample.Item(key=5, value='', tags=[])"
    assert Sample(id=1) == Sample(id=1) != Sample(id=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_roundtrip_every_version(version):
    obj = full(version)
    data = obj.to_bytes(version)
    back = decode(data, version)
    assert back == obj
    assert back.to_bytes(version) == data


def test_fields_absent_from_a_version_decode_as_defaults():
    back = decode(full(2).to_bytes(0), 0)
    assert back.topic_id == ZERO_UUID and back.count == 7 and back.opt == Sample.Opt()
    assert back.id == 42


def test_one_struct_per_run_of_fixed_fields():
    src = source_for(Sample, 0)
    assert "o.id, o.epoch, = _K" in src            # int32 + int16 read together
    assert "o.weight, o.flag, = _K" in src


# -- tagged fields -----------------------------------------------------------------------------
def tag_section(data: bytes, start: int) -> list[tuple[int, bytes]]:
    n, pos = read_uvarint(data, start)
    out = []
    for _ in range(n):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        out.append((tag, data[pos:pos + size]))
        pos += size
    assert pos == len(data)
    return out


def test_tagged_fields_at_default_are_not_written():
    plain = Sample(name="x").to_bytes(1)
    assert plain.endswith(b"\x00")               # empty tagged-field section
    assert decode(plain, 1) == Sample(name="x")
    with_count = Sample(name="x", count=8).to_bytes(1)
    assert len(with_count) == len(plain) + 1 + 1 + 8   # tag, size, int64


def test_unknown_tags_are_kept_and_merged_in_order():
    obj = Sample(count=9, note="n", leader=Sample.LeaderInfo(leader_id=4))
    obj._unknown_tagged_fields = [(5, b"five"), (2, b"\x02")]
    data = obj.to_bytes(1)
    back = decode(data, 1)
    assert back._unknown_tagged_fields == [(2, b"\x02"), (5, b"five")]
    assert back.count == 9 and back.note == "n" and back.leader.leader_id == 4
    assert back.to_bytes(1) == data
    # Parse the section by hand: tags strictly ascending, known and unknown interleaved.
    head = Sample().to_bytes(1)[:-1]             # everything before the tag section
    tags = [t for t, _ in tag_section(data, len(head))]
    assert tags == [0, 1, 2, 3, 5]


def test_unknown_tags_in_nested_structs_roundtrip():
    leader = Sample.LeaderInfo(leader_id=1)
    leader._unknown_tagged_fields = [(7, b"x" * 300)]
    data = Sample(leader=leader).to_bytes(2)
    back = decode(data, 2)
    assert back.leader._unknown_tagged_fields == [(7, b"x" * 300)]
    assert back.to_bytes(2) == data


def test_tagged_value_size_mismatch_is_a_decode_error():
    data = bytearray(Sample(count=8).to_bytes(1))
    i = data.rfind(b"\x01\x00\x08") + 1          # one tag: tag 0, size 8
    data[i + 1] = 9
    data += b"\x00"
    with pytest.raises(DecodeError):
        decode(bytes(data), 1)


# -- nullability -------------------------------------------------------------------------------
def test_nullable_fields():
    v2 = Sample(name=None, blob=None, recs=None, items=None, opt=None, note=None)
    assert decode(v2.to_bytes(2), 2) == v2
    with pytest.raises(EncodeError):
        Sample(name=None).to_bytes(0)             # nullable only from v1
    with pytest.raises(EncodeError):
        Sample(items=None).to_bytes(1)            # nullable only from v2


def test_out_of_range_or_wrong_type_is_an_encode_error():
    with pytest.raises(EncodeError, match="Sample v0"):
        Sample(id=2**31).to_bytes(0)
    with pytest.raises(EncodeError):
        Sample(name=5).to_bytes(0)


def test_null_where_not_nullable_is_a_decode_error():
    data = bytearray(Sample(name="").to_bytes(0))
    i = 4 + 2                                     # after id, epoch: the name's int16 length
    assert data[i:i + 2] == b"\x00\x00"
    data[i:i + 2] = b"\xff\xff"
    with pytest.raises(DecodeError, match="null"):
        decode(bytes(data), 0)


# -- hostile and malformed input ---------------------------------------------------------------
def test_hostile_array_count_fails_fast():
    head = Sample().to_bytes(0)
    # v0: id, epoch, name(2), blob(4), recs(4) and then the int32 item count.
    i = 4 + 2 + 2 + 4 + 4
    assert head[i:i + 4] == b"\x00\x00\x00\x00"
    data = head[:i] + struct.pack(">i", 2**31 - 1) + head[i + 4:]
    t = time.perf_counter()
    with pytest.raises(DecodeError):
        decode(data, 0)
    assert time.perf_counter() - t < 0.1


def test_hostile_compact_lengths_fail_fast():
    head = Sample().to_bytes(1)
    # v1 starts with id, epoch then the compact name: replace its length by 2**32-1.
    data = head[:6] + b"\xff\xff\xff\xff\x0f" + head[7:]
    with pytest.raises(DecodeError):
        decode(data, 1)
    data = head[:6] + b"\xff\xff\xff\xff\xff\x01" + head[7:]     # 6-byte varint
    with pytest.raises(DecodeError, match="varint"):
        decode(data, 1)


def test_negative_length_is_a_decode_error():
    head = bytearray(Sample().to_bytes(0))
    head[6:8] = struct.pack(">h", -5)
    with pytest.raises(DecodeError, match="length"):
        decode(bytes(head), 0)


def test_invalid_utf8_is_a_decode_error():
    data = Sample(name="ab").to_bytes(0).replace(b"\x00\x02ab", b"\x00\x02\xff\xfe")
    with pytest.raises(DecodeError, match="UTF-8"):
        decode(data, 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_a_decode_error(version):
    data = full(version).to_bytes(version)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            Sample.decode(memoryview(data[:cut]), 0, version)


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(VERSIONS), junk=st.binary(max_size=80),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4))
def test_garbage_never_escapes_as_another_exception(version, junk, flips):
    for data in (junk, full(version).to_bytes(version)):
        data = bytearray(data)
        for i, b in flips:
            if data:
                data[i % len(data)] = b
        try:
            Sample.decode(memoryview(bytes(data)), 0, version)
        except DecodeError:
            pass


def test_unsupported_version():
    with pytest.raises(UnsupportedVersionError):
        Sample.decode(memoryview(b""), 0, 3)
    with pytest.raises(UnsupportedVersionError):
        Sample().to_bytes(3)


# -- zero copy ---------------------------------------------------------------------------------
class FakeRegion:
    """Stands in for storage's FileRegion: has a length, no buffer protocol."""

    def __init__(self, data: bytes):
        self.data = data

    def __len__(self):
        return len(self.data)

    def view(self):
        return memoryview(self.data)


def test_bytes_and_records_decode_as_views_of_the_input():
    data = full(1).to_bytes(1)
    buf = memoryview(data)
    obj, _ = Sample.decode(buf, 0, 1)
    assert isinstance(obj.recs, memoryview) and obj.recs.obj is data
    assert isinstance(obj.blob, memoryview) and obj.blob.obj is data
    assert bytes(obj.recs) == b"RECORDS" * 3


@pytest.mark.parametrize("version", VERSIONS)
def test_encode_hands_values_over_uncopied(version):
    region = FakeRegion(b"R" * 1000)
    view = memoryview(b"0123456789")
    obj = full(version)
    obj.recs, obj.blob = region, view
    parts: list = []
    Sample.encode(obj, version, parts)
    assert any(p is region for p in parts) and any(p is view for p in parts)
    joined = b"".join(p.view() if isinstance(p, FakeRegion) else p for p in parts)
    back = decode(joined, version)
    assert bytes(back.recs) == b"R" * 1000 and bytes(back.blob) == b"0123456789"


def test_nested_class_codecs():
    item = Sample.Item(key=3, value="x", tags=[7])
    parts: list = []
    Sample.Item.encode(item, 1, parts)
    data = b"".join(parts)
    assert Sample.Item.decode(memoryview(data), 0, 1) == (item, len(data))
