"""Differential tests: our generated codecs against the independent `kio` package.

For every (api, version) we serve, request and response, plus the headers and the `data`
schemas kio knows:

(a) hypothesis builds a kio entity, kio writes it, we decode and re-encode: the bytes must be
    identical, and every kio field must equal the attribute we decoded (see `_same`);
(b) kio reads our re-encoded bytes back to an entity equal to the original;
(c) hypothesis builds one of *our* objects from our schema model, we encode it, kio reads and
    re-writes it: again identical bytes (this reaches values kio's own strategies never make,
    e.g. tagged fields at non-default values combined with unusual nullability).

kio represents some things differently; each is normalised explicitly:
- records fields are `bytes` in kio (`Records`); we decode them as memoryview slices, which
  compare equal to bytes. kio has no hypothesis strategy for `Records`: we register binary().
- millisecond fields (`...Ms`) are timedelta/datetime in kio without the `_ms` suffix; the
  comparator converts them to milliseconds (kio's datetime_i64 uses None for -1).
- kio uses None for the zero UUID.
- arrays are tuples in kio, lists for us.
- error codes are an enum in kio that only accepts known codes; our strategy (c) draws int16
  error fields named `ErrorCode` from Kafka's known codes for that reason.

Example count per pair: KRAFTD_HYPOTHESIS_EXAMPLES (default 25).
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import functools
import os
import types
import typing
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import Records
from kraftd.protocol.api import API_BY_KEY
from kraftd.protocol.messages import ALL_MESSAGES
from kraftd.protocol.schema_model import snake_case

# Occasionally long values, so multi-byte length varints (>= 128) are exercised too.
_BYTES = st.binary(max_size=24) | st.binary(min_size=128, max_size=200)
_TEXT = st.text(max_size=12) | st.text(alphabet="aé", min_size=127, max_size=140)
st.register_type_strategy(Records, _BYTES.map(Records))

EXAMPLES = int(os.environ.get("KRAFTD_HYPOTHESIS_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)

# kio has no RequestHeader v0 (it is v1 without ClientId and used only by
# ControlledShutdown v0, which we do not serve); header v0 is covered in test_codec_framing.
# kio follows Kafka 4, which dropped Produce v0-2; we still serve them because librdkafka <= 2.11
# enables gzip/snappy/lz4 only for brokers that list Produce v0 (checked by hand in
# tests/protocol/test_produce_legacy_versions.py).
KIO_MISSING = {("RequestHeader", 0)} | {(name, v) for name in ("ProduceRequest", "ProduceResponse") for v in range(3)}


def _kio_class(name: str, kind: str, version: int):
    if kind in ("request", "response"):
        pkg = snake_case(name[: -len(kind)])
    else:
        pkg = snake_case(name)
    mod = importlib.import_module(f"kio.schema.{pkg}.v{version}.{kind}")
    return getattr(mod, name)


def _pairs():
    out = []
    for spec in API_BY_KEY.values():
        for v in range(spec.min_version, spec.max_version + 1):
            for cls, kind in ((spec.request_cls, "request"), (spec.response_cls, "response")):
                if (cls.__name__, v) not in KIO_MISSING:
                    out.append((cls.__name__, kind, v))
    for cls in ALL_MESSAGES.values():
        if cls.SCHEMA_TYPE in ("header", "data"):
            for v in range(cls.MIN_VERSION, cls.MAX_VERSION + 1):
                if (cls.__name__, v) not in KIO_MISSING:
                    out.append((cls.__name__, cls.SCHEMA_TYPE, v))
    return out


PAIRS = _pairs()


def _kio_write(kcls, entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(kcls)(buf, entity)
    return buf.getvalue()


def _kio_read(kcls, data: bytes):
    entity, size = entity_reader(kcls)(memoryview(data), 0)
    assert size == len(data), f"kio consumed {size} of {len(data)} bytes"
    return entity


def _ours(cls, data: bytes, version: int):
    obj, pos = cls.decode(memoryview(data), 0, version)
    assert pos == len(data), f"we consumed {pos} of {len(data)} bytes"
    return obj


# -- semantic comparison of a kio entity with our object ------------------------------------
def _ms(value):
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return value


def _same(k, ours, path="") -> None:
    """Assert kio entity `k` and our object `ours` hold the same values, field by field."""
    if dataclasses.is_dataclass(k):
        for f in dataclasses.fields(k):
            kv = getattr(k, f.name)
            attr = f.name if hasattr(ours, f.name) else f.name + "_ms"
            assert hasattr(ours, attr), f"{path}{f.name}: no attribute {attr} on ours"
            ov = getattr(ours, attr)
            if attr.endswith("_ms") and attr != f.name:
                if kv is None:   # kio's datetime_i64 sentinel for -1
                    assert ov == -1, f"{path}{attr}"
                else:
                    assert _ms(kv) == ov, f"{path}{attr}: {kv!r} != {ov!r}"
                continue
            _same(kv, ov, f"{path}{f.name}.")
    elif isinstance(k, tuple):
        assert ours is not None and len(k) == len(ours), f"{path}: {k!r} != {ours!r}"
        for i, (a, b) in enumerate(zip(k, ours)):
            _same(a, b, f"{path}[{i}].")
    elif isinstance(k, uuid.UUID) or (k is None and isinstance(ours, uuid.UUID)):
        assert (k or uuid.UUID(int=0)) == ours, f"{path}: {k!r} != {ours!r}"
    elif isinstance(k, (datetime.timedelta, datetime.datetime)):
        assert _ms(k) == ours, f"{path}: {k!r} != {ours!r}"
    else:
        assert k == ours, f"{path}: {k!r} != {ours!r}"


# -- strategies for kio entities ----------------------------------------------------------------
# Like st.from_type(entity) but with arrays capped at 3 elements: the unbounded default builds
# deep, wide entities that make the suite slow without finding more.
def _kio_type_strategy(tp):
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = typing.get_args(tp)
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, tp
        s = _kio_type_strategy(inner[0])
        return st.none() | s if len(inner) < len(args) else s
    if typing.get_origin(tp) is tuple:
        elem = typing.get_args(tp)[0]
        return st.lists(_kio_type_strategy(elem), max_size=3).map(tuple)
    if dataclasses.is_dataclass(tp):
        return _kio_strategy(tp)
    if isinstance(tp, type) and issubclass(tp, str):
        return _TEXT
    return st.from_type(tp)


@functools.cache
def _kio_strategy(kcls):
    return st.builds(kcls, **{f.name: _kio_type_strategy(f.type)
                              for f in dataclasses.fields(kcls)})


# -- strategies for our own objects ------------------------------------------------------------
_INT_RANGES = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
    "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
_KNOWN_ERRORS = sorted(e.value for e in KioErrorCode)


def _value_strategy(f, version: int, classes: dict, elem: bool = False):
    t = f.type
    if f.is_array and not elem:
        s = st.lists(_value_strategy(f, version, classes, elem=True), max_size=3)
    elif f.is_struct:
        s = _struct_strategy(f.struct, version, classes)
    elif t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        if f.name == "ErrorCode" or f.name.endswith("ErrorCode"):
            s = st.sampled_from(_KNOWN_ERRORS)
        elif t == "int64" and f.name.endswith("Ms"):
            # kio's datetime_i64: -1 (None) or a timestamp within datetime's range.
            s = st.just(-1) | st.integers(0, 253402300799999)
        else:
            s = st.integers(lo, hi)
    elif t == "bool":
        s = st.booleans()
    elif t == "float64":
        s = st.floats(allow_nan=False, allow_infinity=False)
    elif t == "string":
        s = _TEXT
    elif t in ("bytes", "records"):
        s = _BYTES
    elif t == "uuid":
        s = st.uuids() | st.just(uuid.UUID(int=0))
    else:
        raise AssertionError(t)
    if not elem and version in f.nullable:
        s = st.none() | s
    return s


def _struct_strategy(spec, version: int, classes: dict):
    cls = classes[spec.name]
    fields = {f.attr: _value_strategy(f, version, classes)
              for f in spec.fields if version in f.versions}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _our_strategy(cls, version: int):
    classes = cls._compiler.classes
    return _struct_strategy(cls.SCHEMA.root, version, classes)


# -- the tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kind,version", PAIRS, ids=[f"{n}-v{v}" for n, _, v in PAIRS])
def test_kio_bytes_roundtrip(name, kind, version):
    ours_cls = ALL_MESSAGES[name]
    kcls = _kio_class(name, kind, version)

    @SETTINGS
    @given(_kio_strategy(kcls))
    def check(entity):
        data = _kio_write(kcls, entity)
        obj = _ours(ours_cls, data, version)
        _same(entity, obj)
        again = obj.to_bytes(version)
        assert again == data
        assert _kio_read(kcls, again) == entity

    check()


@pytest.mark.parametrize("name,kind,version", PAIRS, ids=[f"{n}-v{v}" for n, _, v in PAIRS])
def test_our_objects_read_by_kio(name, kind, version):
    ours_cls = ALL_MESSAGES[name]
    kcls = _kio_class(name, kind, version)

    @SETTINGS
    @given(_our_strategy(ours_cls, version))
    def check(obj):
        data = obj.to_bytes(version)
        entity = _kio_read(kcls, data)
        assert _kio_write(kcls, entity) == data
        assert _ours(ours_cls, data, version) == obj

    check()


def test_every_served_pair_is_covered():
    """Guard against silently shrinking coverage: all served APIs and both headers appear."""
    names = {(n, v) for n, _, v in PAIRS}
    for spec in API_BY_KEY.values():
        for v in range(spec.min_version, spec.max_version + 1):
            for cls in (spec.request_cls, spec.response_cls):
                # KIO_MISSING pairs are checked against hand-laid bytes elsewhere.
                assert (cls.__name__, v) in names or (cls.__name__, v) in KIO_MISSING
    assert {("RequestHeader", 1), ("RequestHeader", 2), ("ResponseHeader", 0),
            ("ResponseHeader", 1)} <= names
