"""The follower side: one Fetch stream per leader carrying every partition this node follows
there, inside one incremental KIP-227 session.

An incremental request names only partitions whose fetch position changed since the leader
last heard it (or that are new); partitions no longer followed there go in ForgottenTopics. A
stream sends its next request only once everything it appended is durable: the fetch offset is
what the leader counts toward the HW, so it must be flushed (KIP-595).
"""
from __future__ import annotations

import logging

from ...protocol.errors import ErrorCode
from ...protocol.messages import FetchRequest, FetchResponse
from ...protocol.records import iter_batch_headers
from ...storage.snapshots import SnapshotId

log = logging.getLogger(__name__)

FETCH_VERSION = 17
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class FetchStream:
    def __init__(self, leader_id: int) -> None:
        self.leader_id = leader_id
        self.groups: dict = {}            # key -> RaftGroup following this leader
        self.session_id = 0
        self.session_epoch = 0            # 0: the next request is a full fetch
        self.sent: dict = {}              # key -> the position the leader's session holds
        self.in_flight = False
        self.next_send_ms = 0
        self.last_success_ms = -1
        self.last_answer_ms = -1          # the last Fetch answer without an error
        self.unreachable_since_ms = -1    # the leader's node refused or reset us since then
        self.unflushed: set = set()       # keys appended to and not yet durable
        self.requests = 0
        self.named_none = False           # the last request named no partition (all paused)
        # Keys whose position may differ from what the leader's session holds: an incremental
        # request looks only at these, so building it costs O(changes), not O(partitions).
        self.changed: set = set()

    def add(self, group) -> None:
        self.groups[group.key] = group
        self.changed.add(group.key)

    def remove(self, group) -> None:
        self.groups.pop(group.key, None)
        self.unflushed.discard(group.key)
        self.changed.add(group.key)

    def answered_since(self, key, since_ms: int) -> bool:
        """Whether an answer at or after `since_ms` covered partition `key`: it was in the
        session (an incremental answer leaves out a partition with nothing new), so our log now
        holds at least what the leader held then."""
        return self.last_answer_ms >= since_ms and key in self.sent

    def reset_session(self) -> None:
        self.session_id = 0
        self.session_epoch = 0
        self.sent = {}

    def ready(self, now_ms: int) -> bool:
        return (not self.in_flight and not self.unflushed and now_ms >= self.next_send_ms
                and (bool(self.groups) or bool(self.sent)))

    # -- requests ----------------------------------------------------------------------------
    def build_request(self, node_id: int, config, topic_ids: dict, directory_id=None) -> FetchRequest:
        """The next Fetch: full (every partition) or incremental (only what changed)."""
        full = self.session_epoch == 0
        candidates, self.changed = self.changed, set()
        forgotten: list = []
        if full:
            # Paused partitions (fetching a snapshot, truncating) are left out.
            changed = {k: _position(g) for k, g in self.groups.items() if not g.fetch_paused}
            self.sent = dict(changed)
        else:
            changed = {}
            for key in candidates:
                group = self.groups.get(key)
                if group is None or group.fetch_paused:
                    if self.sent.pop(key, None) is not None:
                        forgotten.append(key)
                    continue
                position = _position(group)
                if self.sent.get(key) != position:
                    changed[key] = self.sent[key] = position
        by_topic: dict = {}
        for (topic, index), (offset, last_epoch, epoch, log_start) in sorted(changed.items()):
            by_topic.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=index, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=last_epoch,
                log_start_offset=log_start, partition_max_bytes=config.partition_max_bytes,
                replica_directory_id=directory_id))
        forgotten_by_topic: dict = {}
        for topic, index in sorted(forgotten):
            forgotten_by_topic.setdefault(topic, []).append(index)
        self.named_none = all(g.fetch_paused for g in self.groups.values())
        self.in_flight = True
        self.requests += 1
        return FetchRequest(
            replica_id=node_id, replica_state=FetchRequest.ReplicaState(replica_id=node_id, replica_epoch=-1),
            max_wait_ms=config.fetch_max_wait_ms, min_bytes=1, max_bytes=config.fetch_max_bytes,
            isolation_level=0, session_id=self.session_id, session_epoch=self.session_epoch,
            topics=[FetchRequest.FetchTopic(topic=t, topic_id=topic_ids[t], partitions=ps)
                    for t, ps in by_topic.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, topic_id=topic_ids[t], partitions=ps)
                                   for t, ps in forgotten_by_topic.items()],
            rack_id="")

    # -- responses ---------------------------------------------------------------------------
    def on_failure(self, now_ms: int, backoff_ms: int) -> None:
        """No answer (timeout, unreachable): start a new session on the next request."""
        self.in_flight = False
        self.reset_session()
        self.next_send_ms = now_ms + backoff_ms

    def on_response(self, response: FetchResponse, topic_names: dict, now_ms: int, backoff_ms: int,
                    env) -> None:
        self.in_flight = False
        if response.error_code != 0:
            log.debug("fetch from %d: error %d, new session", self.leader_id, response.error_code)
            self.reset_session()
            self.next_send_ms = now_ms + backoff_ms
            return
        self.last_success_ms = now_ms
        self.last_answer_ms = now_ms
        self.unreachable_since_ms = -1
        if self.session_epoch == 0:
            self.session_id = response.session_id
            self.session_epoch = 1 if response.session_id else 0
        else:
            self.session_epoch = self.session_epoch + 1 if self.session_epoch < 0x7FFFFFFF else 1
        # Every partition paused for a snapshot download: such fetches only keep us in touch
        # with the leader, so they go at the retry backoff, not as fast as they are answered.
        backoff = self.named_none
        for topic in response.responses:
            name = topic_names.get(topic.topic_id)
            for data in topic.partitions:
                group = self.groups.get((name, data.partition_index))
                if group is None:
                    continue
                self.changed.add(group.key)  # appended, truncated, paused, or its log start moved
                if not apply_partition(group, data, self, now_ms, env):
                    backoff = True
        if backoff:
            self.next_send_ms = now_ms + backoff_ms


