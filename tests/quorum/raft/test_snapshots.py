"""KIP-630 in the Raft core: a follower catching up from the leader's snapshot, and the leader's
log start gated by its replicas' progress."""
from __future__ import annotations

import os

from kraftd.protocol import api
from kraftd.storage.snapshots import SnapshotStore

from .raft_context import KEY, RaftTestContext, SnapshotId, data_batch, snapshot_file_bytes

SID = SnapshotId(20, 3)
ITEMS = {b"key-%03d" % i: b"value-%03d" % i for i in range(60)}


def follower() -> RaftTestContext:
    return RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_elected_leader(4, 2).with_snapshot_policy().build()


def pointed_at_snapshot(ctx: RaftTestContext) -> None:
    """The leader answers the first Fetch with SnapshotId; the partition's fetching pauses."""
    fetch = ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1)
    ctx.respond(fetch, ctx.fetch_response(snapshot_id=tuple(SID), high_watermark=25, log_start_offset=20))
    ctx.poll()
    answer_paused_fetches(ctx)


def answer_paused_fetches(ctx: RaftTestContext) -> None:
    """While downloading, the stream to the leader must not name the partition; the leader
    answers such fetches (naming nothing) once their wait ends."""
    paused = ctx.sent(api.FETCH, destination=2)
    assert all(ctx.fetch_partitions(s) == [] for s in paused), "fetched the partition while downloading"
    for s in paused:
        ctx.respond(s, ctx.empty_fetch_response())


def serve(ctx: RaftTestContext, data: bytes, chunk: int) -> None:
    position = 0
    while position < len(data):
        send = ctx.assert_sent_fetch_snapshot(tuple(SID), position=position)
        ctx.respond(send, ctx.fetch_snapshot_response(tuple(SID), data[position:position + chunk], position,
                                                      len(data)))
        ctx.poll()
        position += chunk
        if position < len(data):
            answer_paused_fetches(ctx)
    ctx.advance(ctx.raft.retry_backoff_ms)  # the partition-less fetch's backoff ends: fetching resumes


def part_files(ctx) -> list[str]:
    return [n for n in os.listdir(os.path.join(ctx.data_dir, "t-0")) if n.endswith(".part")]


def test_a_snapshot_id_answer_pauses_the_partition_and_the_snapshot_is_fetched_in_chunks_and_installed():
    ctx = follower()
    data = snapshot_file_bytes(SID, ITEMS, max_batch_bytes=256)
    pointed_at_snapshot(ctx)
    chunk = len(data) // 3 + 1
    position = 0
    for _ in range(2):  # not installed while chunks are missing
        send = ctx.assert_sent_fetch_snapshot(tuple(SID), position=position)
        ctx.respond(send, ctx.fetch_snapshot_response(tuple(SID), data[position:position + chunk], position,
                                                      len(data)))
        ctx.poll()
        position += chunk
        assert ctx.log.log_start_offset == 0 and SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == []
        answer_paused_fetches(ctx)
    send = ctx.assert_sent_fetch_snapshot(tuple(SID), position=position)
    ctx.respond(send, ctx.fetch_snapshot_response(tuple(SID), data[position:], position, len(data)))
    ctx.poll()

    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == [SID]
    assert ctx.log.log_start_offset == ctx.log.log_end_offset == SID.end_offset
    assert ctx.partition.high_watermark >= SID.end_offset
    assert ctx.node.snapshots[KEY].machine.state == ITEMS
    assert part_files(ctx) == []
    ctx.advance(ctx.raft.retry_backoff_ms)  # the partition-less fetch's backoff ends: fetching resumes
    ctx.assert_sent_fetch(offset=SID.end_offset, last_fetched_epoch=SID.epoch)
    assert ctx.group.last_log_id() == (SID.epoch, SID.end_offset)


