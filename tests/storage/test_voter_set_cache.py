"""A log knows the VotersRecords it holds (issue 25, KIP-853): found in the control batches it
appends as leader or follower, dropped by a truncation past them, kept in force across a moved
log start, and checkpointed before the data so that a restart, clean or not, agrees with the
log."""
from __future__ import annotations

import os
import uuid

import pytest

from kraftd.protocol.records import build_batch, patch_base_offset
from kraftd.protocol.control_records import control_value
from kraftd.quorum.raft.voter_set import Voter, VoterSet, voters_batch
from kraftd.storage import FileLog, MemoryLog
from kraftd.storage.voter_set_cache import VOTER_SET_CHECKPOINT_FILE, VoterSetCache

from kraftd.protocol import messages

A = VoterSet((Voter(1, uuid.UUID(int=101)), Voter(2, uuid.UUID(int=102)), Voter(3, uuid.UUID(int=103))))
B = A.with_voter(Voter(4, uuid.UUID(int=104)))


def _data(n: int = 1) -> bytearray:
    return bytearray(build_batch([(b"k", b"v" * 10, None, 0)] * n))


def _sets(log) -> list[tuple[int, VoterSet]]:
    out = []
    for offset, value in log.voter_sets.entries():
        record, _ = messages.VotersRecord.decode(memoryview(value), 0, 0)
        out.append((offset, VoterSet.from_record(record)))
    return out


@pytest.fixture(params=["file", "memory"])
def make_log(request, tmp_path):
    def make():
        if request.param == "file":
            return FileLog(tmp_path / "t-0", segment_bytes=4096)
        return MemoryLog()
    return make


def test_a_leader_append_records_the_voter_set_at_its_offset(make_log):
    log = make_log()
    log.append_as_leader(_data(3), leader_epoch=1, now_ms=0)
    log.append_as_leader(voters_batch(A, 1, 0), leader_epoch=1, now_ms=0)  # offsets 3 (version), 4 (voters)
    log.append_as_leader(_data(2), leader_epoch=1, now_ms=0)
    log.append_as_leader(voters_batch(B, 1, 0, with_version=False), leader_epoch=1, now_ms=0)  # offset 7
    assert _sets(log) == [(4, A), (7, B)]
    log.truncate_to(7)  # B's record is gone: A is in force again
    assert _sets(log) == [(4, A)]
    log.truncate_to(4)
    assert _sets(log) == []


def test_a_follower_append_finds_them_too(make_log):
    follower = make_log()
    data = bytearray(build_batch([(b"k", b"v", None, 0)] * 2, base_offset=0, partition_leader_epoch=1))
    voters = voters_batch(A, 1, 0)
    patch_base_offset(voters, 0, 2)  # version at 2, voters at 3
    follower.append_as_follower(data + voters)
    assert _sets(follower) == [(3, A)]


def test_a_moved_log_start_keeps_the_set_in_force_there(make_log):
    log = make_log()
    log.append_as_leader(voters_batch(A, 1, 0), leader_epoch=1, now_ms=0)  # A at 1
    log.append_as_leader(_data(5), leader_epoch=1, now_ms=0)
    log.append_as_leader(voters_batch(B, 1, 0, with_version=False), leader_epoch=1, now_ms=0)  # B at 7
    log.append_as_leader(_data(5), leader_epoch=1, now_ms=0)
    log.advance_log_start(5)
    assert _sets(log) == [(1, A), (7, B)]
    log.advance_log_start(9)
    assert _sets(log) == [(7, B)]
    log.truncate_fully_and_start_at(20)
    assert _sets(log) == []


def test_the_checkpoint_survives_a_restart(tmp_path):
    log = FileLog(tmp_path / "t-0", segment_bytes=4096)
    log.append_as_leader(_data(2), leader_epoch=1, now_ms=0)
    log.append_as_leader(voters_batch(A, 1, 0), leader_epoch=1, now_ms=0)
    log.flush()
    log.close()
    again = FileLog(tmp_path / "t-0", segment_bytes=4096)
    assert _sets(again) == [(3, A)]


