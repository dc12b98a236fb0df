"""KRaft metadata record values: frame version, record type, record version, then the record.

kio does not model the metadata records, so the independent checks here are byte vectors laid
out by hand from the protocol spec (unsigned varints, compact strings and arrays, tagged
fields), plus round trips of realistic values and of hypothesis-built records.
"""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftd.protocol.errors import DecodeError, EncodeError, UnsupportedVersionError
from kraftd.protocol.messages import (
    AccessControlEntryRecord, RemoveAccessControlEntryRecord,
    ConfigRecord, FetchRequest, LeaderChangeMessage, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RemoveTopicRecord, RemoveUserScramCredentialRecord, TopicRecord,
    UserScramCredentialRecord,
)
from kraftd.protocol.metadata_records import (
    FRAME_VERSION, RECORD_TYPE_BY_KEY, decode_metadata_record, decode_metadata_record_versioned,
    encode_metadata_record,
)

SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

TOPIC_ID = uuid.UUID("6f1d2c3b-4a59-4e68-8d7c-0b1a2f3e4d5c")
DIR_A = uuid.UUID("a0a0a0a0-0000-4000-8000-000000000001")
DIR_B = uuid.UUID("b0b0b0b0-0000-4000-8000-000000000002")
DIR_C = uuid.UUID("c0c0c0c0-0000-4000-8000-000000000003")
INCARNATION = uuid.UUID("1e2d3c4b-5a69-4788-97a6-b5c4d3e2f100")


