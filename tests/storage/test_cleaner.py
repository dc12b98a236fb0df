"""The log cleaner on real files: what a pass keeps (Kafka's rules), and that a crash at any
point of its swap leaves a log that recovers to the same latest values."""
import os
import random

import pytest

from kraftd.protocol.records import Compression, build_batch, decode_records, iter_batch_headers
from kraftd.storage import FileLog
from kraftd.storage.background_writes import background_writes
from kraftd.storage.errors import NonContiguousAppendError

NOW = 1_700_000_000_000
DAY = 24 * 3600 * 1000


def keyed(pairs, *, ts=NOW - DAY, compression=Compression.NONE, **kw) -> bytearray:
    recs = [(k, v, None, ts + i) for i, (k, v) in enumerate(pairs)]
    return bytearray(build_batch(recs, compression=compression, **kw))


def open_log(path, **kw):
    kw.setdefault("segment_bytes", 2048)
    return FileLog(path, compacted=True, **kw)


def records(log, start=None):
    """(offset, key, value) of every record from `start` (the log start), read the way a
    consumer reads: batch by batch, following each read's next offset."""
    out, offset = [], log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        if not result.regions:
            break
        data = result.to_bytes()
        for pos, h in iter_batch_headers(data):
            out += [(r.offset, r.key, r.value) for r in decode_records(data[pos:pos + h.size], h)
                    if r.offset >= offset]
        offset = result.next_offset
    return out


def latest(recs):
    last = {}
    for offset, key, value in recs:
        last[key] = (offset, key, value)
    return sorted(last.values())


def clean(log, *, now=NOW, delete_retention_ms=DAY, min_lag_ms=0, max_keys=1_000_000, commit=True):
    range_ = log.cleanable(max_offset=log.log_end_offset, now_ms=now, min_lag_ms=min_lag_ms)
    if range_ is None:
        return None
    plan = log.plan_cleaning(range_, now_ms=now, delete_retention_ms=delete_retention_ms, max_keys=max_keys,
                             io_bytes_per_second=None)
    plan.run()
    if commit:
        assert log.commit_cleaning(plan)
    return plan


def fill(log, updates=400, keys=30, per_batch=5, seed=1, tombstone_every=0):
    rng = random.Random(seed)
    written = []
    for start in range(0, updates, per_batch):
        pairs = []
        for i in range(start, start + per_batch):
            key = b"key-%d" % rng.randrange(keys)
            value = None if tombstone_every and i % tombstone_every == 0 else b"value-%d" % i
            pairs.append((key, value))
        result = log.append_as_leader(keyed(pairs), 1, now_ms=NOW)
        written += [(result.first_offset + j, k, v) for j, (k, v) in enumerate(pairs)]
    log.flush()
    return written


def split(written, end):
    """The records a pass ending at `end` leaves: the latest per key below `end` (a later record
    of the key past `end` does not count: the pass never reads past its range), and
    everything past `end`."""
    return latest([r for r in written if r[0] < end]) + [r for r in written if r[0] >= end]


def test_a_pass_keeps_the_last_record_per_key_at_its_offset(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log)
    plan = clean(log)
    assert plan is not None and plan.stats.records_dropped > 0
    assert records(log) == split(written, plan.end_offset)
    assert log.log_start_offset == 0 and log.log_end_offset == len(written)
    log.close()
    again = open_log(tmp_path / "c-0")
    assert records(again) == split(written, plan.end_offset)
    again.close()


def test_a_second_pass_after_more_writes_keeps_only_the_latest(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log, seed=1)
    clean(log)
    written += fill(log, seed=2)
    log.roll()
    log.append_as_leader(keyed([(b"other", b"x")]), 1, now_ms=NOW)  # the active segment
    log.flush()
    written.append((800, b"other", b"x"))
    segments_before = len(log.segments)
    plan = clean(log)
    assert plan.end_offset == 800 and plan.spec.first_dirty > 0
    assert records(log) == latest(written)
    assert len(log.segments) < segments_before  # what the first pass shrank is grouped into fewer


def test_uncommitted_segments_and_the_active_one_are_never_cleaned(tmp_path):
    log = open_log(tmp_path / "c-0")
    fill(log, updates=100)
    bases = [s.base_offset for s in log.segments]
    assert log.cleanable(max_offset=bases[1], now_ms=NOW, min_lag_ms=0).end_offset == bases[1]
    assert log.cleanable(max_offset=bases[1] - 1, now_ms=NOW, min_lag_ms=0) is None  # below the HW only
    assert log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=0).end_offset == bases[-1]
    # min.compaction.lag.ms: records younger than it stay dirty
    assert log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=2 * DAY) is None
    log.append_as_leader(keyed([(b"a", b"b")]), 1, now_ms=NOW)
    log.roll()  # the active segment sealed: cleanable now
    assert log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=0).end_offset == \
        log.segments[-1].base_offset > bases[-1]


