"""The C record walk (protocol/_record_walk.pyx) against the Python one (protocol/records.py's
`_check_payload`): for every records section, the C walk says "well formed" exactly when the
Python walk accepts it. A C walk that accepted what Python refuses would let garbage into the
log; one that refused what Python accepts would slow the produce path down (the Python walk
runs then)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from kraftd.protocol import records
from kraftd.protocol.errors import CorruptRecordError, InvalidRecordError

# Not importorskip: `make test` installs with a C compiler, and an install whose build of the
# extension failed (setup.py's optional=True lets it) must fail here, not skip.
from kraftd.protocol._record_walk import records_are_well_formed as walk  # noqa: E402


def test_the_install_built_the_c_walk_and_check_records_uses_it():
    # make test installs with a C compiler: the fallback must not be what runs silently.
    assert records._records_are_well_formed is walk


def python_accepts(data: bytes, count: int) -> bool:
    try:
        records._check_payload(bytes(data), count, 0)
    except (CorruptRecordError, InvalidRecordError):
        return False
    return True


def varint(value: int, pad: int = 0) -> bytes:
    """Zigzag varint of any integer; pad adds non-minimal continuation bytes (the value stays
    the same; past ten bytes in all the walks refuse it)."""
    z = 2 * value if value >= 0 else -2 * value - 1
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    for _ in range(pad):
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


odd_lengths = st.one_of(st.integers(-3, 2), st.sampled_from([
    -(1 << 62), 1 << 62, (1 << 63) - 1, -(1 << 63), 1 << 64, -(1 << 68), 1 << 69]))


@st.composite
def record_parts(draw):
    """One well-formed record as parts: ("varint", value, padding) and ("raw", bytes). Header
    keys are sometimes bytes that are not UTF-8 (then the record is not well formed)."""
    pad = st.integers(0, 3)
    key = draw(st.one_of(st.none(), st.binary(max_size=20)))
    value = draw(st.one_of(st.none(), st.binary(max_size=300)))
    headers = draw(st.lists(st.tuples(st.one_of(st.text(max_size=5).map(str.encode), st.binary(max_size=5)),
                                      st.one_of(st.none(), st.binary(max_size=8))), max_size=3))

    def sized(b):
        return [("varint", -1 if b is None else len(b), draw(pad)), ("raw", b or b"")]

    parts = [("raw", b"\x00"), ("varint", draw(st.integers(-(1 << 40), 1 << 40)), draw(pad)),
             ("varint", draw(st.integers(-5, 1 << 20)), draw(pad)), *sized(key), *sized(value),
             ("varint", len(headers), draw(pad))]
    for hkey, hvalue in headers:
        parts += sized(hkey) + sized(hvalue)
    return parts


def _encode(parts) -> bytes:
    return b"".join(varint(p[1], p[2]) if p[0] == "varint" else p[1] for p in parts)


@st.composite
def sections(draw):
    """A records section and a record count: well formed, or with one field changed (a length,
    the count, a record's length), or with bytes flipped, cut or inserted."""
    recs = draw(st.lists(record_parts(), max_size=4))
    count = len(recs)
    change = draw(st.sampled_from(["none", "none", "field", "field", "record length", "count", "bytes"]))
    if change == "field" and recs:
        parts = recs[draw(st.integers(0, len(recs) - 1))]
        where = draw(st.sampled_from([i for i, p in enumerate(parts) if p[0] == "varint"]))
        _, value, padding = parts[where]
        parts[where] = ("varint", draw(st.one_of(odd_lengths, st.sampled_from([value - 1, value + 1]))), padding)
    encoded = [_encode(parts) for parts in recs]
    lengths = [len(body) for body in encoded]
    if change == "record length" and recs:
        i = draw(st.integers(0, len(recs) - 1))
        lengths[i] = draw(st.one_of(odd_lengths, st.sampled_from([5, 6, lengths[i] - 1, lengths[i] + 1])))
    data = bytearray(b"".join(varint(n, draw(st.integers(0, 2))) + body for n, body in zip(lengths, encoded)))
    if change == "count":
        count = draw(st.integers(0, 6))
    if change == "bytes" and data:
        where = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["flip", "cut", "insert", "end"]))
        if how == "flip":
            data[where] = draw(st.integers(0, 255))
        elif how == "cut":
            del data[where:where + draw(st.integers(1, 4))]
        elif how == "insert":
            data[where:where] = draw(st.binary(min_size=1, max_size=3))
        else:
            del data[where:]
    return bytes(data), count


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sections())
@example((b"", 0))
@example((b"", 1))
@example((b"\x00", 0))
def test_c_walk_agrees_with_the_python_walk(section):
    data, count = section
    assert walk(data, count) == python_accepts(data, count)
    assert walk(memoryview(bytearray(data)), count) == python_accepts(data, count)


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 4))
def test_c_walk_agrees_on_arbitrary_bytes(data, count):
    assert walk(data, count) == python_accepts(data, count)


