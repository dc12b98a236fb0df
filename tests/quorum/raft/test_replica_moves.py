"""A partition leader moving its group's voters to a reassignment's target (issue 25 item 3,
quorum/metadata/replica_moves.py): add first, each new replica once caught up from fetches made
after the move was seen, then remove the replicas leaving, itself last; a replaced disk re-keyed."""
from __future__ import annotations

import uuid

from kraftd.quorum.metadata.image import PartitionInfo
from kraftd.quorum.metadata.replica_moves import move_voters

from .raft_context import RaftTestContext

D4 = uuid.UUID(int=404)
D2 = uuid.UUID(int=202)
TOPIC = uuid.UUID(int=77)


def _leader() -> RaftTestContext:
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(4).append_to_log(3, 3).build()
    ctx.win_election()
    ctx.other_nodes.add(4)
    end = ctx.log.log_end_offset
    ctx.log.flush()
    ctx.deliver_fetch(2, end, ctx.epoch)
    ctx.poll()
    assert ctx.partition.high_watermark == end
    return ctx


def _moving(replicas, adding=(), removing=()) -> PartitionInfo:
    return PartitionInfo(TOPIC, 0, list(replicas), list(replicas), adding=list(adding), removing=list(removing))


def _commit_all(ctx, *followers) -> None:
    end = ctx.log.log_end_offset
    ctx.log.flush()
    for f in followers:
        ctx.deliver_fetch(f, end, ctx.epoch, directory=D4 if f == 4 else None)
    ctx.poll()


def test_a_move_adds_the_new_replica_once_caught_up_then_removes_the_old_one():
    ctx = _leader()
    group, since = ctx.group, {}
    info = _moving([4, 2, 3, 1], adding=[4], removing=[1])
    assert not move_voters(group, info, ctx.now_ms, since)  # node 4 never fetched
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    assert not move_voters(group, info, ctx.now_ms, since)  # one fetch since: it may be a deleted copy's
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    assert move_voters(group, info, ctx.now_ms, since)
    assert group.voters == (1, 2, 3, 4) and group.voter_set.get(4).directory_id == D4
    assert not move_voters(group, info, ctx.now_ms, since)  # one change at a time: not committed yet
    _commit_all(ctx, 2, 4)
    assert move_voters(group, info, ctx.now_ms, since)  # then the leader removes itself, last
    assert group.voters == (2, 3, 4)


def test_progress_from_before_the_move_does_not_count():
    """A node that held a copy, moved away (its progress forgotten) and deleted it, then is moved
    back: only fetches after the leader saw the move count (sim seeds 59 and 189)."""
    ctx = _leader()
    group, since = ctx.group, {}
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)  # an old copy's last fetch
    assert 4 in group.role.progress.observers
    move_voters(group, _moving([1, 2, 3]), ctx.now_ms, since)
    assert 4 not in group.role.progress.observers  # holds no replica: forgotten
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)  # in flight before it deleted it
    ctx.advance(100)
    info = _moving([1, 2, 3, 4], adding=[4])
    assert not move_voters(group, info, ctx.now_ms, since)  # fetched before the move was seen
    ctx.advance(100)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    assert move_voters(group, info, ctx.now_ms, since) and 4 in group.voters


def test_the_first_fetch_after_the_move_back_does_not_count_alone():
    """Sim seed 5815: node 4 deleted its copy and the move back was seen while the copy's last
    fetch was in flight. That fetch, at the HW, came after the move was seen; the new copy's
    first fetch was refused (an old epoch) and the leader added node 4 with an empty log.
    A node's fetches come one at a time: the second since the move is its new copy's."""
    ctx = _leader()
    group, since = ctx.group, {}
    move_voters(group, _moving([1, 2, 3]), ctx.now_ms, since)  # moved away
    ctx.advance(100)
    info = _moving([1, 2, 3, 4], adding=[4])
    assert not move_voters(group, info, ctx.now_ms, since)  # the move back seen
    ctx.advance(10)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)  # the deleted copy's, late
    assert not move_voters(group, info, ctx.now_ms, since)
    ctx.advance(10)
    refused = ctx.deliver_fetch(4, 0, -1, epoch=0, directory=D4)  # the new copy's: its epoch is old
    assert refused.error_code == 74
    # (not a fetch that left the partition where it was: its position was never recorded)
    assert not move_voters(group, info, ctx.now_ms, since)
    ctx.advance(10)
    ctx.deliver_fetch(4, 0, -1, directory=D4)
    assert not move_voters(group, info, ctx.now_ms, since)  # recorded: not caught up
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    assert move_voters(group, info, ctx.now_ms, since) and 4 in group.voters


def test_a_voter_on_a_replaced_disk_is_removed_and_added_again_with_its_new_directory():
    ctx = _leader()
    group, since = ctx.group, {}
    info = _moving([1, 2, 3, 4], adding=[4])
    assert not move_voters(group, info, ctx.now_ms, since)  # the move seen
    ctx.advance(1)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=D4)
    assert move_voters(group, info, ctx.now_ms, since)
    _commit_all(ctx, 2, 4)
    done = _moving([1, 2, 3, 4])
    assert not move_voters(group, done, ctx.now_ms, since)  # nothing to do
    new = uuid.UUID(int=405)
    ctx.deliver_fetch(4, 0, 0, directory=new)  # node 4 came back on an empty disk
    assert move_voters(group, done, ctx.now_ms, since) and group.voters == (1, 2, 3)
    _commit_all(ctx, 2)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=new)
    ctx.deliver_fetch(4, ctx.log.log_end_offset, ctx.epoch, directory=new)
    assert move_voters(group, _moving([1, 2, 3, 4], adding=[4]), ctx.now_ms, since)
    assert group.voter_set.get(4).directory_id == new
