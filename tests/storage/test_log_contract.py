"""One contract for every PartitionLog (FileLog and MemoryLog)."""
import pytest

from kraftd.protocol.records import build_batch, iter_batch_headers, parse_batch_header
from kraftd.storage import OffsetOutOfRangeError, ProducerStatus
from kraftd.storage.errors import NonContiguousAppendError
from storage_helpers import batch


def headers_of(result):
    return [h for _, h in iter_batch_headers(result.to_bytes())]


def fill(log, count, n=1, epoch=1, **kw):
    return [log.append_as_leader(batch(n, **kw), epoch, now_ms=0) for _ in range(count)]


def test_offsets_are_assigned_and_epoch_patched(make_log):
    log = make_log()
    r1 = log.append_as_leader(batch(3), 5, now_ms=0)
    r2 = log.append_as_leader(batch(2) + batch(4), 5, now_ms=0)
    assert (r1.first_offset, r1.last_offset) == (0, 2)
    assert (r2.first_offset, r2.last_offset) == (3, 8)
    assert log.log_end_offset == 9
    hs = headers_of(log.read(0, 1 << 20))
    assert [h.base_offset for h in hs] == [0, 3, 5]
    assert {h.partition_leader_epoch for h in hs} == {5}


def test_append_patches_callers_buffer_in_place(make_log):
    log = make_log()
    fill(log, 2)
    buf = batch(1)
    log.append_as_leader(buf, 2, now_ms=0)
    h = parse_batch_header(buf)
    assert (h.base_offset, h.partition_leader_epoch) == (2, 2)


def test_log_append_time(make_log):
    log = make_log()
    r = log.append_as_leader(batch(2, ts=10), 1, now_ms=777, log_append_time=True)
    assert r.log_append_time_ms == 777 and r.max_timestamp == 777
    (h,) = headers_of(log.read(0, 1000))
    assert h.timestamp_type == 1 and h.max_timestamp == 777
    r = log.append_as_leader(batch(1, ts=10), 1, now_ms=778)
    assert r.log_append_time_ms == -1 and r.max_timestamp == 10


