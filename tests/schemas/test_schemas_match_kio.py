"""Cross-check every ``schemas/*.json`` message definition against the independent
``kio`` package (frozen dataclasses generated from Apache Kafka's own definitions).

For each schema file and each version in its ``validVersions`` we take the fields present
at that version (recursively) and compare them, in order, with the dataclass fields kio
generated for the same (message, version): name, wire type, nullability, tag number,
flexibility of the enclosing struct, entity type and default value.

kio differs from Kafka's JSON in a few systematic ways.  Every such difference is
normalised *explicitly* below, one rule per difference:

R1  Module/class lookup.  ``FooBarRequest`` -> ``kio.schema.foo_bar.v<N>.request``
    (class ``FooBarRequest``); ``...Response`` likewise; headers ->
    ``kio.schema.request_header.v<N>.header``; ``data`` schemas ->
    ``kio.schema.<snake_name>.v<N>.data``.  Nested struct classes carry the struct's type
    name (``[]FetchTopic`` -> class ``FetchTopic``).
R2  Field names are snake_case of the Kafka name (``PartitionIndex`` ->
    ``partition_index``, camelCase ``validateOnly`` -> ``validate_only``).
R3  Millisecond fields: a field whose Kafka name ends in ``Ms`` is exposed by kio without
    the ``_ms`` suffix and with a time type: int32 -> ``timedelta_i32``; int64 ->
    ``timedelta_i64`` or ``datetime_i64`` (``MaxWaitMs`` -> ``max_wait``,
    ``LogAppendTimeMs`` -> ``log_append_time``).  Defaults are compared in milliseconds;
    for ``datetime_i64`` kio encodes the ``-1`` sentinel as ``None``.
R4  A non-tagged field literally named ``ErrorCode`` of type int16 has kio kafka_type
    ``error_code`` (other int16 error fields, e.g. ``TopicConfigErrorCode``, stay int16).
R5  Entity types become distinct Python types in kio: ``brokerId`` -> ``BrokerId``,
    ``topicName`` -> ``TopicName``, ``transactionalId`` -> ``TransactionalId``,
    ``producerId`` -> ``ProducerId``, ``groupId`` -> ``GroupId`` (for arrays: the element
    type).  We require our ``entityType`` and kio's type to agree both ways.
R6  Nullability is read from kio's ``X | None`` annotation, except that kio annotates
    *every* ``uuid`` field and every ``datetime_i64`` field as optional (``None`` stands for
    the zero UUID / the -1 timestamp).  For those we instead require that our schema does not
    mark them nullable (Kafka's uuid and int64 are never nullable).
R7  Defaults.  kio carries a dataclass default exactly when Kafka's JSON gives a
    ``default`` for a non-array, non-struct field; we compare parsed values.  Exceptions:
    arrays of primitives always get ``()`` in kio (no information, skipped); tagged
    fields always get a default in kio (the schema default, or the type's zero value, or
    ``()`` for arrays, or a default-constructed struct), so for tagged primitives we compare
    with our default-or-zero and for tagged structs/arrays we skip the top-level default
    (nested fields are still checked).
R8  Field order: kio keeps the JSON order of *all* fields, tagged ones included (e.g.
    ``FetchRequest`` starts with tagged ``cluster_id``), so we compare plain sequences.
R9  kio lacks some versions we serve; only the explicit ``KIO_MISSING`` pairs may be
    skipped (RequestHeader v0, which is v1 without ClientId; checked structurally below;
    versions Kafka 4 dropped; and the KRaft metadata records, which kio does not model:
    those are checked against hand-laid bytes in tests/protocol).

On top of the kio comparison the structural checks validate the files themselves: plain
JSON, required keys, known keys only, well-formed version ranges, tags only in flexible
versions and unique per struct, nullable only where Kafka allows it, short ``about``.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import re
import types
import typing
import uuid
from pathlib import Path

import pytest

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"
SCHEMA_FILES = sorted(SCHEMA_DIR.glob("*.json"))

PRIMITIVES = {
    "bool", "int8", "int16", "int32", "int64", "uint16", "float64",
    "string", "bytes", "records", "uuid",
}
INT_TYPES = {"int8", "int16", "int32", "int64", "uint16"}
NULLABLE_CAPABLE = {"string", "bytes", "records"}  # plus arrays and structs
TOP_KEYS = {"apiKey", "type", "name", "validVersions", "flexibleVersions", "fields",
            "commonStructs", "listeners", "latestVersionUnstable"}
FIELD_KEYS = {"name", "type", "versions", "nullableVersions", "taggedVersions", "tag",
              "default", "ignorable", "mapKey", "entityType", "about", "fields",
              "flexibleVersions", "zeroCopy"}
ENTITY_TYPES = {"brokerId": "BrokerId", "topicName": "TopicName",
                "transactionalId": "TransactionalId", "producerId": "ProducerId",
                "groupId": "GroupId"}
KIO_ENTITY_CLASSES = set(ENTITY_TYPES.values())
# R9: (schema name, version) pairs kio does not model.
# kio follows Kafka 4, which dropped Produce v0-2; we still serve them because librdkafka <= 2.11
# enables gzip/snappy/lz4 only for brokers that list Produce v0 (checked by hand in
# tests/protocol/test_produce_legacy_versions.py).
KIO_MISSING = {("RequestHeader", 0)} | {(name, v) for name in ("ProduceRequest", "ProduceResponse") for v in range(3)}
# Kafka 4 (which kio follows) also dropped DeleteTopics v0 and AlterPartition v0-1.
KIO_MISSING |= {("DeleteTopicsRequest", 0), ("DeleteTopicsResponse", 0)}
KIO_MISSING |= {(name, v) for name in ("AlterPartitionRequest", "AlterPartitionResponse") for v in range(2)}
# KRaft metadata records (type "metadata" in Kafka): kio has none of them.
METADATA_RECORD_VERSIONS = {"RegisterBrokerRecord": 3, "TopicRecord": 0, "PartitionRecord": 2,
                            "ConfigRecord": 0, "PartitionChangeRecord": 2, "RemoveTopicRecord": 0,
                            "ProducerIdsRecord": 0, "UserScramCredentialRecord": 0,
                            "RemoveUserScramCredentialRecord": 0, "AccessControlEntryRecord": 0,
                            "RemoveAccessControlEntryRecord": 0}
KIO_MISSING |= {(name, v) for name, hi in METADATA_RECORD_VERSIONS.items() for v in range(hi + 1)}
# Kafka 4 dropped OffsetCommit v0-1 and OffsetFetch v0 (clients before 0.10 send them; checked by
# hand in tests/protocol/test_group_apis_by_hand.py). The __consumer_offsets record schemas are
# Kafka's "coordinator" key/value records, which kio does not model either (same file).
KIO_MISSING |= {(name, v) for name in ("OffsetCommitRequest", "OffsetCommitResponse") for v in range(2)}
KIO_MISSING |= {("OffsetFetchRequest", 0), ("OffsetFetchResponse", 0)}
CONSUMER_OFFSETS_RECORD_VERSIONS = {"OffsetCommitKey": (0, 1), "OffsetCommitValue": (0, 4),
                                    "GroupMetadataKey": (2, 2), "GroupMetadataValue": (0, 4)}
KIO_MISSING |= {(name, v) for name, (lo, hi) in CONSUMER_OFFSETS_RECORD_VERSIONS.items()
                for v in range(lo, hi + 1)}


# ----------------------------------------------------------------------------- helpers

class VersionRange:
    def __init__(self, spec: str):
        self.spec = spec
        if spec == "none":
            self.lo, self.hi = 1, 0  # empty
        elif re.fullmatch(r"\d+\+", spec):
            self.lo, self.hi = int(spec[:-1]), 1 << 15
        elif re.fullmatch(r"\d+-\d+", spec):
            lo, hi = spec.split("-")
            self.lo, self.hi = int(lo), int(hi)
            assert self.lo <= self.hi, spec
        elif re.fullmatch(r"\d+", spec):
            self.lo = self.hi = int(spec)
        else:
            raise AssertionError(f"malformed version range {spec!r}")

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def versions(self) -> range:
        return range(self.lo, self.hi + 1)

    def is_subset_of(self, other: VersionRange) -> bool:
        return self.lo > self.hi or (other.lo <= self.lo and self.hi <= other.hi)


def vr(field: dict, key: str, default: str = "none") -> VersionRange:
    return VersionRange(field.get(key, default))


def snake(name: str) -> str:
    """R2: Kafka PascalCase/camelCase -> snake_case, as kio spells it."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def struct_fields(schema: dict, field: dict) -> list[dict]:
    """Nested fields of a struct-typed field: inline, else from commonStructs."""
    if "fields" in field:
        return field["fields"]
    type_name = field["type"].removeprefix("[]")
    for cs in schema.get("commonStructs", []):
        if cs["name"] == type_name:
            return cs["fields"]
    raise AssertionError(f"struct type {type_name} has no definition")


