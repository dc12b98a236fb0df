"""Coverage-guided fuzzing of the record-batch parsers and the decompressors (atheris).

One input is one mode byte followed by a record set (one or more v2 batches, as a Produce
request carries them, or as a log read returns them). Per input:

    validate_batches(buf)          the produce path's header/CRC checks (quorum/handlers/produce.py)
    check_records(batch, header)   its per-record walk, on every batch validate_batches accepted
    decode_records(batch, header)  what readers do (fetch sessions, snapshots, the group
                                   coordinator, tools); run on every batch whose header parses
    iter_batch_headers / iter_records over the whole buffer (a log read, a snapshot chunk)
    decompress(codec, payload)     each codec directly on the bytes after the header

Allowed outcomes are results and the protocol's own errors (CorruptRecordError,
InvalidRecordError: KafkaProtocolError). Findings, besides any other exception:
    - check_records accepts a batch that decode_records rejects, or the other way round
      (check_records claims to check everything decode_records checks);
    - decode_records returns a number of records other than the header's count;
    - a batch rebuilt from decoded records (build_batch, same codec) decodes differently;
    - a decompressor returns more than its max_size.

The mode byte (bits, low first):
    0    recompute the CRC32C of every complete batch first, so mutations get past the CRC
    1    validate as replicated data (from_client=False: control and empty batches allowed)
    2-4  the codec for the direct decompress() call (0-4; 5-7: the batch's own codec)
    5-6  its max_size: DIRECT_LIMITS[bits] (1 MiB, 64 KiB, 1000, 0)

Run it (new inputs go to the first directory, the committed seeds are only read):

    .venv/bin/python -m fuzz.record_batches -runs=100000 build/fuzz/record_batches fuzz/corpus/record_batches

or `make fuzz`. A crash file replays with `.venv/bin/python -m fuzz.record_batches crash-<sha1>`.
"""
from __future__ import annotations

import contextlib
import io
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import atheris  # noqa: E402

from fuzz import refuse_seeds_as_output  # noqa: E402

_log = io.StringIO()  # atheris writes a line per instrumented module; keep the summary
with contextlib.redirect_stderr(_log), atheris.instrument_imports(include=["kraftd.protocol"]):
    from kraftd.protocol.compression import decompress
    from kraftd.protocol.errors import KafkaProtocolError
    from kraftd.protocol.records import (BATCH_HEADER_SIZE, build_batch, check_records, decode_records,
                                         iter_batch_headers, iter_records, parse_batch_header, validate_batches)
sys.stderr.write(f"INFO: instrumented {_log.getvalue().count('Instrumenting')} modules\n")

from google_crc32c import value as _crc32c

# max_size of the direct decompress() call, by mode bits 5-6 (small ones reach the bomb checks).
DIRECT_LIMITS = (1 << 20, 65536, 1000, 0)
INT64 = (-(1 << 63), (1 << 63) - 1)


class Finding(AssertionError):
    """An outcome the parsers' contract rules out (not an exception they raised)."""


def fix_crcs(buf: bytearray) -> None:
    pos, end = 0, len(buf)
    while end - pos >= BATCH_HEADER_SIZE:
        length, = struct.unpack_from(">i", buf, pos + 8)
        size = length + 12
        if length < 49 or pos + size > end:
            return
        struct.pack_into(">I", buf, pos + 17, _crc32c(bytes(buf[pos + 21:pos + size])))
        pos += size


def _outcome(fn, *args, **kw):
    """(True, result) or (False, the KafkaProtocolError); anything else propagates."""
    try:
        return True, fn(*args, **kw)
    except KafkaProtocolError as e:
        return False, e


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0]
    buf = bytearray(data[1:])
    if mode & 0x01:
        fix_crcs(buf)
    view = memoryview(buf)

    # The produce path: headers and CRCs, then every record of every batch.
    ok, headers = _outcome(validate_batches, view, from_client=not mode & 0x02)
    if ok:
        pos = 0
        for header in headers:
            batch = view[pos:pos + header.size]
            checked, err = _outcome(check_records, batch, header)
            decoded, records = _outcome(decode_records, batch, header)
            if checked != decoded:
                raise Finding(f"check_records {'accepts' if checked else 'rejects'} a batch that decode_records "
                              f"{'rejects' if checked else 'accepts'}: {err if not checked else records}")
            if decoded:
                if len(records) != header.records_count:
                    raise Finding(f"{len(records)} records decoded, the header says {header.records_count}")
                _round_trip(records, header)
            pos += header.size

    # Readers: a log read or snapshot chunk walks every complete batch.
    ok, walked = _outcome(lambda: list(iter_batch_headers(view)))
    if ok:
        for pos, header in walked:
            _outcome(decode_records, view[pos:pos + header.size], header)
    _outcome(lambda: sum(1 for _ in iter_records(view)))
    _outcome(parse_batch_header, view)

    # The decompressors on their own, with a small limit (bomb checks).
    codec = (mode >> 2) & 0x07
    payload = bytes(view[BATCH_HEADER_SIZE:])
    if codec > 4:
        if len(buf) < BATCH_HEADER_SIZE:
            return
        codec = buf[22] & 0x07  # the low byte of the batch's attributes
        if codec > 4:
            return
    limit = DIRECT_LIMITS[(mode >> 5) & 0x03]
    ok, out = _outcome(decompress, codec, payload, max_size=limit)
    if ok and codec and len(out) > limit:  # codec 0 is no compression: the bytes as they are
        raise Finding(f"decompress(codec {codec}) returned {len(out)} bytes, over max_size {limit}")


def _round_trip(records, header) -> None:
    """Rebuild the batch from its decoded records; it must decode to the same records."""
    if not records:
        return
    if any(not (INT64[0] <= r.timestamp <= INT64[1]) for r in records):
        return  # Kafka timestamps are int64; deltas past that do not re-encode in 10 bytes
    base = records[0].timestamp
    if any(not (INT64[0] <= r.timestamp - base <= INT64[1]) for r in records):
        return
    codec = header.attributes & 0x07
    rebuilt = build_batch(records, compression=codec)
    again = decode_records(rebuilt)
    if [(r.timestamp, r.key, r.value, r.headers) for r in again] != \
            [(r.timestamp, r.key, r.value, r.headers) for r in records]:
        raise Finding("a batch rebuilt from its decoded records decodes differently")


def main() -> None:
    refuse_seeds_as_output(sys.argv)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