def _position(group) -> tuple[int, int, int, int]:
    """(fetch offset, last fetched epoch, current leader epoch, log start) of a follower."""
    log_ = group.partition.log
    end = log_.log_end_offset
    last_epoch = log_.epoch_cache.latest_epoch
    if last_epoch is None or end == log_.log_start_offset:
        snapshots = group.partition.snapshots
        latest = snapshots.latest if snapshots is not None else None
        if latest is not None and latest.end_offset == end:
            last_epoch = latest.epoch
    return end, (-1 if last_epoch is None else last_epoch), group.epoch, log_.log_start_offset


def apply_partition(group, data, stream: FetchStream, now_ms: int, env) -> bool:
    """Apply one partition of a Fetch answer. False when the stream should back off."""
    error = data.error_code
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH):
        leader = data.current_leader
        if group.observe_leader(leader.leader_id, leader.leader_epoch, now_ms):
            return True
        if error == ErrorCode.NOT_LEADER_OR_FOLLOWER and leader.leader_epoch <= group.epoch:
            # The node we follow no longer leads this epoch (it resigned): the leader is gone.
            group.leader_gone(now_ms)
            return True
        return False
    if error == ErrorCode.UNKNOWN_LEADER_EPOCH:
        # The node we follow is behind our epoch (it restarted on an empty disk, say): it is
        # not our leader any more.
        group.leader_gone(now_ms)
        return True
    if error == ErrorCode.OFFSET_OUT_OF_RANGE and data.snapshot_id.end_offset < 0:
        # The leader's log starts past our end and it has no snapshot for us: start there.
        log_ = group.partition.log
        start = data.log_start_offset
        if start > log_.log_end_offset:
            group.check_truncation(log_.log_end_offset)
            log_.truncate_fully_and_start_at(start)
            env.log_start_moved(group)
        return True
    if error != 0:
        return False
    if getattr(group.role, "probing", False):
        group.role.confirm(group)  # (only the leader answers a follower's fetch)
    log_ = group.partition.log
    if data.diverging_epoch.end_offset >= 0 or data.diverging_epoch.epoch >= 0:
        # KIP-595 divergence: truncate to where our logs agree.
        theirs = data.diverging_epoch
        ours_epoch, ours_end = log_.epoch_cache.end_offset_for(theirs.epoch, log_.log_end_offset)
        # Kafka's truncateToEndOffset: where our entries of that epoch end, or of the one before.
        offset = min(theirs.end_offset, ours_end) if ours_epoch == theirs.epoch else ours_end
        offset = max(offset, log_.log_start_offset)
        group.check_truncation(offset)
        if not env.start_truncation(group, offset):  # a job off the loop (truncations.py), or now:
            log_.truncate_to(offset)
            env.truncated(group)
        return True
    if data.snapshot_id.end_offset >= 0:
        group.catch_up.caught_up_once(data.high_watermark, now_ms)  # notes the leader's HW (disk-loss rule)
        env.start_snapshot_download(group, SnapshotId(data.snapshot_id.end_offset, data.snapshot_id.epoch))
        return True
    records = data.records
    if records is not None and len(records) > 0:
        # A decoded answer holds a memoryview; the simulation hands over the leader's regions.
        view = records.view() if hasattr(records, "view") else memoryview(records)
        view = _from_log_end(view, log_.log_end_offset, log_.gaps_allowed)
        if len(view):
            log_.append_as_follower(view)
            if not env.fsync_never:  # (under fsync_policy=never nothing waits for a flush)
                stream.unflushed.add(group.key)
            env.appended(group)
    group.catch_up.follower_hw(data.high_watermark, now_ms)
    env.follower_log_start(group, data.log_start_offset)
    group.catch_up.caught_up_once(data.high_watermark, now_ms)
    return True


def _from_log_end(view: memoryview, log_end: int, gaps_allowed: bool = False) -> memoryview:
    """Whole batches at or after our log end (a resent answer may repeat what we have);
    a torn last batch (KIP-74 may cut one) is dropped. A compacted log (`gaps_allowed`) takes a
    first batch past its log end: the leader's cleaner removed the offsets between."""
    start, end = None, 0
    for pos, header in iter_batch_headers(view):
        if header.last_offset < log_end:
            continue
        if start is None:
            if header.base_offset < log_end or (header.base_offset > log_end and not gaps_allowed):
                return view[:0]
            start = pos
        end = pos + header.size
    return view[start:end] if start is not None else view[:0]