def _uvarint(n: int) -> bytes:
    """LEB128, written out again here rather than borrowed from the code under test."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _compact_int32s(xs) -> bytes:
    return _uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


# -- the registry ------------------------------------------------------------------------------
def test_record_types_are_kafkas_api_keys():
    assert {k: c.__name__ for k, c in RECORD_TYPE_BY_KEY.items()} == {
        0: "RegisterBrokerRecord", 2: "TopicRecord", 3: "PartitionRecord", 4: "ConfigRecord",
        5: "PartitionChangeRecord", 9: "RemoveTopicRecord", 11: "UserScramCredentialRecord",
        15: "ProducerIdsRecord", 18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord",
        22: "RemoveUserScramCredentialRecord"}
    for cls in RECORD_TYPE_BY_KEY.values():
        assert cls.FLEXIBLE_MIN == cls.MIN_VERSION == 0   # every version flexible ("0+")
    assert (PartitionRecord.MAX_VERSION, PartitionChangeRecord.MAX_VERSION,
            RegisterBrokerRecord.MAX_VERSION) == (2, 2, 3)


# -- hand-laid bytes -------------------------------------------------------------------------
def test_topic_record_bytes_by_hand():
    rec = TopicRecord(name="orders", topic_id=TOPIC_ID)
    expected = (b"\x01"                        # frame version 1
                + b"\x02"                      # record type: TopicRecord
                + b"\x00"                      # record version 0
                + b"\x07orders"                # compact string: length + 1, then UTF-8
                + TOPIC_ID.bytes               # uuid: 16 bytes, big-endian
                + b"\x00")                     # no tagged fields
    assert encode_metadata_record(rec) == expected
    assert decode_metadata_record(expected) == rec


def test_partition_change_record_bytes_by_hand():
    """Everything but the ids is a tagged field: only the changed ones are written, by tag."""
    rec = PartitionChangeRecord(partition_id=7, topic_id=TOPIC_ID, isr=[1, 2], leader=2)
    isr = _compact_int32s([1, 2])
    expected = (b"\x01\x05\x00"
                + struct.pack(">i", 7) + TOPIC_ID.bytes
                + b"\x02"                                  # two tagged fields
                + b"\x00" + _uvarint(len(isr)) + isr       # tag 0 Isr
                + b"\x01\x04" + struct.pack(">i", 2))      # tag 1 Leader
    assert expected.hex() == ("010500" "00000007" + TOPIC_ID.hex + "02"
                              "0009" "03" "00000001" "00000002" "0104" "00000002")
    assert encode_metadata_record(rec, 0) == expected
    assert decode_metadata_record_versioned(expected) == (rec, 0)


def test_partition_record_v1_bytes_by_hand():
    rec = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 3],
                          leader=1, leader_recovery_state=1, leader_epoch=4, partition_epoch=9,
                          directories=[DIR_A, DIR_B, DIR_C])
    expected = (b"\x01\x03\x01"
                + struct.pack(">i", 0) + TOPIC_ID.bytes
                + _compact_int32s([1, 2, 3]) + _compact_int32s([1, 3])
                + b"\x01" + b"\x01"                        # empty removing / adding replicas
                + struct.pack(">iii", 1, 4, 9)             # leader, leader epoch, partition epoch
                + b"\x04" + DIR_A.bytes + DIR_B.bytes + DIR_C.bytes
                + b"\x01" + b"\x00\x01\x01")               # tag 0 LeaderRecoveryState = 1
    assert encode_metadata_record(rec, 1) == expected
    assert decode_metadata_record(expected) == rec


def test_producer_ids_record_bytes_by_hand():
    rec = ProducerIdsRecord(broker_id=3, broker_epoch=12, next_producer_id=2000)
    expected = b"\x01\x0f\x00" + struct.pack(">iqq", 3, 12, 2000) + b"\x00"
    assert encode_metadata_record(rec) == expected
    assert decode_metadata_record(expected) == rec


def test_scram_credential_records_bytes_by_hand():
    rec = UserScramCredentialRecord(name="alice", mechanism=2, salt=b"\x01\x02", stored_key=b"S" * 3,
                                    server_key=b"K" * 2, iterations=4096)
    # compact string and bytes: length + 1 as an unsigned varint
    expected = (b"\x01\x0b\x00" + b"\x06alice" + b"\x02" + b"\x03\x01\x02" + b"\x04SSS" + b"\x03KK"
                + struct.pack(">i", 4096) + b"\x00")
    assert encode_metadata_record(rec) == expected
    assert decode_metadata_record(expected) == rec
    removal = RemoveUserScramCredentialRecord(name="alice", mechanism=1)
    expected = b"\x01\x16\x00" + b"\x06alice" + b"\x01" + b"\x00"
    assert encode_metadata_record(removal) == expected
    assert decode_metadata_record(expected) == removal


def test_access_control_entry_records_bytes_by_hand():
    rec = AccessControlEntryRecord(id=TOPIC_ID, resource_type=2, resource_name="orders", pattern_type=4,
                                   principal_name="User:alice", host="*", operation=3, permission_type=3)
    expected = (b"\x01\x12\x00" + TOPIC_ID.bytes + b"\x02" + b"\x07orders" + b"\x04" + b"\x0bUser:alice"
                + b"\x02*" + b"\x03" + b"\x03" + b"\x00")
    assert encode_metadata_record(rec) == expected
    assert decode_metadata_record(expected) == rec
    removal = RemoveAccessControlEntryRecord(id=TOPIC_ID)
    expected = b"\x01\x13\x00" + TOPIC_ID.bytes + b"\x00"
    assert encode_metadata_record(removal) == expected
    assert decode_metadata_record(expected) == removal


def test_multi_byte_varint_header_is_read():
    """A record type written in a needlessly long (but valid) varint still decodes."""
    body = TopicRecord(name="t", topic_id=TOPIC_ID).to_bytes(0)
    assert decode_metadata_record(b"\x81\x00\x82\x00\x80\x00" + body).name == "t"


# -- round trips with realistic values -------------------------------------------------------
def _endpoints(cls):
    return [cls.BrokerEndpoint(name="PLAINTEXT", host="broker-1.internal", port=9092,
                               security_protocol=0),
            cls.BrokerEndpoint(name="CONTROLLER", host="10.0.0.7", port=65535,
                               security_protocol=1)]


REALISTIC = [
    (RegisterBrokerRecord(broker_id=1, incarnation_id=INCARNATION, broker_epoch=81,
                          end_points=_endpoints(RegisterBrokerRecord),
                          features=[RegisterBrokerRecord.BrokerFeature(
                              name="metadata.version", min_supported_version=1,
                              max_supported_version=21)],
                          rack=None, fenced=True), 0),
    (RegisterBrokerRecord(broker_id=2, is_migrating_zk_broker=False, incarnation_id=INCARNATION,
                          broker_epoch=2**40, end_points=_endpoints(RegisterBrokerRecord),
                          features=[], rack="eu-west-1a", fenced=False,
                          in_controlled_shutdown=True, log_dirs=[DIR_A, DIR_B]), 3),
    (TopicRecord(name="__consumer_offsets", topic_id=TOPIC_ID), 0),
    (PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3],
                     leader=1, leader_epoch=0, partition_epoch=0), 0),
    (PartitionRecord(partition_id=11, topic_id=TOPIC_ID, replicas=[4, 5, 6, 7], isr=[4],
                     removing_replicas=[7], adding_replicas=[6], leader=4,
                     leader_recovery_state=1, leader_epoch=17, partition_epoch=33,
                     directories=[DIR_A, DIR_B, DIR_C, uuid.UUID(int=0)],
                     eligible_leader_replicas=[5], last_known_elr=None), 2),
    (PartitionRecord(partition_id=1, topic_id=TOPIC_ID, replicas=[2], isr=[], leader=-1,
                     leader_epoch=3, partition_epoch=5, directories=[DIR_A],
                     eligible_leader_replicas=[], last_known_elr=[2]), 2),
    (ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms",
                  value="604800000"), 0),
    (ConfigRecord(resource_type=4, resource_name="", name="log.cleaner.threads", value=None), 0),
    (PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID), 0),
    (PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, isr=[1], leader=-1,
                           replicas=[1, 2], removing_replicas=[], adding_replicas=[2],
                           leader_recovery_state=0), 0),
    (PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, directories=[DIR_B, DIR_C]), 1),
    (PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, isr=[1, 2], leader=2,
                           directories=[DIR_A, DIR_B], eligible_leader_replicas=[3],
                           last_known_elr=[]), 2),
    (RemoveTopicRecord(topic_id=TOPIC_ID), 0),
    (ProducerIdsRecord(broker_id=1, broker_epoch=-1, next_producer_id=1000), 0),
    (UserScramCredentialRecord(name="svc-orders", mechanism=1, salt=bytes(range(16)), stored_key=bytes(32),
                               server_key=b"\xff" * 32, iterations=8192), 0),
    (RemoveUserScramCredentialRecord(name="svc-orders", mechanism=1), 0),
    (AccessControlEntryRecord(id=TOPIC_ID, resource_type=3, resource_name="billing-", pattern_type=4,
                              principal_name="User:CN=svc,OU=eng", host="10.0.0.7", operation=2,
                              permission_type=2), 0),
    (RemoveAccessControlEntryRecord(id=TOPIC_ID), 0),
]


@pytest.mark.parametrize("rec,version", REALISTIC,
                         ids=[f"{type(r).__name__}-v{v}" for r, v in REALISTIC])
def test_realistic_round_trip(rec, version):
    data = encode_metadata_record(rec, version)
    assert data[:3] == bytes([FRAME_VERSION, type(rec).API_KEY, version])
    got = decode_metadata_record_versioned(data)
    assert got.version == version and got.record == rec
    assert type(got.record) is type(rec)
    assert encode_metadata_record(got.record, version) == data


def test_every_record_type_has_a_realistic_case():
    assert {type(r) for r, _ in REALISTIC} == set(RECORD_TYPE_BY_KEY.values())


def test_default_version_is_the_newest():
    rec = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1)
    assert encode_metadata_record(rec)[2] == PartitionRecord.MAX_VERSION
    assert encode_metadata_record(rec) == encode_metadata_record(rec, PartitionRecord.MAX_VERSION)


def test_nullable_fields_distinguish_null_from_empty():
    null = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=None)
    empty = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[])
    assert encode_metadata_record(null, 0) != encode_metadata_record(empty, 0)
    assert decode_metadata_record(encode_metadata_record(null, 0)).isr is None
    assert decode_metadata_record(encode_metadata_record(empty, 0)).isr == []


# -- refusals ----------------------------------------------------------------------------------
def test_encode_refuses_what_is_not_a_metadata_record():
    with pytest.raises(EncodeError):
        encode_metadata_record(FetchRequest())
    with pytest.raises(EncodeError):
        encode_metadata_record(LeaderChangeMessage())    # a data message without a type
    with pytest.raises(EncodeError):
        encode_metadata_record(TopicRecord(name="t"), 1)
    with pytest.raises(EncodeError):   # non-nullable field left None
        encode_metadata_record(TopicRecord(name=None, topic_id=TOPIC_ID))


GOOD = encode_metadata_record(PartitionRecord(
    partition_id=2, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=1,
    partition_epoch=1, directories=[DIR_A, DIR_B], eligible_leader_replicas=[2]), 2)


@pytest.mark.parametrize("n", range(len(GOOD)))
def test_every_truncation_is_a_decode_error(n):
    with pytest.raises(DecodeError):
        decode_metadata_record(GOOD[:n])


@pytest.mark.parametrize("data,match", [
    (b"", "frame version"),
    (b"\x00\x02\x00", "frame version 0"),                 # the 2.8 preview's frame
    (b"\x02\x02\x00", "frame version 2"),
    (b"\x01\x01\x00", "unknown metadata record type 1"),  # a type we have no schema for
    (b"\x01\xe3\x00\x00", "unknown metadata record type 99"),
    (b"\x01\x80\x80\x02\x00", "out of range"),            # 32768: more than a Java short
    (b"\x01\xff\xff\xff\xff\xff", "record type"),         # varint longer than 5 bytes
    (b"\x01\x03\x03" + GOOD[3:], "version 3 is not supported"),
    (b"\x01\x02\x00\x07orders", "truncated"),
    (GOOD + b"\x00", "1 bytes after"),
])
def test_garbage_is_a_decode_error(data, match):
    with pytest.raises(DecodeError, match=match):
        decode_metadata_record(data)


def test_unknown_version_is_an_unsupported_version_error():
    with pytest.raises(UnsupportedVersionError):
        decode_metadata_record(b"\x01\x09\x01" + RemoveTopicRecord(topic_id=TOPIC_ID).to_bytes(0))


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_decode_error(data):
    try:
        rec, version = decode_metadata_record_versioned(data)
    except DecodeError:
        return
    # Not always the same bytes (a varint may be written long), but the same record.
    assert decode_metadata_record_versioned(encode_metadata_record(rec, version)) == (rec, version)


@SETTINGS
@given(st.binary(min_size=1, max_size=8), st.integers(0, len(GOOD)))
def test_corrupted_record_decodes_or_raises_decode_error(noise, at):
    data = GOOD[:at] + noise + GOOD[at + len(noise):]
    try:
        decode_metadata_record(data)
    except DecodeError:
        pass


# -- hypothesis round trips ------------------------------------------------------------------
_brokers = st.integers(-1, 2**31 - 1)
_broker_lists = st.lists(_brokers, max_size=6)
_uuids = st.uuids() | st.just(uuid.UUID(int=0))


@st.composite
def partition_records(draw):
    version = draw(st.integers(0, PartitionRecord.MAX_VERSION))
    replicas = draw(st.lists(st.integers(0, 2**31 - 1), max_size=6, unique=True))
    kw = dict(
        partition_id=draw(st.integers(-1, 2**31 - 1)), topic_id=draw(_uuids),
        replicas=replicas, isr=draw(st.lists(st.sampled_from(replicas), unique=True)
                                    if replicas else st.just([])),
        removing_replicas=draw(_broker_lists), adding_replicas=draw(_broker_lists),
        leader=draw(_brokers), leader_recovery_state=draw(st.sampled_from([0, 1])),
        leader_epoch=draw(st.integers(-1, 2**31 - 1)),
        partition_epoch=draw(st.integers(-1, 2**31 - 1)))
    if version >= 1:
        kw["directories"] = draw(st.lists(_uuids, min_size=len(replicas),
                                          max_size=len(replicas)))
    if version >= 2:
        kw["eligible_leader_replicas"] = draw(st.none() | _broker_lists)
        kw["last_known_elr"] = draw(st.none() | _broker_lists)
    return PartitionRecord(**kw), version


@SETTINGS
@given(partition_records())
def test_partition_record_round_trip(case):
    rec, version = case
    data = encode_metadata_record(rec, version)
    assert decode_metadata_record_versioned(data) == (rec, version)
    body = rec.to_bytes(version)
    assert data == bytes([1, 3, version]) + body


_INTS = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
         "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1)}


def _value(f, version, classes, elem=False):
    """Any value of one schema field at `version` (a generic twin of the strategy above)."""
    if f.is_array and not elem:
        s = st.lists(_value(f, version, classes, elem=True), max_size=4)
    elif f.is_struct:
        s = _struct(f.struct, version, classes)
    elif f.type in _INTS:
        s = st.integers(*_INTS[f.type])
    elif f.type == "bool":
        s = st.booleans()
    elif f.type == "string":
        s = st.text(max_size=20) | st.text(alphabet="é", min_size=127, max_size=140)
    elif f.type == "uuid":
        s = _uuids
    elif f.type == "bytes":
        s = st.binary(max_size=70)
    else:
        raise AssertionError(f.type)
    if not elem and version in f.nullable:
        s = st.none() | s
    return s


def _struct(spec, version, classes):
    fields = {f.attr: _value(f, version, classes) for f in spec.fields if version in f.versions}
    return st.fixed_dictionaries(fields).map(lambda kw: classes[spec.name](**kw))


@st.composite
def any_record(draw):
    cls = draw(st.sampled_from(sorted(RECORD_TYPE_BY_KEY.values(), key=lambda c: c.API_KEY)))
    version = draw(st.integers(cls.MIN_VERSION, cls.MAX_VERSION))
    return draw(_struct(cls.SCHEMA.root, version, cls._compiler.classes)), version


@SETTINGS
@given(any_record())
def test_any_record_round_trip(case):
    rec, version = case
    data = encode_metadata_record(rec, version)
    assert decode_metadata_record_versioned(data) == (rec, version)