def test_tombstones_stay_until_delete_retention_after_the_pass_that_kept_them(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log, updates=200, keys=10, tombstone_every=7)
    log.roll()
    log.append_as_leader(keyed([(b"filler", b"x")]), 1, now_ms=NOW)
    log.flush()
    written.append((200, b"filler", b"x"))
    clean(log, now=NOW)
    expected = latest(written)
    assert any(v is None for _, _, v in expected)
    assert records(log) == expected  # tombstones kept: their horizon is set now
    clean_again = clean(log, now=NOW + DAY - 1)
    assert clean_again is None or records(log) == expected
    log.cleaner_checkpoint = 0  # make everything dirty again: the horizon decides, not the map
    plan = clean(log, now=NOW + DAY)
    assert plan.stats.tombstones_dropped > 0
    assert records(log) == [r for r in expected if r[2] is not None]


def test_the_delete_horizon_keeps_record_timestamps(tmp_path):
    log = open_log(tmp_path / "c-0")
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", None), (b"a", b"2")], ts=NOW - 5000), 1, now_ms=NOW)
    log.roll()
    log.append_as_leader(keyed([(b"z", b"1")]), 1, now_ms=NOW)
    log.flush()
    clean(log, now=NOW)
    data = log.read(0, 1 << 20).to_bytes()
    (pos, h), = [x for x in iter_batch_headers(data) if x[1].base_offset == 0]
    assert h.has_delete_horizon and h.base_timestamp == NOW + DAY
    assert [(r.offset, r.timestamp, r.key) for r in decode_records(data[pos:pos + h.size], h)] == \
        [(1, NOW - 5000 + 1, b"b"), (2, NOW - 5000 + 2, b"a")]
    assert h.last_offset_delta == 2 and h.records_count == 2


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD, Compression.LZ4, Compression.SNAPPY])
def test_a_rebuilt_batch_keeps_its_codec_and_epoch(tmp_path, codec):
    log = open_log(tmp_path / "c-0")
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], compression=codec), 3, now_ms=NOW)
    log.roll()
    log.append_as_leader(keyed([(b"b", b"2")]), 4, now_ms=NOW)
    log.roll()
    log.append_as_leader(keyed([(b"z", b"2")]), 4, now_ms=NOW)
    log.flush()
    clean(log)
    data = log.read(0, 1 << 20).to_bytes()
    headers = [h for _, h in iter_batch_headers(data)]
    assert [(h.base_offset, h.compression, h.partition_leader_epoch, h.records_count) for h in headers] == \
        [(0, codec, 3, 1), (3, Compression.NONE, 4, 1), (4, Compression.NONE, 4, 1)]
    assert records(log) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"z", b"2")]


def test_a_read_from_any_offset_starts_at_the_first_record_kept_at_or_after_it(tmp_path):
    log = open_log(tmp_path / "c-0", segment_bytes=300)
    written = []
    for i in range(40):  # batches of one overwritten key (dropped whole) between kept ones
        pairs = [(b"k", b"%d" % i)] if i % 3 else [(b"k", b"%d" % i), (b"u%d" % i, b"x")]
        first = log.append_as_leader(keyed(pairs), 1, now_ms=NOW).first_offset
        written += [(first + j, k, v) for j, (k, v) in enumerate(pairs)]
    log.flush()
    plan = clean(log)
    expected = split(written, plan.end_offset)
    assert plan.stats.batches_dropped > 0 and records(log) == expected
    for offset in range(log.log_end_offset):
        assert records(log, offset)[:1] == [r for r in expected if r[0] >= offset][:1], offset


def test_a_batch_with_nothing_left_leaves_a_gap_and_a_consumer_skips_it(tmp_path):
    log = open_log(tmp_path / "c-0", segment_bytes=1 << 20)
    log.append_as_leader(keyed([(b"a", b"1"), (b"b", b"1")]), 1, now_ms=NOW)
    log.append_as_leader(keyed([(b"a", b"2"), (b"b", b"2")]), 1, now_ms=NOW)
    log.roll()
    log.append_as_leader(keyed([(b"c", b"1")]), 1, now_ms=NOW)
    log.flush()
    plan = clean(log)
    assert plan.stats.batches_dropped == 1
    assert [h.base_offset for _, h in iter_batch_headers(log.read(0, 1 << 20).to_bytes())] == [2, 4]
    assert log.read(0, 1 << 20).first_offset == 2
    log.close()
    assert records(open_log(tmp_path / "c-0")) == [(2, b"a", b"2"), (3, b"b", b"2"), (4, b"c", b"1")]


