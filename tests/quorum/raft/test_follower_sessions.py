"""The leader's view of each follower's fetch session (quorum/raft/follower_sessions.py): a
session fetch that leaves a group out counts as a fetch at its last recorded position, so a
group named in a fetch that was not read (refused, or answered with an error) no longer counts
until a fetch names it again (sim seed 5815)."""
from __future__ import annotations

import uuid

from kraftd.protocol import messages as m
from kraftd.quorum.raft.follower_sessions import FollowerSessions

T = uuid.UUID(int=7)
NAMES = {T: "t"}


def _fetch(session_epoch: int, partitions, forgotten=()) -> m.FetchRequest:
    R = m.FetchRequest
    topics = [R.FetchTopic(topic="", topic_id=T, partitions=[
        R.FetchPartition(partition=p, current_leader_epoch=1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                         partition_max_bytes=1 << 20) for p in partitions])] if partitions else []
    gone = [R.ForgottenTopic(topic="", topic_id=T, partitions=list(forgotten))] if forgotten else []
    return R(replica_id=4, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=9,
             session_epoch=session_epoch, topics=topics, forgotten_topics_data=gone, rack_id="")


def test_a_group_left_out_of_a_session_fetch_counts_as_fetched():
    s = FollowerSessions()
    s.on_fetch(4, _fetch(0, [0, 1]), 17, 100, NAMES)
    s.on_fetch(4, _fetch(1, []), 17, 200, NAMES)
    assert s.fetch_ms(4, ("t", 0)) == s.fetch_ms(4, ("t", 1)) == 200
    s.on_fetch(4, _fetch(2, [], forgotten=[1]), 17, 300, NAMES)
    assert (s.fetch_ms(4, ("t", 0)), s.fetch_ms(4, ("t", 1))) == (300, -1)


def test_a_group_whose_fetch_was_not_read_counts_no_more_until_named_again():
    s = FollowerSessions()
    s.on_fetch(4, _fetch(0, [0, 1]), 17, 100, NAMES)
    s.on_fetch(4, _fetch(1, [1]), 17, 200, NAMES)
    s.not_read(4, [("t", 1)])  # e.g. FENCED_LEADER_EPOCH: its position was not recorded
    s.on_fetch(4, _fetch(2, []), 17, 300, NAMES)
    assert (s.fetch_ms(4, ("t", 0)), s.fetch_ms(4, ("t", 1))) == (300, -1)
    s.on_fetch(4, _fetch(3, [1]), 17, 400, NAMES)
    assert s.fetch_ms(4, ("t", 1)) == 400


def test_a_refused_fetch_reads_none_of_the_groups_it_named():
    s = FollowerSessions()
    s.on_fetch(4, _fetch(0, [0]), 17, 100, NAMES)
    request = _fetch(5, [1])  # an incremental fetch of a session out of step
    s.on_fetch(4, request, 17, 200, NAMES)
    s.refused(4, request, 17, NAMES)
    assert (s.fetch_ms(4, ("t", 0)), s.fetch_ms(4, ("t", 1))) == (200, -1)