def test_a_checkpoint_ahead_of_the_data_is_trimmed_by_recovery(tmp_path):
    """The checkpoint is written before the batch: a crash before the batch reached the disk
    leaves an entry past the recovered log end, which recovery drops."""
    log = FileLog(tmp_path / "t-0", segment_bytes=4096)
    log.append_as_leader(_data(2), leader_epoch=1, now_ms=0)
    log.flush()
    size = os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log")
    log.append_as_leader(voters_batch(A, 1, 0), leader_epoch=1, now_ms=0)
    assert (tmp_path / "t-0" / VOTER_SET_CHECKPOINT_FILE).exists()
    # The crash: the batch never reached the segment (the checkpoint did).
    os.truncate(tmp_path / "t-0" / "00000000000000000000.log", size)
    again = FileLog(tmp_path / "t-0", segment_bytes=4096)
    assert again.log_end_offset == 2
    assert _sets(again) == []


def test_the_cache_alone():
    cache = VoterSetCache(None)
    cache.assign(5, b"a")
    cache.assign(9, b"b")
    cache.assign(7, b"c")  # supersedes what is at or past 7
    assert cache.entries() == [(5, b"a"), (7, b"c")]
    cache.truncate_from_start(6)
    assert cache.entries() == [(5, b"a"), (7, b"c")]
    cache.truncate_from_start(8)
    assert cache.entries() == [(7, b"c")]
    assert cache.latest() == (7, b"c")


def test_a_voters_value_is_what_the_batch_holds():
    value = control_value(A.to_record())
    record, end = messages.VotersRecord.decode(memoryview(value), 0, 0)
    assert end == len(value) and VoterSet.from_record(record) == A


def test_a_snapshot_carries_the_voter_set_in_force_at_its_end(tmp_path):
    from kraftd.quorum.snapshots.partition_snapshots import PartitionSnapshots
    from kraftd.storage.snapshots import SnapshotId, SnapshotStore

    log = FileLog(tmp_path / "t-0", segment_bytes=4096)
    log.append_as_leader(voters_batch(A, 1, 0), leader_epoch=1, now_ms=0)  # A at 1
    log.append_as_leader(_data(5), leader_epoch=1, now_ms=0)              # 2..6
    log.append_as_leader(voters_batch(B, 1, 0, with_version=False), leader_epoch=1, now_ms=0)  # B at 7
    store = SnapshotStore(tmp_path / "t-0")
    value = log.voter_sets.value_at(7 - 1)  # a snapshot ending at 7 holds A, not B
    writer = store.writer(SnapshotId(7, 1), last_contained_log_timestamp=0, voters=value)
    writer.append_many([(b"k", b"v")])
    writer.freeze()
    with store.reader(SnapshotId(7, 1)) as reader:
        assert list(reader.items()) == [(b"k", b"v")]  # the control batch is not data
        assert reader.voters_value() == value
    assert store.voters_value(SnapshotId(7, 1)) == value

    class _Partition:
        topic, index, key = "t", 0, ("t", 0)

    # A log behind the snapshot restarts at its end, with the snapshot's voter set in force.
    behind = FileLog(tmp_path / "u-0", segment_bytes=4096)
    partition = _Partition()
    partition.log = behind
    snapshots = PartitionSnapshots(partition, SnapshotStore(tmp_path / "t-0"))
    snapshots.recover()
    assert behind.log_start_offset == 7 and _sets(behind) == [(6, A)]
    plain = SnapshotStore(tmp_path / "p-0")
    w = plain.writer(SnapshotId(3, 1), last_contained_log_timestamp=0)
    w.freeze()
    assert plain.voters_value(SnapshotId(3, 1)) is None
