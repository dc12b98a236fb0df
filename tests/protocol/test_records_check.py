"""check_records (the produce path's validation) must agree with decode_records on every input:
same verdict, same error type, without building the records."""
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from kraftd.protocol.errors import CorruptRecordError, InvalidRecordError
from kraftd.protocol.records import (BATCH_HEADER_SIZE, Compression, build_batch, check_records,
                                     decode_records, parse_batch_header)

records = st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=300)),
                             st.one_of(st.none(), st.binary(max_size=300)),
                             st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))),
                                      max_size=3),
                             st.integers(0, 2**40)),
                   min_size=1, max_size=8)


def verdict(fn, batch, header):
    try:
        fn(batch, header)
        return None
    except (CorruptRecordError, InvalidRecordError) as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(records, st.sampled_from(list(Compression)), st.data())
def test_check_agrees_with_decode_on_mutated_batches(recs, codec, data):
    batch = bytearray(build_batch(recs, compression=codec))
    header = parse_batch_header(batch)
    assert verdict(check_records, batch, header) is None
    # Damage the records section (the header stays valid, so both get past it).
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(BATCH_HEADER_SIZE, len(batch) - 1))
        batch[pos] = data.draw(st.integers(0, 255))
    assert verdict(check_records, batch, header) is verdict(decode_records, batch, header)


@pytest.mark.parametrize("payload", [
    b"\xff" * 11 + b"garbage",          # an endless varint
    b"\x7e" + b"\x00" * 10,             # a record length past the end
    b"\x0c\x00\x00\x00\x7f\x00\x00",    # a key length past the record
])
def test_garbage_records_are_rejected(payload):
    good = bytearray(build_batch([(b"k", b"v", [], 1)]))
    batch = good[:BATCH_HEADER_SIZE] + payload
    header = parse_batch_header(good)._replace(batch_length=len(batch) - 12)
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        check_records(batch, header)
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        decode_records(batch, header)