def test_an_idempotent_producers_last_batches_stay_as_empty_headers_so_a_rebuild_still_deduplicates(tmp_path):
    log = open_log(tmp_path / "c-0", segment_bytes=1 << 20)
    for seq in range(0, 12, 2):
        log.append_as_leader(keyed([(b"a", b"p%d" % seq), (b"b", b"p%d" % seq)], producer_id=7, producer_epoch=0,
                                   base_sequence=seq), 1, now_ms=NOW)
    log.append_as_leader(keyed([(b"a", b"plain"), (b"b", b"plain")]), 1, now_ms=NOW)
    log.roll()
    log.append_as_leader(keyed([(b"z", b"1")]), 1, now_ms=NOW)
    log.flush()
    before = log.producer_state.get(7)
    clean(log)
    assert records(log) == [(12, b"a", b"plain"), (13, b"b", b"plain"), (14, b"z", b"1")]
    headers = [h for _, h in iter_batch_headers(log.read(0, 1 << 20).to_bytes())]
    empties = [h for h in headers if h.producer_id == 7]
    assert len(empties) == 5 and all(h.records_count == 0 and h.last_offset_delta == 1 for h in empties)
    log.abandon()  # a crash: the producer state is rebuilt from the cleaned log
    background_writes().barrier()  # (what was queued before the "crash" is written, not racing the reopen)
    again = open_log(tmp_path / "c-0", segment_bytes=1 << 20)
    after = again.producer_state.get(7)
    assert after.last_seq == before.last_seq == 11 and list(after.batches) == list(before.batches)[-5:]
    status, dup = again.producer_state.check(7, 0, 10, 11)
    assert dup is not None and dup.first_offset == 10  # the retried last batch is a duplicate


def test_a_follower_of_a_compacted_leader_copies_the_gaps(tmp_path):
    leader = open_log(tmp_path / "c-0")
    written = fill(leader)
    clean(leader)
    data = leader.read(0, 1 << 30).to_bytes()
    follower = open_log(tmp_path / "f-0")
    follower.append_as_follower(data)
    assert records(follower) == records(leader)
    follower.close()
    assert records(open_log(tmp_path / "f-0")) == records(leader)
    plain = FileLog(tmp_path / "p-0")
    with pytest.raises(NonContiguousAppendError):
        plain.append_as_follower(data)
    assert len(written) == leader.log_end_offset


def test_a_pass_is_not_committed_if_the_log_changed_meanwhile(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log)
    plan = clean(log, commit=False)
    log.advance_log_start(log.segments[1].base_offset)  # retention took the first segment
    assert not log.commit_cleaning(plan)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    assert records(log) == [r for r in written if r[0] >= log.log_start_offset]


@pytest.mark.parametrize("stop_after", ["cleaned", "renamed", "one_group_swapped", "old_removed"])
def test_a_crash_during_a_swap_recovers_to_the_same_latest_values(tmp_path, stop_after):
    log = open_log(tmp_path / "c-0")
    written = fill(log, updates=600)
    plan = clean(log, commit=False)
    assert len(plan.groups) >= 2
    expected_clean = split(written, plan.end_offset)
    d = log.dir
    if stop_after != "cleaned":
        from kraftd.storage.cleaner import swap_path
        from kraftd.storage.segment import segment_path
        for n, group in enumerate(plan.groups):
            swap = swap_path(d, group.sources[0].base_offset, group.end_offset)
            os.rename(group.segment.path, swap)
            if stop_after == "renamed" or (stop_after == "one_group_swapped" and n > 0):
                continue
            for old in group.sources[1:]:
                os.unlink(segment_path(d, old.base_offset))
            if stop_after == "one_group_swapped":
                os.replace(swap, segment_path(d, group.sources[0].base_offset))
    log.abandon()
    background_writes().barrier()
    again = open_log(tmp_path / "c-0")
    got = records(again)
    assert latest(got) == latest(written)  # the same latest value per key, whatever point it stopped at
    if stop_after == "cleaned":
        assert got == written  # nothing swapped: the .cleaned files were dropped
    else:
        assert got == expected_clean and again.recovery_report.swaps_finished
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    assert clean(again) is None or latest(records(again)) == latest(written)