def test_fetching_resumes_after_the_snapshot_and_appends_the_tail():
    ctx = follower()
    pointed_at_snapshot(ctx)
    serve(ctx, snapshot_file_bytes(SID, ITEMS), chunk=1 << 20)
    fetch = ctx.assert_sent_fetch(offset=20, last_fetched_epoch=3)
    ctx.respond(fetch, ctx.fetch_response(records=data_batch(4, ["x", "y"], base_offset=20), high_watermark=22,
                                          log_start_offset=20))
    ctx.poll()
    assert (ctx.log.log_start_offset, ctx.log.log_end_offset, ctx.partition.high_watermark) == (20, 22, 22)
    ctx.assert_sent_fetch(offset=22, last_fetched_epoch=4)


def test_a_corrupt_snapshot_is_rejected_and_fetched_again():
    ctx = follower()
    good = snapshot_file_bytes(SID, ITEMS, max_batch_bytes=256)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x5A  # a flipped byte: that batch's CRC fails
    pointed_at_snapshot(ctx)
    serve(ctx, bytes(bad), chunk=1 << 20)

    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == []
    assert (ctx.log.log_start_offset, ctx.log.log_end_offset) == (0, 0)
    assert ctx.node.snapshots[KEY].machine.state == {}
    assert part_files(ctx) == []
    # Fetching resumes from where the follower was; the leader points it at the snapshot again.
    pointed_at_snapshot(ctx)
    serve(ctx, good, chunk=1 << 20)
    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == [SID]
    assert ctx.log.log_start_offset == SID.end_offset
    assert ctx.node.snapshots[KEY].machine.state == ITEMS


def test_nothing_is_installed_before_the_announced_size_has_arrived():
    ctx = follower()
    good = snapshot_file_bytes(SID, ITEMS)
    pointed_at_snapshot(ctx)
    send = ctx.assert_sent_fetch_snapshot(tuple(SID), position=0)
    # The leader announces one byte more than it serves: the follower asks for the rest.
    ctx.respond(send, ctx.fetch_snapshot_response(tuple(SID), good, 0, len(good) + 1))
    ctx.poll()
    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == []
    assert ctx.log.log_start_offset == 0
    ctx.assert_sent_fetch_snapshot(tuple(SID), position=len(good))


# -- the leader: log start gated by replica progress (KIP-630) --------------------------------

def snapshotting_leader():
    ctx = (RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(1).with_snapshot_policy()
           .append_to_log(1, 10).with_node_config(retention_check_interval_ms=50).build())
    epoch = ctx.win_election()
    end = ctx.log.log_end_offset  # past this epoch's LeaderChange batch
    ctx.deliver_fetch(2, end, epoch)  # 2 is caught up: the HW moves to the log end
    ctx.deliver_fetch(3, 4, 1)  # 3 is alive but behind
    ctx.poll()
    assert ctx.partition.high_watermark == end
    sid = ctx.take_snapshot()
    assert sid == SnapshotId(end, epoch)
    return ctx, epoch, sid


def test_the_log_start_does_not_pass_a_live_follower_that_has_not_fetched_past_the_snapshot():
    ctx, epoch, sid = snapshotting_leader()
    assert ctx.log.log_start_offset == 0
    for offset in (6, 8, 10):  # 3 keeps fetching, still short of the snapshot's end
        ctx.advance(100)
        ctx.deliver_fetch(2, sid.end_offset, epoch)
        ctx.deliver_fetch(3, offset, 1)
        ctx.advance(100)
        assert ctx.log.log_start_offset == 0


def test_the_log_start_moves_to_the_snapshot_once_every_live_follower_fetched_past_it():
    ctx, epoch, sid = snapshotting_leader()
    ctx.advance(100)
    ctx.deliver_fetch(3, sid.end_offset, epoch)
    ctx.advance(100)
    assert ctx.log.log_start_offset == sid.end_offset
    answer = ctx.deliver_fetch(2, 0, -1)  # a replica below the log start is sent to the snapshot
    assert (answer.snapshot_id.end_offset, answer.snapshot_id.epoch) == tuple(sid)


