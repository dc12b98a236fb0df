"""Item B at process level: a torn or corrupted tail of the active segment is cut off at
startup; everything before it reads back, and new produces continue the offsets.

Produce with acks=all (so the bytes are on disk), kill -9, then damage the last batch of
`<data>/<topic>-0/<20 digits>.log` in one of several ways and restart. Each trial starts
from a copy of the same crashed data directory.
"""
from __future__ import annotations

import shutil
import time

import pytest

from kraftd.protocol.records import iter_batch_headers

from .support import RawClient, batch_of, failure_signatures, segment_files, server_failures

TOPIC = "torn"
BATCHES = 6
PER_BATCH = 3


def _start(server) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            server.start()
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _damages(pos: int, size: int) -> dict[str, object]:
    """name -> truncation length (int) or a function bytes -> bytes."""
    cuts = sorted({1, 2, 4, 8, 11, 12, 13, 16, 17, 20, 21, 40, 57, 60, 61, 62,
                   size // 2, size - 2, size - 1})
    out: dict[str, object] = {f"cut+{c}": pos + c for c in cuts if 0 < c < size}

    def flip(i):
        return lambda b: b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1:]

    out["crc_byte_flipped"] = flip(pos + 17)
    out["crc_last_byte_flipped"] = flip(pos + 20)
    out["payload_last_byte_flipped"] = flip(pos + size - 1)
    out["zeros_after_last_batch"] = lambda b: b + b"\x00" * 4096
    out["length_field_zeroed"] = lambda b: b[:pos + 8] + b"\x00\x00\x00\x00" + b[pos + 12:]
    return out


@pytest.mark.timeout(280)
def test_torn_or_corrupt_last_batch_is_dropped_at_restart(kraftd_factory, tmp_path):
    server = kraftd_factory()
    c = RawClient(server.port)
    produced = []  # (offset, value)
    for i in range(BATCHES):
        values = [f"b{i}-r{j}".encode() for j in range(PER_BATCH)]
        out = c.produce(TOPIC, batch_of(values), acks=-1)
        assert out.error_code == 0, out
        produced.extend((out.base_offset + j, v) for j, v in enumerate(values))
    c.close()
    server.kill()

    data = server.data_dir
    pristine = tmp_path / "pristine"
    shutil.copytree(data, pristine)
    seg = segment_files(data, TOPIC)[-1]
    assert len(seg.stem) == 20 and seg.stem.isdigit(), seg
    original = seg.read_bytes()
    batches = list(iter_batch_headers(memoryview(original)))
    last_pos, last = batches[-1]
    assert last_pos + last.size == len(original), "segment does not end at the last batch"
    assert last.base_offset == produced[-PER_BATCH][0]
    survivors = produced[:-PER_BATCH]
    next_offset = last.base_offset  # where offsets must continue after the torn batch is cut

    problems = []
    trials = _damages(last_pos, last.size)
    t0 = time.monotonic()
    for name, damage in trials.items():
        shutil.rmtree(data)
        shutil.copytree(pristine, data)
        if isinstance(damage, int):
            with open(seg, "r+b") as f:
                f.truncate(damage)
        else:
            seg.write_bytes(damage(original))
        server.log_lines.clear()
        # the zero tail leaves every batch intact: then nothing may be lost
        keep = produced if name == "zeros_after_last_batch" else survivors
        first_new = last.last_offset + 1 if name == "zeros_after_last_batch" else next_offset
        try:
            _start(server)
        except RuntimeError as e:
            problems.append(f"{name}: server did not start: {e}")
            continue
        try:
            c = RawClient(server.port)
            got = [(o, v) for o, _, v in c.read_all(TOPIC)]
            if got != keep:
                problems.append(f"{name}: read back {got[-4:]} (len {len(got)}), "
                                f"expected ...{keep[-2:]} (len {len(keep)})")
            hw = c.fetch(TOPIC, 0).high_watermark
            out = c.produce(TOPIC, batch_of([b"new-1", b"new-2"]), acks=-1)
            # offsets continue at the log end: right after the kept batches, plus at most the
            # one-record LeaderChange control batch a restarted leader writes
            if out.error_code != 0 or out.base_offset != hw or not (
                    first_new <= out.base_offset <= first_new + 1):
                problems.append(f"{name}: new produce -> error {out.error_code}, base offset "
                                f"{out.base_offset}, expected {first_new} (+1 control) = hw {hw}")
            got = [(o, v) for o, _, v in c.read_all(TOPIC)]
            want = keep + [(out.base_offset, b"new-1"), (out.base_offset + 1, b"new-2")]
            if got != want:
                problems.append(f"{name}: after the new produce read {got[-4:]}, want {want[-4:]}")
            c.close()
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: client failed: {e!r}")
        if server_failures(server.log_lines):
            problems.append(f"{name}: server log failures {failure_signatures(server.log_lines)}")
        server.kill()
    elapsed = time.monotonic() - t0
    print(f"\ntorn tail: {len(trials)} damaged restarts in {elapsed:.1f}s "
          f"(last batch at {last_pos}, {last.size} bytes)")
    assert not problems, "\n".join(problems)


def test_clean_restart_keeps_everything(kraftd):
    """Control for the test above: without damage, a kill -9 loses nothing acknowledged."""
    c = RawClient(kraftd.port)
    values = [b"a", b"b", b"c"]
    base = c.produce(TOPIC, batch_of(values), acks=-1).base_offset
    c.close()
    kraftd.kill()
    _start(kraftd)
    c = RawClient(kraftd.port)
    assert [(o, v) for o, _, v in c.read_all(TOPIC)] == [(base + i, v) for i, v in enumerate(values)]
    c.close()