def test_read_returns_whole_batches_within_max_bytes(make_log):
    log = make_log()
    fill(log, 10, n=2)
    size = len(batch(2))
    r = log.read(0, size * 3 + size // 2)
    assert r.size == size * 3 == sum(len(x) for x in r.regions)
    assert (r.first_offset, r.next_offset) == (0, 6)
    # An offset inside a batch returns that whole batch.
    r = log.read(5, size)
    assert [h.base_offset for h in headers_of(r)] == [4]


def test_min_one_batch_kip_74(make_log):
    log = make_log()
    fill(log, 3, n=5)
    r = log.read(0, 10)
    assert [h.base_offset for h in headers_of(r)] == [0]
    assert log.read(0, 10, min_one_batch=False).size == 0
    # Not the first batch of the response: never exceed max_bytes.
    size = len(batch(5))
    assert log.read(0, size + 10).size == size


def test_max_offset_is_exclusive(make_log):
    log = make_log()
    fill(log, 5, n=2)  # batches at 0,2,4,6,8
    assert [h.base_offset for h in headers_of(log.read(0, 1 << 20, max_offset=6))] == [0, 2, 4]
    assert log.read(6, 1 << 20, max_offset=6).size == 0
    # A batch straddling max_offset is not returned.
    assert [h.base_offset for h in headers_of(log.read(0, 1 << 20, max_offset=5))] == [0, 2]
    assert log.read(4, 1 << 20, max_offset=5).regions == []


def test_out_of_range(make_log):
    log = make_log()
    fill(log, 3)
    assert log.read(3, 100).size == 0  # == LEO: empty
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    log.advance_log_start(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert log.read(2, 1000).first_offset == 2


def test_multi_segment_reads(make_log):
    size = len(batch(1))
    log = make_log(segment_bytes=size * 3, index_interval_bytes=size)
    fill(log, 20)
    assert len(log.segments) == 7
    r = log.read(1, 1 << 20)
    assert [h.base_offset for h in headers_of(r)] == list(range(1, 20))
    assert r.size == 19 * size and len(r.regions) == 7
    r = log.read(2, size * 4)
    assert [h.base_offset for h in headers_of(r)] == [2, 3, 4, 5]


def test_follower_append_keeps_offsets_and_epochs(make_log):
    log = make_log()
    data = batch(2, base_offset=0, epoch=3) + batch(1, base_offset=2, epoch=4)
    r = log.append_as_follower(bytes(data))
    assert (r.first_offset, r.last_offset) == (0, 2)
    assert log.epoch_cache.entries == [(3, 0), (4, 2)]
    with pytest.raises(NonContiguousAppendError):
        log.append_as_follower(bytes(batch(1, base_offset=5, epoch=4)))
    assert log.log_end_offset == 3


def test_epoch_cache_updated_on_new_epoch_only(make_log):
    log = make_log()
    fill(log, 2, epoch=1)
    fill(log, 2, epoch=1)
    fill(log, 1, epoch=3)
    assert log.epoch_cache.entries == [(1, 0), (3, 4)]
    assert log.epoch_cache.end_offset_for(1, log.log_end_offset) == (1, 4)
    assert log.epoch_cache.end_offset_for(3, log.log_end_offset) == (3, 5)


def test_truncate_to(make_log):
    size = len(batch(2))
    log = make_log(segment_bytes=size * 2, index_interval_bytes=size)
    fill(log, 3, n=2, epoch=1)
    fill(log, 3, n=2, epoch=2)  # epoch 2 starts at 6
    log.truncate_to(7)  # inside the batch 6..7: the whole batch goes
    assert log.log_end_offset == 6
    assert log.epoch_cache.entries == [(1, 0)]
    assert [h.base_offset for h in headers_of(log.read(0, 1 << 20))] == [0, 2, 4]
    r = log.append_as_leader(batch(1), 3, now_ms=0)
    assert r.first_offset == 6
    assert [h.base_offset for h in headers_of(log.read(0, 1 << 20))] == [0, 2, 4, 6]
    log.truncate_to(100)  # beyond the end: nothing
    assert log.log_end_offset == 7


def test_truncate_keeps_flushed_offset_consistent(make_log):
    log = make_log()
    fill(log, 5)
    assert log.flush() == 5 == log.flushed_offset
    log.truncate_to(3)
    assert log.flushed_offset == 3


def test_advance_log_start(make_log):
    size = len(batch(1))
    log = make_log(segment_bytes=size * 2)
    fill(log, 4, epoch=1)
    fill(log, 4, epoch=2)
    log.advance_log_start(5)
    assert log.log_start_offset == 5
    assert log.segments[0].base_offset == 4  # segments wholly below are gone
    assert log.epoch_cache.entries == [(2, 5)]
    assert log.read(5, 1000).first_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start(100)
    log.advance_log_start(3)  # never moves back
    assert log.log_start_offset == 5


def test_retention_by_bytes(make_log):
    size = len(batch(1))
    log = make_log(segment_bytes=size * 2)
    fill(log, 10)  # 5 segments of 2 batches
    assert log.apply_retention(0, -1, size * 5) == 2
    assert log.log_start_offset == 4 and len(log.segments) == 3
    assert log.apply_retention(0, -1, size * 5) == 0


def test_retention_by_time_rolls_when_everything_expired(make_log):
    size = len(batch(1))
    log = make_log(segment_bytes=size * 2)
    for ts in (100, 200, 300, 400, 500):
        log.append_as_leader(batch(1, ts=ts), 1, now_ms=0)
    # segments: [100,200], [300,400], [500]
    assert log.apply_retention(1000, 550, -1) == 2
    assert log.log_start_offset == 4
    assert log.apply_retention(2000, 10, -1) == 1
    assert log.log_start_offset == 5 == log.log_end_offset
    assert log.read(5, 100).size == 0
    assert log.append_as_leader(batch(1), 1, now_ms=0).first_offset == 5


def test_retention_respects_max_offset(make_log):
    size = len(batch(1))
    log = make_log(segment_bytes=size * 2)
    fill(log, 6)
    assert log.apply_retention(0, -1, 0, max_offset=3) == 1
    assert log.log_start_offset == 2


def test_timestamps(make_log):
    log = make_log()
    log.append_as_leader(batch(3, ts=100, ts_step=10), 1, now_ms=0)  # 100,110,120
    log.append_as_leader(batch(2, ts=90, ts_step=100), 2, now_ms=0)  # 90,190
    log.append_as_leader(batch(1, ts=150), 2, now_ms=0)
    assert log.offset_for_timestamp(0) == (0, 100, 1)
    assert log.offset_for_timestamp(105) == (1, 110, 1)
    assert log.offset_for_timestamp(121) == (4, 190, 2)
    assert log.offset_for_timestamp(191) is None
    assert log.max_timestamp_entry() == (4, 190, 2)


def test_timestamps_empty_log(make_log):
    log = make_log()
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_entry() is None


def test_producer_state_follows_appends_and_truncation(make_log):
    log = make_log()
    log.append_as_leader(batch(3, producer_id=9, producer_epoch=0, base_sequence=0), 1, now_ms=0)
    log.append_as_leader(batch(2, producer_id=9, producer_epoch=0, base_sequence=3), 1, now_ms=0)
    ps = log.producer_state
    assert ps.check(9, 0, 3, 4).duplicate_first_offset == 3
    assert ps.check(9, 0, 5, 5).status is ProducerStatus.OK
    log.truncate_to(3)
    assert log.producer_state.check(9, 0, 3, 4).status is ProducerStatus.OK


def _crash_and_reopen(make_log, log):
    """Everything flushed, then a crash: the log as recovery finds it."""
    log.flush()
    if make_log.kind == "memory":
        log.crash()
        return log
    log.abandon()
    return make_log()


def test_producer_state_outlives_the_log_start(make_log):
    """A producer whose batches are all below the log start is not forgotten: a retry of a batch
    whose answer it never got must still be a duplicate, not appended again (simulation seed
    5484: a snapshot moved the log start past a producer's only batch, which it retried as
    sequence 0 of the same epoch). Rebuilds of the state (truncation, recovery) keep it too."""
    log = make_log()
    log.append_as_leader(batch(1, producer_id=9, producer_epoch=0, base_sequence=0), 1, now_ms=0)  # 0
    log.append_as_leader(batch(1, producer_id=8, producer_epoch=0, base_sequence=0), 1, now_ms=0)  # 1
    fill(log, 1)  # 2
    log.append_as_leader(batch(1, producer_id=8, producer_epoch=0, base_sequence=1), 1, now_ms=0)  # 3
    fill(log, 1)  # 4
    log.advance_log_start(3)

    def answers(state):
        return (state.check(9, 0, 0, 0).duplicate_first_offset, state.check(9, 0, 1, 1).status,
                state.check(8, 0, 0, 0).duplicate_first_offset)

    assert answers(log.producer_state) == (0, ProducerStatus.OK, 1)
    assert log.producer_state.check(8, 0, 1, 1).duplicate_first_offset == 3
    log.truncate_to(4)  # rebuilt from the log start: producer 8's batch at 3 stays
    assert answers(log.producer_state) == (0, ProducerStatus.OK, 1)
    assert log.producer_state.check(8, 0, 1, 1).duplicate_first_offset == 3
    log.truncate_to(3)  # and now goes: 8 is back to what it had below the log start
    assert answers(log.producer_state) == (0, ProducerStatus.OK, 1)
    assert log.producer_state.check(8, 0, 1, 1).status is ProducerStatus.OK
    log = _crash_and_reopen(make_log, log)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert answers(log.producer_state) == (0, ProducerStatus.OK, 1)


def test_producer_state_outlives_retention(make_log):
    one = len(batch(1))
    log = make_log(segment_bytes=one)  # a segment per batch
    log.append_as_leader(batch(1, producer_id=9, producer_epoch=0, base_sequence=0), 1, now_ms=0)
    fill(log, 3)
    assert log.apply_retention(0, -1, 2 * one) == 2 and log.log_start_offset == 2
    assert log.producer_state.check(9, 0, 0, 0).duplicate_first_offset == 0
    log = _crash_and_reopen(make_log, log)
    assert log.log_start_offset == 2
    assert log.producer_state.check(9, 0, 0, 0).duplicate_first_offset == 0


def test_an_expired_producer_below_the_log_start_stays_forgotten(make_log):
    log = make_log()
    log.append_as_leader(batch(1, producer_id=9, producer_epoch=0, base_sequence=3), 1, now_ms=0)
    fill(log, 3)
    log.advance_log_start(1)
    assert log.producer_state.expire_idle(1_000, 0) == 1
    log.advance_log_start(2)
    log.truncate_to(3)
    assert 9 not in log.producer_state
    log = _crash_and_reopen(make_log, log)
    assert 9 not in log.producer_state


def test_flush_returns_log_end(make_log):
    log = make_log()
    assert log.flushed_offset == 0
    fill(log, 3)
    assert log.flushed_offset == 0
    assert log.flush() == 3


def test_truncate_fully_and_start_at(make_log):
    log = make_log()
    fill(log, 5)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 100)
    assert log.epoch_cache.entries == []
    assert log.append_as_leader(batch(1), 4, now_ms=0).first_offset == 100
    assert log.epoch_cache.entries == [(4, 100)]