def element_type(field: dict) -> str:
    return field["type"].removeprefix("[]")


def is_array(field: dict) -> bool:
    return field["type"].startswith("[]")


def is_struct_type(t: str) -> bool:
    return t not in PRIMITIVES


def kio_module(schema: dict, version: int):
    """R1."""
    name, kind = schema["name"], schema["type"]
    if kind in ("request", "response"):
        base = name.removesuffix(kind.capitalize())
        mod = f"kio.schema.{snake(base)}.v{version}.{kind}"
    elif kind == "header":
        mod = f"kio.schema.{snake(name)}.v{version}.header"
    else:
        mod = f"kio.schema.{snake(name)}.v{version}.data"
    return importlib.import_module(mod)


def unwrap_optional(tp) -> tuple[object, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        return args[0], True
    return tp, False


def parse_default(ftype: str, text: str):
    if ftype in INT_TYPES:
        return int(text, 0)
    if ftype == "bool":
        assert text in ("true", "false"), text
        return text == "true"
    if ftype == "float64":
        return float(text)
    if ftype in ("string", "bytes", "records"):
        return None if text == "null" else text
    if ftype == "uuid":
        return uuid.UUID(int=0) if text in ("", "AAAAAAAAAAAAAAAAAAAAAA") else uuid.UUID(text)
    raise AssertionError(f"no default parsing for {ftype}")


ZERO = {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "uuid": uuid.UUID(int=0)}


def our_default(field: dict):
    """Our field default as a Python value (schema default, else the type's zero)."""
    t = field["type"]
    if "default" in field:
        return parse_default(t, field["default"])
    return 0 if t in INT_TYPES else ZERO.get(t)


def kio_value_to_plain(value, kafka_type: str):
    """R3: kio time types back to milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if value is None and kafka_type == "datetime_i64":
        return -1
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    return value


# ----------------------------------------------------------------------------- comparison

def compare_struct(schema: dict, our_fields: list[dict], kio_cls: type, version: int,
                   flexible: bool, path: str, errors: list[str]) -> None:
    if kio_cls.__flexible__ != flexible:
        errors.append(f"{path}: flexible={flexible} but kio says {kio_cls.__flexible__}")
    present = [f for f in our_fields if version in vr(f, "versions")]
    kio_fields = dataclasses.fields(kio_cls)
    hints = typing.get_type_hints(kio_cls)
    ours_names = [expected_kio_name(f) for f in present]
    kio_names = [kf.name for kf in kio_fields]
    if ours_names != kio_names:  # R8: same order, tagged fields included
        errors.append(f"{path}: fields differ\n  ours: {ours_names}\n  kio:  {kio_names}")
        return
    for f, kf in zip(present, kio_fields):
        compare_field(schema, f, kf, hints[kf.name], version, flexible,
                      f"{path}.{f['name']}", errors)


def expected_kio_name(f: dict) -> str:
    name = f["name"]
    if name.endswith("Ms") and f["type"] in ("int32", "int64"):
        name = name[:-2]  # R3
    return snake(name)


def compare_field(schema: dict, f: dict, kf: dataclasses.Field, hint, version: int,
                  flexible: bool, path: str, errors: list[str]) -> None:
    tagged = version in vr(f, "taggedVersions")
    nullable = version in vr(f, "nullableVersions")
    kio_tag = kf.metadata.get("tag")
    if (f["tag"] if tagged else None) != kio_tag:
        errors.append(f"{path}: tag {f.get('tag') if tagged else None} vs kio {kio_tag}")
    inner, kio_optional = unwrap_optional(hint)
    has_kio_default = kf.default is not dataclasses.MISSING
    etype = element_type(f)

    if is_array(f):
        if typing.get_origin(inner) is not tuple:
            errors.append(f"{path}: array in ours, kio type {hint}")
            return
        elem = typing.get_args(inner)[0]
        if kio_optional != nullable:
            errors.append(f"{path}: nullable={nullable} vs kio optional={kio_optional}")
        if is_struct_type(etype):
            if elem.__name__ != etype:
                errors.append(f"{path}: struct {etype} vs kio class {elem.__name__}")
            compare_struct(schema, struct_fields(schema, f), elem, version, flexible,
                           path, errors)
        else:
            check_primitive(f, etype, kf, elem, version, path, errors)
        return  # R7: array defaults carry no information in kio

    if is_struct_type(etype):
        if kio_optional != nullable:
            errors.append(f"{path}: nullable={nullable} vs kio optional={kio_optional}")
        if getattr(inner, "__name__", None) != etype:
            errors.append(f"{path}: struct {etype} vs kio class {inner}")
            return
        compare_struct(schema, struct_fields(schema, f), inner, version, flexible, path, errors)
        return

    kafka_type = check_primitive(f, etype, kf, inner, version, path, errors)
    # R6
    if etype == "uuid" or kafka_type == "datetime_i64":
        if nullable:
            errors.append(f"{path}: {etype} must not be nullable")
    elif kio_optional != nullable:
        errors.append(f"{path}: nullable={nullable} vs kio optional={kio_optional}")
    # R7
    if tagged:
        kio_val = kio_value_to_plain(kf.default, kafka_type) if has_kio_default else None
        if etype == "uuid" and kio_val is None:
            kio_val = uuid.UUID(int=0)
        if kio_val != our_default(f):
            errors.append(f"{path}: tagged default {our_default(f)!r} vs kio {kio_val!r}")
    elif has_kio_default != ("default" in f):
        errors.append(f"{path}: default {f.get('default')!r} vs kio "
                      f"{kf.default if has_kio_default else 'none'!r}")
    elif has_kio_default:
        ours = parse_default(etype, f["default"])
        theirs = kio_value_to_plain(kf.default, kafka_type)
        if ours != theirs:
            errors.append(f"{path}: default {ours!r} vs kio {theirs!r}")


def check_primitive(f: dict, etype: str, kf: dataclasses.Field, kio_type, version: int,
                    path: str, errors: list[str]) -> str:
    kafka_type = kf.metadata.get("kafka_type")
    expected = {"uint16": "uint16"}.get(etype, etype)
    if f["name"].endswith("Ms") and etype in ("int32", "int64"):  # R3
        allowed = {"timedelta_i32"} if etype == "int32" else {"timedelta_i64", "datetime_i64"}
    elif f["name"] == "ErrorCode" and etype == "int16":  # R4
        allowed = {"error_code"}
    else:
        allowed = {expected}
    if kafka_type not in allowed:
        errors.append(f"{path}: type {etype} (expect kio {sorted(allowed)}) vs kio {kafka_type}")
    # R5
    kio_entity = getattr(kio_type, "__name__", "")
    kio_entity = kio_entity if kio_entity in KIO_ENTITY_CLASSES else None
    ours_entity = ENTITY_TYPES.get(f.get("entityType", ""))
    if ours_entity != kio_entity:
        errors.append(f"{path}: entityType {f.get('entityType')} vs kio type {kio_entity}")
    return kafka_type


# ----------------------------------------------------------------------------- structure

def check_structure(schema: dict, path: Path) -> list[str]:
    errors: list[str] = []
    name = schema.get("name")
    if path.stem != name:
        errors.append(f"file {path.name} holds {name}")
    unknown = set(schema) - TOP_KEYS
    if unknown:
        errors.append(f"unknown top-level keys {unknown}")
    kind = schema.get("type")
    if kind not in ("request", "response", "header", "data"):
        errors.append(f"bad type {kind!r}")
    if kind in ("request", "response") and not isinstance(schema.get("apiKey"), int):
        errors.append("apiKey missing")
    valid = VersionRange(schema["validVersions"])
    flex = VersionRange(schema["flexibleVersions"])
    if valid.hi >= 1 << 15:
        errors.append("validVersions must be bounded")
    struct_names: set[str] = {cs["name"] for cs in schema.get("commonStructs", [])}

    def walk(fields: list[dict], where: str) -> None:
        names = [f["name"] for f in fields]
        if len(names) != len(set(names)):
            errors.append(f"{where}: duplicate field names")
        tags: dict[int, list[dict]] = {}
        for f in fields:
            p = f"{where}.{f.get('name')}"
            missing = {"name", "type", "versions", "about"} - set(f)
            if missing:
                errors.append(f"{p}: missing {missing}")
                continue
            extra = set(f) - FIELD_KEYS
            if extra:
                errors.append(f"{p}: unknown keys {extra}")
            about = f["about"]
            if not about or len(about) > 120:
                errors.append(f"{p}: about must be short and non-empty")
            versions = vr(f, "versions")
            etype = element_type(f)
            if etype not in PRIMITIVES and not re.fullmatch(r"[A-Z][A-Za-z0-9]*", etype):
                errors.append(f"{p}: bad type {f['type']}")
            nullable = vr(f, "nullableVersions")
            if nullable.lo <= nullable.hi:
                if not (is_array(f) or is_struct_type(etype) or etype in NULLABLE_CAPABLE):
                    errors.append(f"{p}: type {f['type']} cannot be nullable")
            if "flexibleVersions" in f and f["flexibleVersions"] != "none":
                errors.append(f"{p}: only flexibleVersions 'none' is supported on fields")
            if ("tag" in f) != ("taggedVersions" in f):
                errors.append(f"{p}: tag and taggedVersions go together")
            if "taggedVersions" in f:
                tv = vr(f, "taggedVersions")
                if not tv.is_subset_of(versions) or not tv.is_subset_of(flex):
                    errors.append(f"{p}: taggedVersions must lie in versions and flexibleVersions")
                if tv.hi != versions.hi:
                    errors.append(f"{p}: a tagged field must be tagged in all its later versions")
                tags.setdefault(f["tag"], []).append(f)
            if "default" in f:
                if not isinstance(f["default"], str):
                    errors.append(f"{p}: default must be a JSON string")
                elif etype in PRIMITIVES and not is_array(f):
                    try:
                        value = parse_default(etype, f["default"])
                    except (ValueError, AssertionError) as exc:
                        errors.append(f"{p}: bad default {f['default']!r}: {exc}")
                    else:
                        if value is None and nullable.lo > nullable.hi:
                            errors.append(f"{p}: null default on a non-nullable field")
            if is_struct_type(etype):
                if "fields" in f:
                    if etype in struct_names:
                        errors.append(f"{p}: struct name {etype} defined twice")
                    struct_names.add(etype)
                    walk(f["fields"], p)
                elif etype not in {cs["name"] for cs in schema.get("commonStructs", [])}:
                    errors.append(f"{p}: unknown struct {etype}")
            elif "fields" in f:
                errors.append(f"{p}: primitive with nested fields")
        for tag, fs in tags.items():
            for v in valid.versions():
                if sum(v in vr(x, "taggedVersions") for x in fs) > 1:
                    errors.append(f"{where}: tag {tag} used twice at v{v}")

    walk(schema.get("fields", []), name)
    for cs in schema.get("commonStructs", []):
        walk(cs["fields"], f"{name}.{cs['name']}")
    return errors


# ----------------------------------------------------------------------------- tests

def test_schema_files_exist():
    names = {p.stem for p in SCHEMA_FILES}
    assert {"RequestHeader", "ResponseHeader", "ApiVersionsRequest",
            "ApiVersionsResponse"} <= names


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
def test_schema_structure(path: Path):
    errors = check_structure(load(path), path)
    assert not errors, "\n".join(errors)


def compare_schema_with_kio(schema: dict) -> list[str]:
    errors: list[str] = []
    name = schema["name"]
    flex = VersionRange(schema["flexibleVersions"])
    for version in VersionRange(schema["validVersions"]).versions():
        if (name, version) in KIO_MISSING:
            continue
        try:
            module = kio_module(schema, version)
        except ModuleNotFoundError:
            errors.append(f"{name} v{version}: kio has no such module")
            continue
        cls = getattr(module, name, None)
        if cls is None:
            errors.append(f"{name} v{version}: kio module lacks class {name}")
            continue
        if "apiKey" in schema and cls.__api_key__ != schema["apiKey"]:
            errors.append(f"{name}: apiKey {schema['apiKey']} vs kio {cls.__api_key__}")
        compare_struct(schema, schema["fields"], cls, version, version in flex,
                       f"{name} v{version}", errors)
    return errors


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=lambda p: p.stem)
def test_schema_matches_kio(path: Path):
    errors = compare_schema_with_kio(load(path))
    assert not errors, "\n".join(errors)


def test_request_header_v0_is_v1_without_client_id():
    """R9: kio has no RequestHeader v0; it must be v1 minus the (v1+) ClientId."""
    schema = load(SCHEMA_DIR / "RequestHeader.json")
    v0 = [f["name"] for f in schema["fields"] if 0 in vr(f, "versions")]
    v1 = [f["name"] for f in schema["fields"] if 1 in vr(f, "versions")]
    assert v0 == ["RequestApiKey", "RequestApiVersion", "CorrelationId"]
    assert v1 == v0 + ["ClientId"]
    client_id = schema["fields"][-1]
    assert client_id.get("flexibleVersions") == "none"  # classic string even in v2


def test_checker_catches_mistakes():
    """The comparison must be able to fail: mutate a good schema in several ways."""
    import copy

    base = load(SCHEMA_DIR / "FetchResponse.json")
    assert compare_schema_with_kio(base) == []

    def partitions(s):
        return s["fields"][3]["fields"][2]["fields"]

    mutations = []
    m = copy.deepcopy(base)  # wrong version range
    partitions(m)[3]["versions"] = "5+"
    mutations.append(m)
    m = copy.deepcopy(base)  # wrong tag
    partitions(m)[5]["tag"] = 3
    mutations.append(m)
    m = copy.deepcopy(base)  # lost nullability
    del partitions(m)[-1]["nullableVersions"]
    mutations.append(m)
    m = copy.deepcopy(base)  # swapped order
    p = partitions(m)
    p[1], p[2] = p[2], p[1]
    mutations.append(m)
    m = copy.deepcopy(base)  # wrong default
    partitions(m)[3]["default"] = "0"
    mutations.append(m)
    m = copy.deepcopy(base)  # wrong type
    partitions(m)[0]["type"] = "int64"
    mutations.append(m)
    m = copy.deepcopy(base)  # wrong flexible versions
    m["flexibleVersions"] = "11+"
    mutations.append(m)
    for i, m in enumerate(mutations):
        assert compare_schema_with_kio(m), f"mutation {i} not detected"