def test_a_follower_that_stopped_fetching_no_longer_holds_the_log_start_back():
    ctx, epoch, sid = snapshotting_leader()
    for _ in range(8):  # 2 keeps the leader alive; 3 has gone quiet for over 1.5 fetch timeouts
        ctx.advance(ctx.fetch_timeout_ms // 4)
        ctx.deliver_fetch(2, sid.end_offset, epoch)
    ctx.advance(100)
    ctx.assert_elected_leader(epoch, 1)
    assert ctx.log.log_start_offset == sid.end_offset


def answer_fetches_at_once(ctx: RaftTestContext, rounds: int = 50) -> int:
    """The leader answers partition-less fetches the moment they arrive (it has nothing to wait
    for); returns how many the follower sent at this instant."""
    count = 0
    for _ in range(rounds):
        paused = ctx.sent(api.FETCH, destination=2)
        if not paused:
            break
        assert all(ctx.fetch_partitions(s) == [] for s in paused), "fetched the partition while downloading"
        count += len(paused)
        for s in paused:
            ctx.respond(s, ctx.empty_fetch_response())
        ctx.poll()
    return count


def test_a_long_download_keeps_the_follower_following_without_spinning_on_empty_fetches():
    ctx = follower()
    data = snapshot_file_bytes(SID, ITEMS, max_batch_bytes=256)
    pointed_at_snapshot(ctx)
    chunk = len(data) // 6 + 1
    position, empty_fetches, elapsed = 0, 0, 0
    while position < len(data):  # one chunk every 200 ms: the download outlasts the fetch timeout
        send = ctx.assert_sent_fetch_snapshot(tuple(SID), position=position)
        for _ in range(20):
            ctx.advance(10)
            elapsed += 10
            empty_fetches += answer_fetches_at_once(ctx)
        ctx.respond(send, ctx.fetch_snapshot_response(tuple(SID), data[position:position + chunk], position,
                                                      len(data)))
        ctx.poll()
        position += chunk
    assert elapsed > ctx.fetch_timeout_ms
    assert ctx.sent(api.VOTE) == [], "stood for election while its leader was answering"
    ctx.assert_elected_leader(4, 2)
    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == [SID]
    # Fetches naming nothing keep the leader in touch at the retry backoff, not as fast as
    # they are answered.
    assert empty_fetches <= elapsed // ctx.raft.retry_backoff_ms + 2, empty_fetches


def test_a_replica_whose_log_starts_at_a_snapshot_claims_the_snapshot_in_elections():
    ctx = RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(5).with_snapshot(20, 3).build()
    assert (ctx.log.log_start_offset, ctx.log.log_end_offset) == (20, 20)
    assert not ctx.deliver_vote_request(6, 2, last_epoch=2, last_offset=30, pre_vote=True).vote_granted
    assert ctx.deliver_vote_request(6, 2, last_epoch=3, last_offset=20, pre_vote=True).vote_granted
    ctx.advance(2 * ctx.election_timeout_ms)
    ctx.assert_sent_vote_request(epoch=6, last_epoch=3, last_offset=20, pre_vote=True)


def test_a_leader_elected_on_a_snapshot_sends_fetchers_below_its_log_start_to_the_snapshot():
    ctx = (RaftTestContext.builder(local_id=1, voters=(1, 2, 3)).with_unknown_leader(5).with_snapshot(20, 3)
           .append_to_log(4, 5).build())
    assert ctx.last_log_id() == (4, 25)
    epoch = ctx.win_election()
    answer = ctx.deliver_fetch(2, 10, 2, epoch)
    assert (answer.snapshot_id.end_offset, answer.snapshot_id.epoch) == (20, 3)
    answer = ctx.deliver_fetch(2, 25, 4, epoch)  # at the log: served from the log
    assert answer.error_code == 0 and answer.snapshot_id.end_offset == -1


def test_a_downloaded_snapshot_is_installed_by_a_job_while_the_partition_stays_paused():
    """Validation and decoding run off the loop (snapshot_installs.py): until the job is done
    the partition fetches nothing and the log is as it was."""
    ctx = follower()
    ctx.hold_follower_jobs = True
    pointed_at_snapshot(ctx)
    serve(ctx, snapshot_file_bytes(SID, ITEMS), chunk=1 << 20)
    assert ctx.group.fetch_paused and ctx.group.installing is not None
    answer_paused_fetches(ctx)
    assert ctx.log.log_end_offset == 0 and ctx.node.snapshots[KEY].machine.state == {}
    assert ctx.run_follower_jobs() == 1
    assert ctx.node.snapshots[KEY].machine.state == ITEMS
    assert ctx.log.log_start_offset == ctx.log.log_end_offset == SID.end_offset and part_files(ctx) == []
    ctx.advance(ctx.raft.retry_backoff_ms)
    ctx.assert_sent_fetch(offset=SID.end_offset, last_fetched_epoch=SID.epoch)


def test_an_install_is_dropped_if_the_follower_moved_on_before_it_ran():
    """A new leader in a new epoch while the job was pending: the file is dropped, the log is
    untouched, and the partition fetches from the new leader."""
    ctx = follower()
    ctx.hold_follower_jobs = True
    pointed_at_snapshot(ctx)
    serve(ctx, snapshot_file_bytes(SID, ITEMS), chunk=1 << 20)
    assert ctx.group.installing is not None
    (job,) = ctx.node.replication.follower_jobs()  # handed to the shell's worker thread
    ctx.deliver_begin_quorum_epoch(5, 3)
    ctx.poll()
    assert ctx.group.installing is None and not ctx.group.fetch_paused
    job.run()  # the thread finishes; the loop hears of it and drops it
    ctx.node.on_job_done(job, ctx.now_ms)
    assert ctx.log.log_end_offset == 0 and ctx.node.snapshots[KEY].machine.state == {}
    assert part_files(ctx) == [] and SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == []


def test_no_new_download_while_a_cancelled_install_is_still_running():
    """Seed 5355's bug: the new leader names the same snapshot while the old install job (now
    cancelled) is still on its worker thread. A second download would re-open the `.part` file
    the job is reading ("wb" truncates it) and the job's late abort would remove the new file:
    the group waits for the job to come back, then downloads and installs the snapshot whole."""
    ctx = follower()
    ctx.hold_follower_jobs = True
    data = snapshot_file_bytes(SID, ITEMS)
    pointed_at_snapshot(ctx)
    serve(ctx, data, chunk=1 << 20)
    (job,) = ctx.node.replication.follower_jobs()  # handed to the shell's worker thread
    (part,) = part_files(ctx)
    ctx.deliver_begin_quorum_epoch(5, 3)
    ctx.poll()
    fetch = ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1)
    ctx.respond(fetch, ctx.fetch_response(snapshot_id=tuple(SID), high_watermark=25, log_start_offset=20))
    ctx.poll()
    assert ctx.group.downloading is None and ctx.sent(api.FETCH_SNAPSHOT) == []
    assert part_files(ctx) == [part]  # the job's file alone
    job.run()  # (a truncated file would fail its validation here)
    ctx.node.on_job_done(job, ctx.now_ms)  # cancelled: dropped
    assert part_files(ctx) == []
    ctx.advance(ctx.raft.retry_backoff_ms)
    fetch = ctx.assert_sent_fetch(offset=0, last_fetched_epoch=-1)
    ctx.respond(fetch, ctx.fetch_response(snapshot_id=tuple(SID), high_watermark=25, log_start_offset=20))
    ctx.poll()
    assert ctx.group.downloading is not None
    answer_paused_fetches(ctx)
    serve(ctx, data, chunk=1 << 20)
    assert ctx.run_follower_jobs() == 1
    assert ctx.node.snapshots[KEY].machine.state == ITEMS
    assert SnapshotStore(os.path.join(ctx.data_dir, "t-0")).ids() == [SID]