def test_a_pass_in_a_worker_process_cleans_the_same_as_in_place(tmp_path):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    here, there = open_log(tmp_path / "a-0"), open_log(tmp_path / "b-0")
    written = fill(here)
    fill(there)
    clean(here)
    range_ = there.cleanable(max_offset=there.log_end_offset, now_ms=NOW, min_lag_ms=0)
    plan = there.plan_cleaning(range_, now_ms=NOW, delete_retention_ms=DAY, max_keys=10**6, io_bytes_per_second=None)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        plan.run(pool)
    assert there.commit_cleaning(plan)
    assert records(there) == records(here) == split(written, plan.end_offset)


def test_a_full_offset_map_ends_the_pass_at_a_segment_boundary_and_the_next_goes_on(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log, keys=200, updates=1000)
    first = clean(log, max_keys=50)
    assert first.end_offset < log.segments[-1].base_offset and first.stats.keys >= 50
    assert log.cleaner_checkpoint == first.end_offset
    assert records(log) == split(written, first.end_offset)
    while (plan := clean(log, max_keys=50)) is not None:
        pass
    assert records(log) == split(written, log.segments[-1].base_offset)


def test_a_segment_replaced_since_the_plan_fails_the_pass_and_nothing_changes(tmp_path):
    log = open_log(tmp_path / "c-0")
    written = fill(log)
    range_ = log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=0)
    plan = log.plan_cleaning(range_, now_ms=NOW, delete_retention_ms=DAY, max_keys=10**6, io_bytes_per_second=None)
    victim = plan.spec.segments[1].path
    os.rename(victim, victim + ".x")
    with open(victim, "wb") as f:
        f.write(open(victim + ".x", "rb").read())  # same bytes, another file
    with pytest.raises(FileNotFoundError):
        plan.run()
    plan.discard()
    assert not log.commit_cleaning(plan)
    assert records(log) == written and not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]


def test_a_log_never_flushed_is_cleaned_too(tmp_path):
    """(fsync_policy=never: nothing is flushed, the HW is the log end)"""
    log = open_log(tmp_path / "c-0")
    written = []
    for i in range(100):
        pairs = [(b"k%d" % (i % 5), b"v%d" % i)]
        written.append((log.append_as_leader(keyed(pairs), 1, now_ms=NOW).first_offset, *pairs[0]))
    assert log.flushed_offset == 0
    plan = clean(log)
    assert plan is not None and records(log) == split(written, plan.end_offset)
    assert all(seg in log.segments for seg in log._dirty.values())


def test_a_truncation_into_the_cleaned_range_lowers_the_cleaner_checkpoint(tmp_path):
    """As Kafka's maybeTruncateCheckpoint: what is appended after a truncation below the cleaned
    end is dirty, and the next pass maps it (a replica only truncates uncommitted records, which
    the cleaner never reaches; a forced recovery may cut committed ones)."""
    log = open_log(tmp_path / "p")
    fill(log)
    clean(log)
    data = log.read(records(log)[3][0], 1 << 20).to_bytes()
    cut = next(iter_batch_headers(data))[1].base_offset  # a kept batch's (below the first, nothing is kept)
    assert log.cleaner_checkpoint > cut
    log.truncate_to(cut)
    assert (log.log_end_offset, log.cleaner_checkpoint) == (cut, cut)
    background_writes().barrier()
    log.close()
    log = open_log(tmp_path / "p")
    assert log.cleaner_checkpoint == cut
    written = records(log) + fill(log, seed=2)
    log.roll()
    log.append_as_leader(keyed([(b"other", b"x")]), 1, now_ms=NOW)  # the active segment
    plan = clean(log)
    assert plan.spec.first_dirty == cut
    assert records(log)[:-1] == latest(written)  # every record of the second fill was mapped
    log.close()


def test_a_truncation_inside_a_batch_after_a_gap_ends_the_log_at_that_batch(tmp_path):
    """The batch holding the offset goes whole: the log ends at its base offset (a follower
    then fetches from there and takes the leader's batch whole), not at the end of the batch
    before the gap, nor at the offset inside it."""
    log = open_log(tmp_path / "p")
    fill(log)
    clean(log)
    before = records(log)
    batches, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        data = result.to_bytes()
        batches += [(h, bytes(data[pos:pos + h.size])) for pos, h in iter_batch_headers(data)]
        offset = result.next_offset
    i = next(i for i in range(1, len(batches)) if batches[i][0].base_offset > batches[i - 1][0].next_offset
             and batches[i][0].last_offset > batches[i][0].base_offset)
    after_gap = batches[i][0]
    log.truncate_to(after_gap.base_offset + 1)
    assert log.log_end_offset == after_gap.base_offset
    log.append_as_follower(bytearray(b"".join(b for _, b in batches[i:])))  # the leader's batches again
    assert records(log) == before
    log.close()
