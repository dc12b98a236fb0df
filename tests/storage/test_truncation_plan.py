"""A follower's truncation in two parts (storage/truncation.py): the copy, fsync and scans on a
worker thread, the commit on the loop. The result is the same log `truncate_to` makes."""
import os
import threading

from kraftd.protocol.records import iter_batch_headers
from kraftd.storage import FileLog
from storage_helpers import batch


def open_log(path):
    return FileLog(path, segment_bytes=4096, index_interval_bytes=256)


def fill(log):
    """Two producers, epochs 1 to 3, a few segments."""
    for i in range(120):
        epoch = 1 + i // 50
        log.append_as_leader(batch(1 + i % 3, ts=i, producer_id=7 + i % 2, producer_epoch=0,
                                   base_sequence=sum(1 + j % 3 for j in range(i % 2, i, 2))), epoch, now_ms=0)
    log.flush()


def state(log):
    data = log.read(log.log_start_offset, 1 << 30).to_bytes()
    return (log.log_end_offset, log.flushed_offset, data, list(log.epoch_cache.entries),
            log.producer_state.snapshot(), [s.base_offset for s in log.segments])


def test_plan_run_commit_makes_the_log_truncate_to_makes(tmp_path):
    a, b = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    fill(a)
    fill(b)
    cut = 150  # inside a segment, in epoch 3
    plan = b.plan_truncation(cut)
    assert plan is not None and plan.position > 0
    done = threading.Thread(target=plan.run)
    done.start()
    done.join()
    a.truncate_to(cut)
    assert b.commit_truncation(plan)
    assert state(a) == state(b)
    assert not [n for n in os.listdir(tmp_path / "b") if n.endswith(".trunc")]
    # Both go on alike, and reopen alike.
    for log in (a, b):
        log.append_as_leader(batch(2, producer_id=9, producer_epoch=0, base_sequence=0), 4, now_ms=0)
        log.flush()
        log.close()
    assert state(open_log(tmp_path / "a")) == state(open_log(tmp_path / "b"))


def test_a_plan_is_discarded_if_the_log_changed_meanwhile(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log)
    before = state(log)
    plan = log.plan_truncation(150)
    plan.run()
    log.append_as_leader(batch(1), 4, now_ms=0)  # say, the node was elected and appended
    assert not log.commit_truncation(plan)
    assert log.log_end_offset == before[0] + 1
    assert not [n for n in os.listdir(tmp_path / "p") if n.endswith(".trunc")]


def test_cheap_truncations_need_no_plan(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log)
    assert log.plan_truncation(log.log_end_offset) is None  # nothing to cut
    assert log.plan_truncation(0) is None                   # a whole-log reset


def test_a_copy_left_by_a_crash_before_the_commit_is_removed_at_open(tmp_path):
    log = open_log(tmp_path / "p")
    fill(log)
    end = log.log_end_offset
    plan = log.plan_truncation(150)
    plan.run()
    log.abandon()  # the process dies before the loop commits
    assert [n for n in os.listdir(tmp_path / "p") if n.endswith(".trunc")]
    again = open_log(tmp_path / "p")
    assert again.log_end_offset == end
    assert not [n for n in os.listdir(tmp_path / "p") if n.endswith(".trunc")]
    assert [h.last_offset for _, h in iter_batch_headers(again.read(0, 1 << 30).to_bytes())][-1] == end - 1
