"""FileLog specifics: segments and indexes on disk, recovery, flush from another thread."""
import os
import threading

import pytest

from kraftd.protocol.records import iter_batch_headers
from kraftd.storage import FileLog
from kraftd.storage import file_log as storage_file_log
from kraftd.storage.background_writes import background_writes
from storage_helpers import batch


def open_log(path, **kw):
    kw.setdefault("segment_bytes", 4096)
    kw.setdefault("index_interval_bytes", 256)
    return FileLog(path, **kw)


def offsets(log, start=None):
    start = log.log_start_offset if start is None else start
    return [h.base_offset for _, h in iter_batch_headers(log.read(start, 1 << 30).to_bytes())]


def test_segments_roll_and_every_offset_is_found(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(400):
        log.append_as_leader(batch(1 + i % 3, ts=i), 1, now_ms=0)
    assert len(log.segments) > 5
    names = sorted(os.listdir(tmp_path / "p"))
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert all(len(s.idx_rel) > 3 for s in log.segments[:-1])  # sparse, not empty
    for off in range(0, log.log_end_offset, 7):
        r = log.read(off, 1)
        (h,) = [h for _, h in iter_batch_headers(r.to_bytes())]
        assert h.base_offset <= off <= h.last_offset
    for ts in range(0, 400, 13):
        off, found_ts, _ = log.offset_for_timestamp(ts)
        assert found_ts == ts


def test_regions_support_sendfile(tmp_path):
    log = open_log(tmp_path / "p")
    for _ in range(200):
        log.append_as_leader(batch(1), 1, now_ms=0)
    r = log.read(0, 1 << 20)
    want = r.to_bytes()
    got = b"".join(os.pread(reg.fileno(), len(reg), reg.position) for reg in r.regions)
    assert got == want
    sealed = [reg for reg in r.regions if reg.segment.sealed]
    assert sealed


def test_large_views_are_mmap_slices_and_small_ones_copies(tmp_path):
    import mmap

    from kraftd.storage.segment import MMAP_MIN_BYTES

    log = open_log(tmp_path / "p", segment_bytes=1 << 20)
    while log.size_in_bytes < 4 * MMAP_MIN_BYTES:
        log.append_as_leader(batch(50), 1, now_ms=0)
    big = log.read(0, 1 << 20).regions[0]
    assert len(big) >= MMAP_MIN_BYTES and isinstance(big.view().obj, mmap.mmap)
    assert bytes(big.view()) == os.pread(big.fileno(), len(big), big.position)
    small = log.read(0, 1, min_one_batch=True).regions[0]
    assert len(small) < MMAP_MIN_BYTES and bytes(small.view()) == os.pread(small.fileno(), len(small), 0)


def test_reopen_after_clean_close(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(100):
        log.append_as_leader(batch(2, producer_id=1, producer_epoch=0, base_sequence=2 * i), 1 + i // 50, now_ms=0)
    log.advance_log_start(5)
    expect = offsets(log)
    log.close()
    log = open_log(tmp_path / "p")
    assert log.recovery_report.clean_shutdown and not log.recovery_report.segments_scanned
    assert offsets(log) == expect
    assert (log.log_start_offset, log.log_end_offset, log.flushed_offset) == (5, 200, 200)
    assert log.epoch_cache.entries == [(1, 5), (2, 100)]
    assert log.producer_state.check(1, 0, 198, 199).duplicate_first_offset == 198
    assert log.append_as_leader(batch(1), 2, now_ms=0).first_offset == 200


def test_reopen_without_close_scans_and_keeps_everything(tmp_path):
    log = open_log(tmp_path / "p")
    for _ in range(100):
        log.append_as_leader(batch(2, producer_id=1, producer_epoch=0, base_sequence=0), 1, now_ms=0)
    expect = offsets(log)
    del log  # crash: no close, no flush (the page cache still has everything)
    log = open_log(tmp_path / "p")
    assert not log.recovery_report.clean_shutdown and log.recovery_report.segments_scanned
    assert not log.recovery_report.truncated
    assert offsets(log) == expect and log.log_end_offset == 200


def _log_with_batches(path, count=6):
    log = open_log(path, segment_bytes=1 << 20)
    for i in range(count):
        log.append_as_leader(batch(3, value=b"x" * 40, ts=i), 1 + i // 3, now_ms=0)
    log.flush()
    seg = log.segments[-1]
    positions = [p for p, _ in seg.iter_headers(0)]
    return log, seg.path, positions, seg.size


def test_torn_tail_at_every_byte(tmp_path):
    src = tmp_path / "src"
    log, path, positions, size = _log_with_batches(src)
    log.close()
    original = open(path, "rb").read()
    last_start = positions[-1]
    for cut in range(last_start, size):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        for name in os.listdir(src):
            if name.endswith(".log"):
                (d / name).write_bytes(original[:cut])
            elif name == "leader-epoch-checkpoint":
                (d / name).write_bytes((src / name).read_bytes())
        log = open_log(d)
        rep = log.recovery_report
        assert log.log_end_offset == 15, cut  # exactly the previous whole batch
        assert rep.truncated_bytes == cut - last_start
        assert offsets(log) == [0, 3, 6, 9, 12]
        assert os.path.getsize(d / os.path.basename(path)) == last_start
        assert log.epoch_cache.entries == [(1, 0), (2, 9)]
        assert log.append_as_leader(batch(1), 2, now_ms=0).first_offset == 15
        log.close()


@pytest.mark.parametrize("where", ["crc", "payload", "length"])
def test_corrupt_last_batch_is_truncated(tmp_path, where):
    log, path, positions, size = _log_with_batches(tmp_path / "p")
    del log
    data = bytearray(open(path, "rb").read())
    at = positions[-1] + {"crc": 17, "payload": size - positions[-1] - 3, "length": 8}[where]
    data[at] ^= 0xFF
    open(path, "wb").write(data)
    log = open_log(tmp_path / "p")
    assert log.log_end_offset == 15 and offsets(log) == [0, 3, 6, 9, 12]
    assert log.recovery_report.truncated_at_position == positions[-1]


def test_corruption_in_earlier_segment_drops_later_segments(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=1024)
    for _ in range(40):
        log.append_as_leader(batch(1, value=b"y" * 100), 1, now_ms=0)
    segs = log.segments
    victim = segs[1]
    cut_pos = [p for p, _ in victim.iter_headers(0)][2]
    first_bad = victim.base_offset + 2
    log.flush()
    del log, segs, victim
    # No clean shutdown and a zero recovery point: everything is scanned.
    os.unlink(tmp_path / "p" / "recovery-point")
    path = tmp_path / "p" / f"{first_bad - 2:020d}.log"
    data = bytearray(path.read_bytes())
    data[cut_pos + 30] ^= 1
    path.write_bytes(data)
    log = open_log(tmp_path / "p")
    assert log.log_end_offset == first_bad
    assert offsets(log) == list(range(first_bad))
    assert log.recovery_report.deleted_segments


def test_indexes_rebuilt_after_deleting_index_files(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(300):
        log.append_as_leader(batch(1, ts=i), 1, now_ms=0)
    expect = offsets(log)
    index_before = [bytes(s.idx_rel) for s in log.segments[:-1]]
    log.close()
    for name in os.listdir(tmp_path / "p"):
        if name.endswith((".index", ".timeindex")):
            os.unlink(tmp_path / "p" / name)
    log = open_log(tmp_path / "p")
    assert len(log.recovery_report.indexes_rebuilt) >= len(index_before)
    assert [bytes(s.idx_rel) for s in log.segments[:-1]] == index_before
    assert offsets(log) == expect
    assert log.offset_for_timestamp(123)[0] == 123
    assert os.path.exists(log.segments[0].path.replace(".log", ".index"))


def test_garbage_index_file_is_detected(tmp_path):
    log = open_log(tmp_path / "p")
    for _ in range(300):
        log.append_as_leader(batch(1), 1, now_ms=0)
    log.close()
    idx = tmp_path / "p" / "00000000000000000000.index"
    idx.write_bytes(b"\x00" * 64)
    log = open_log(tmp_path / "p")
    assert 0 in log.recovery_report.indexes_rebuilt
    for off in range(0, 300, 11):
        assert log.read(off, 1).first_offset == off


def test_truncation_into_sealed_segment_keeps_inflight_regions_valid(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=1024)
    for _ in range(40):
        log.append_as_leader(batch(1, value=b"z" * 100), 1, now_ms=0)
    r = log.read(0, 1 << 20)
    views = [reg.view() for reg in r.regions]  # live mmap slices of sealed segments
    before = b"".join(bytes(v) for v in views)
    log.truncate_to(3)
    assert log.log_end_offset == 3 and not log.segments[0].sealed
    assert b"".join(bytes(v) for v in views) == before  # old inode, no SIGBUS
    log.append_as_leader(batch(1), 2, now_ms=0)
    assert offsets(log) == [0, 1, 2, 3]
    log.close()
    assert offsets(open_log(tmp_path / "p")) == [0, 1, 2, 3]


def test_truncation_is_durable_across_crash(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=1024)
    for _ in range(40):
        log.append_as_leader(batch(1, value=b"z" * 100), 1, now_ms=0)
    log.flush()
    log.truncate_to(12)
    log.append_as_leader(batch(2), 2, now_ms=0)
    del log
    log = open_log(tmp_path / "p")
    assert offsets(log) == list(range(12)) + [12]
    assert log.epoch_cache.entries == [(1, 0), (2, 12)]


def test_log_start_offset_persists(tmp_path):
    log = open_log(tmp_path / "p")
    for _ in range(10):
        log.append_as_leader(batch(1), 1, now_ms=0)
    log.advance_log_start(7)
    log.flush()  # the log start is durable before the flush returns (written in the background)
    del log
    log = open_log(tmp_path / "p")
    assert log.log_start_offset == 7 and offsets(log) == [7, 8, 9]


def test_a_crash_before_the_log_start_is_written_keeps_the_records_readable(tmp_path):
    # As Kafka's periodic log-start checkpoint: a crash may move the log start back, never past
    # records that are gone (recovery takes the first segment's base if it is larger).
    writes = background_writes()
    log = open_log(tmp_path / "p", segment_bytes=200)
    for _ in range(10):
        log.append_as_leader(batch(1), 1, now_ms=0)
    log.flush()
    inline, writes.inline = writes.inline, False
    started = threading.Event()
    release = threading.Event()
    writes.submit(lambda: (started.set(), release.wait(10)))  # holds the queue
    try:
        started.wait(10)
        log.advance_log_start(7)
        first_base = log._bases[0]
        reopened = open_log(tmp_path / "p", segment_bytes=200)  # the crash: the write has not run
        assert reopened.log_start_offset == max(first_base, 0) and first_base <= 7
        assert offsets(reopened)[-1] == 9
    finally:
        release.set()
        writes.barrier()
        writes.inline = inline


def test_a_log_start_move_is_written_off_the_calling_thread(tmp_path, monkeypatch):
    from kraftd.storage import file_log

    writers = []
    real = file_log.atomic_write
    monkeypatch.setattr(file_log, "atomic_write", lambda *a: (writers.append(threading.current_thread().name),
                                                              real(*a)))
    log = open_log(tmp_path / "p")
    for _ in range(10):
        log.append_as_leader(batch(1), 1, now_ms=0)
    log.advance_log_start(7)
    background_writes().barrier()
    assert (tmp_path / "p" / file_log.LOG_START_FILE).read_text() == "7\n"
    assert writers and threading.current_thread().name not in writers


def test_flush_from_another_thread_while_appending(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=16384)
    stop = threading.Event()
    seen = []
    errors = []

    def flusher():
        try:
            while not stop.is_set():
                seen.append(log.flush())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=flusher)
    t.start()
    for _ in range(2000):
        log.append_as_leader(batch(1, value=b"q" * 64), 1, now_ms=0)
    stop.set()
    t.join()
    assert not errors
    assert seen == sorted(seen) and seen[-1] <= 2000
    assert log.flush() == 2000
    assert len(log.segments) > 5
    del log
    assert open_log(tmp_path / "p", segment_bytes=16384).log_end_offset == 2000


def test_recovery_point_limits_the_scan(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=1024)
    for _ in range(60):
        log.append_as_leader(batch(1, value=b"z" * 100), 1, now_ms=0)
    log.flush()
    nseg = len(log.segments)
    del log
    log = open_log(tmp_path / "p", segment_bytes=1024)
    assert len(log.recovery_report.segments_scanned) == 1 < nseg


def test_flush_is_small_only_for_one_segment_of_a_few_appended_bytes(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=4096)
    log.append_as_leader(batch(1), 1, now_ms=0)
    assert not log.flush_is_small(1 << 20)  # a new directory and a new epoch to checkpoint
    log.flush()
    assert log.flush_is_small(0)  # nothing appended
    log.append_as_leader(batch(1, value=b"v" * 100), 1, now_ms=0)
    assert log.flush_is_small(1024) and not log.flush_is_small(100)
    log.flush()
    log.append_as_leader(batch(1), 2, now_ms=0)
    assert not log.flush_is_small(1 << 20)  # epoch 2 starts: the checkpoint is written first
    log.flush()
    while len(log.segments) == 1:
        log.append_as_leader(batch(1, value=b"v" * 500), 2, now_ms=0)
    assert not log.flush_is_small(1 << 20)  # the rolled segment and the directory too
    log.flush()
    assert log.flush_is_small(0)
    log.close()


def test_begin_flush_plans_only_segment_fsyncs_and_end_flush_makes_them_count(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=4096)
    log.append_as_leader(batch(1), 1, now_ms=0)
    assert log.begin_flush() is None  # a new directory and a new epoch to checkpoint: flush()
    log.flush()
    log.append_as_leader(batch(2), 1, now_ms=0)
    plan = log.begin_flush()
    assert plan is not None and plan.fds == [log.segments[-1].fd] and plan.target == 3
    assert log.flushed_offset == 1
    log.append_as_leader(batch(1), 1, now_ms=0)  # after the plan was taken: not covered by it
    for fd in plan.fds:
        os.fsync(fd)
    assert log.end_flush(plan) == 3 == log.flushed_offset
    assert log.begin_flush().target == 4  # the later append is dirty still
    log.append_as_leader(batch(1), 2, now_ms=0)
    assert log.begin_flush() is None  # epoch 2 starts: the checkpoint is written first
    assert log.flush() == 5
    log.close()


def test_abort_flush_leaves_the_segments_dirty(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=4096)
    log.append_as_leader(batch(1), 1, now_ms=0)
    log.flush()
    log.append_as_leader(batch(1), 1, now_ms=0)
    plan = log.begin_flush()
    log.abort_flush(plan)  # its fsync failed
    assert log.flushed_offset == 1
    again = log.begin_flush()
    assert again.fds == plan.fds and again.target == 2
    for fd in again.fds:
        os.fsync(fd)
    assert log.end_flush(again) == 2
    log.close()


def test_a_flush_of_a_log_discarded_meanwhile_is_moot(tmp_path, monkeypatch):
    """DeleteTopics has the directory renamed away while the group commit's thread flushes the
    log: the new directory's fsync then fails with ENOENT. That is not a failed fsync (nobody
    owns those files any more): flush() returns and raises nothing."""
    log = open_log(tmp_path / "p", segment_bytes=4096)
    log.append_as_leader(batch(2), 1, now_ms=0)  # a fresh partition: its directory is unsynced
    real_fsync_dir = storage_file_log.fsync_dir

    def deleted_meanwhile(path):
        log.discard()  # what the loop did while this thread ran
        real_fsync_dir(path)

    monkeypatch.setattr(storage_file_log, "fsync_dir", deleted_meanwhile)
    assert not log.discarded
    log.flush()
    background_writes().barrier()
    assert log.discarded and not os.path.exists(tmp_path / "p")
    assert log.flush() == log.flushed_offset  # and every later flush is a no-op


def test_discard_renames_off_the_callers_thread_and_a_new_log_there_waits_for_it(tmp_path):
    """DeleteTopics runs on the event loop, and a directory rename can wait for the file
    system's journal (65 ms measured: bench/README.md, (v)). discard() queues the rename on the
    background-writes thread; a log opened on the same directory meanwhile (a topic created
    again under the name) waits for the rename, so it never opens the deleted one's files."""


    old = open_log(tmp_path / "t-0")
    old.append_as_leader(batch(3), 1, now_ms=0)
    old.flush()
    gate = threading.Event()
    background_writes().submit(gate.wait)  # the background thread busy with an earlier write
    try:
        old.discard(remove=False)
        assert (tmp_path / "t-0").is_dir(), "renamed on the caller's thread"
        opened = []
        opener = threading.Thread(target=lambda: opened.append(open_log(tmp_path / "t-0")))
        opener.start()
        opener.join(0.3)
        assert opener.is_alive() and not opened, "a new log opened the deleted partition's directory"
    finally:
        gate.set()
    opener.join(10)
    new = opened[0]
    assert new.log_end_offset == 0
    doomed = [p for p in tmp_path.iterdir() if p.name.endswith(storage_file_log.DELETE_SUFFIX)]
    assert len(doomed) == 1  # renamed, not removed: remove=False
    old.remove_discarded()
    background_writes().barrier()
    assert not doomed[0].exists()
    new.close()


def test_a_writable_view_is_patched_where_it_lies_and_a_read_only_one_is_copied(tmp_path):
    """The produce path hands the request's own buffer over (no copy of a large batch): the
    append stamps offsets and the leader epoch into it, and what lands in the log matches."""
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(3), 1, now_ms=0)
    frame = bytearray(b"xx" + batch(2) + b"yy")
    view = memoryview(frame)[2:-2]
    log.append_as_leader(view, 7, now_ms=0)
    ((_, h),) = list(iter_batch_headers(view))
    assert (h.base_offset, h.partition_leader_epoch) == (3, 7)
    assert log.read(3, 1 << 20).to_bytes() == bytes(view)
    sent = bytes(batch(2))
    log.append_as_leader(memoryview(sent), 8, now_ms=0)
    ((_, h),) = list(iter_batch_headers(sent))
    assert h.base_offset == 0  # the caller's read-only bytes are untouched
    assert offsets(log) == [0, 3, 5]


def test_a_read_handed_out_before_a_discard_still_reads_its_bytes(tmp_path):
    """A Fetch answer holds file regions until it is sent; the partition may be deleted (or
    moved away) meanwhile. discard() leaves each segment's descriptor to its last reference:
    closed at once, the answer read a closed descriptor (sim seed 8486), or another file that
    reused its number."""
    log = open_log(tmp_path / "p")
    log.append_as_leader(batch(3), 1, now_ms=0)
    log.flush()
    regions = log.read(0, 1 << 20).regions
    expected = b"".join(bytes(r.view()) for r in regions)
    log.discard()
    background_writes().barrier()
    assert not os.path.exists(tmp_path / "p")
    for _ in range(20):  # descriptors opened meanwhile must not take the segment's place
        open(tmp_path / "other", "wb").close()
    assert b"".join(bytes(r.view()) for r in regions) == expected
    assert [h.base_offset for _, h in iter_batch_headers(memoryview(expected))] == [0]
