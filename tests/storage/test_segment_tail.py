"""LogSegment's tail positions: lookups at the log end come from the batches it remembers, and
give exactly what the index-and-scan lookup gives, after appends, truncation and recovery."""
import copy

from kraftd.storage import FileLog
from kraftd.storage.segment import TAIL_BATCHES
from storage_helpers import batch


def scanned(seg, offset):
    """The lookup without the remembered tail."""
    plain = copy.copy(seg)
    plain.forget_tail()
    return plain.lookup(offset)


def assert_lookups_agree(log):
    for seg in log.segments:
        end = seg.next_offset
        for off in range(seg.base_offset, end + 3):
            assert seg.lookup(off) == scanned(seg, off), (seg, off)


def fill(log, batches):
    for i in range(batches):
        log.append_as_leader(batch(1 + i % 4, ts=i), 1, now_ms=0)


def test_tail_lookups_match_the_scan_and_need_no_read(tmp_path, monkeypatch):
    log = FileLog(tmp_path / "p", segment_bytes=1 << 20, index_interval_bytes=4096)
    fill(log, 3 * TAIL_BATCHES)
    (seg,) = log.segments
    assert TAIL_BATCHES <= len(seg._tail) <= 2 * TAIL_BATCHES
    assert_lookups_agree(log)
    # A read at the log end finds its batch without touching the file's headers.
    first_remembered = seg._tail_bases[0]
    monkeypatch.setattr(seg, "iter_headers", lambda *a, **k: (_ for _ in ()).throw(AssertionError("scanned")))
    for off in range(first_remembered, log.log_end_offset):
        pos, h = seg.lookup(off)
        assert h.base_offset <= off <= h.last_offset
    assert seg.lookup(log.log_end_offset) == (seg.size, None)


def test_tail_survives_truncation_and_reopen(tmp_path):
    path = tmp_path / "p"
    log = FileLog(path, segment_bytes=1 << 20, index_interval_bytes=4096)
    fill(log, 3 * TAIL_BATCHES)
    log.truncate_to(log.log_end_offset - 40)  # into the remembered batches
    assert_lookups_agree(log)
    fill(log, 10)
    assert_lookups_agree(log)
    end = log.log_end_offset
    del log  # no clean close: the reopen scans the segment, and remembers its last batches
    reopened = FileLog(path, segment_bytes=1 << 20, index_interval_bytes=4096)
    assert reopened.log_end_offset == end
    assert reopened.segments[-1]._tail
    assert_lookups_agree(reopened)
    fill(reopened, 5)
    assert_lookups_agree(reopened)


def test_rolled_segments_each_answer_for_their_own_tail(tmp_path):
    log = FileLog(tmp_path / "p", segment_bytes=4096, index_interval_bytes=256)
    fill(log, 400)
    assert len(log.segments) > 3
    assert_lookups_agree(log)
    for off in range(0, log.log_end_offset, 5):
        r = log.read(off, 1)
        assert r.first_offset <= off