def _record(key: bytes | None, value: bytes | None, headers=b"\x00", pad: int = 0) -> bytes:
    body = (b"\x00" + varint(0) + varint(0) + varint(-1 if key is None else len(key), pad) + (key or b"")
            + varint(-1 if value is None else len(value), pad) + (value or b"") + headers)
    return varint(len(body)) + body


@pytest.mark.parametrize("section, count, well_formed", [
    (_record(b"k", b"v" * 1000), 1, True),
    (_record(None, None), 1, True),
    (_record(b"k", b"v", pad=9), 1, True),                                   # ten-byte varints
    (_record(b"k", b"v", pad=10), 1, False),                                 # eleven-byte ones
    (_record(b"k", b"v") + b"\x00", 1, False),                              # a byte left over
    (_record(b"k", b"v")[:-1], 1, False),                                   # truncated
    (_record(b"k", b"v", headers=varint(1) + varint(2) + b"\xc3\xa9" + varint(-1)), 1, True),
    (_record(b"k", b"v", headers=varint(1) + varint(2) + b"\xed\xa0" + varint(-1)), 1, False),  # surrogate
    (_record(b"k", b"v", headers=varint(1) + varint(-1) + varint(-1)), 1, False),  # null header key
    (varint(1 << 62) + b"\x00" * 10, 1, False),
])
def test_c_walk_on_chosen_sections(section, count, well_formed):
    assert python_accepts(section, count) is well_formed
    assert walk(section, count) is well_formed


_BASES = [
    [("raw", b"\x00"), ("varint", 0, 0), ("varint", 0, 0), ("varint", -1, 0), ("raw", b""),
     ("varint", -1, 0), ("raw", b""), ("varint", 0, 0)],
    [("raw", b"\x00"), ("varint", 3, 0), ("varint", 1, 1), ("varint", 1, 0), ("raw", b"k"),
     ("varint", 200, 0), ("raw", b"v" * 200), ("varint", 2, 0),
     ("varint", 2, 0), ("raw", b"h1"), ("varint", -1, 0), ("raw", b""),
     ("varint", 2, 0), ("raw", b"h2"), ("varint", 3, 0), ("raw", b"abc")],
]


def test_c_walk_agrees_on_every_field_set_to_every_odd_value():
    """Each varint of two records, one at a time, set to each boundary value; the record's length
    recomputed or kept; the record alone and followed by a well-formed one."""
    checked = 0
    for base in _BASES:
        for where, part in enumerate(base):
            if part[0] != "varint":
                continue
            for value in [-3, -2, -1, 0, 1, 2, part[1] - 1, part[1] + 1, 1 << 62, -(1 << 62),
                          (1 << 63) - 1, -(1 << 63), 1 << 64, -(1 << 68)]:
                parts = list(base)
                parts[where] = ("varint", value, 0)
                body = _encode(parts)
                for length in (len(body), len(_encode(base))):
                    for tail in (b"", varint(len(_encode(_BASES[0]))) + _encode(_BASES[0])):
                        data = varint(length) + body + tail
                        count = 1 + bool(tail)
                        assert walk(data, count) == python_accepts(data, count), (where, value, length, tail)
                        checked += 1
    assert checked > 500


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_parts(), max_size=5))
def test_the_c_keyless_check_agrees_with_decoding(recs):
    """A compacted topic's produce path asks the C walk whether a record has no key; the answer
    is what decoding the records says (on well-formed sections, the only ones it is asked about)."""
    from kraftd.protocol._record_walk import has_keyless_record
    encoded = [_encode(parts) for parts in recs]
    data = b"".join(varint(len(body)) + body for body in encoded)
    if not python_accepts(data, len(recs)):
        return  # (a header key that is not UTF-8)
    keys = [r.key for r in records._decode_payload(data, len(recs), 0, 0, None)]
    assert has_keyless_record(data, len(recs)) == any(k is None for k in keys)
    assert has_keyless_record(memoryview(bytearray(data)), len(recs)) == any(k is None for k in keys)
