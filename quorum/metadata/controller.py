"""The controller: the metadata leader's writer. Each request becomes records appended to
`__cluster_metadata`; the answer waits until they are committed (the partition's HW passes them).

The controller validates against its own image, which includes what it appended but is not yet
committed (two CreateTopics for one name in flight: the second fails). It exists only while this
node leads the metadata partition and has applied everything committed before its epoch.
"""
from __future__ import annotations

import copy
import uuid

from ...protocol.errors import ErrorCode
from ...protocol.metadata_records import encode_metadata_record
from ...protocol.records import build_batch

from ..outcomes import Park, Respond
from ...protocol.messages import PartitionChangeRecord

from ..wall_clock import WallClock
from .image import LEADER_UNCHANGED, NO_LEADER, MetadataImage, register_broker_record

PRODUCER_ID_BLOCK = 1000


class Controller:
    def __init__(self, partition, committed: MetadataImage, *, purgatory, now_ms: int,
                 broker_session_timeout_ms: int, on_append, wall: WallClock | None = None) -> None:
        self._wall = wall or WallClock()
        self.partition = partition
        self.epoch = partition.leader_epoch
        self.image = copy.deepcopy(committed)
        self._purgatory = purgatory
        self._on_append = on_append          # (partition) -> None: flush, wake fetchers
        self._session_timeout_ms = broker_session_timeout_ms
        self._active_since_ms = now_ms
        self._placement_start = 0

    @property
    def active(self) -> bool:
        return self.partition.is_leader and self.partition.leader_epoch == self.epoch

    # -- writing ----------------------------------------------------------------------------------
    def append(self, records: list, now_ms: int) -> int:
        """Append `records` (applied to the working image first); returns the offset to wait for."""
        for record in records:
            self.image.replay(record)
        stamp = self._wall.at(now_ms)
        batch = build_batch([(None, encode_metadata_record(r), None, stamp) for r in records])
        self.partition.log.append_as_leader(bytearray(batch), self.epoch, now_ms=now_ms)
        self._on_append(self.partition)
        return self.partition.log.log_end_offset

    def commit_results(self, records: list, response, results: list, timeout_ms: int, now_ms: int):
        """Append `records` and answer `response` once they commit (CreateTopics, DeleteTopics).

        The results were read from the working image, which holds this controller's appends
        that have not committed yet: a TOPIC_ALREADY_EXISTS or UNKNOWN_TOPIC_OR_PARTITION may
        rest on a creation or deletion (a retried or duplicated request's first copy) that a
        leader change will still truncate. So even a request that writes nothing is answered
        only once everything appended before it has committed (Kafka's controller waits for
        its highest pending offset the same way), and on failure every result gets the error,
        not only those that had succeeded."""
        def fail(error):
            for result in results:
                result.error_code = error
                result.error_message = None

        return self.answer_once_committed(records, response, fail, timeout_ms, now_ms)

    def answer_once_committed(self, records: list, response, fail, timeout_ms: int, now_ms: int):
        """Append `records` (maybe none) and answer once everything appended so far commits:
        an answer read from the working image may rest on an append a leader change still
        truncates. `fail(error)` marks the response if they do not commit."""
        end = self.append(records, now_ms) if records else self.partition.log.log_end_offset
        if end <= self.partition.high_watermark:
            return Respond(response)  # it read only committed state
        return self.park(response, end, fail, timeout_ms, now_ms)

    def park(self, response, end_offset: int, fail, timeout_ms: int, now_ms: int, on_done=None) -> Park | Respond:
        """Answer once the records commit. `on_done(response, now_ms)`: this node's own request
        (a producer-id block, say), told directly; its Completion goes to no connection."""
        op = DelayedMetadataWrite(self, response, end_offset, fail, now_ms + max(timeout_ms, 1), on_done)
        done = op.try_complete(now_ms)
        if done is not None:
            return Respond(done)
        return Park(self._purgatory.park(op))

    def remove_lost_replicas(self, lost, now_ms: int, on_done) -> None:
        """An unclean recovery: drop the `lost` nodes from every partition's replicas and ISR and
        fence them; `on_done(result, now_ms)` once that is committed (result.error_code set if
        not). A partition whose every replica was lost keeps its list (it stays offline)."""
        lost = set(lost)
        records = []
        for topic in self.image.topics.values():
            for info in topic.partitions.values():
                kept = [r for r in info.replicas if r not in lost]
                if not kept or len(kept) == len(info.replicas):
                    continue
                records.append(PartitionChangeRecord(
                    partition_id=info.index, topic_id=info.topic_id, replicas=kept,
                    isr=[r for r in info.isr if r not in lost] or kept, leader=LEADER_UNCHANGED,
                    leader_recovery_state=1))  # Kafka's mark of an unclean election
        for broker in self.image.brokers.values():
            if broker.node_id in lost and not broker.fenced:
                records.append(_fence_record(broker))
        result = _WriteResult()
        if not records:
            on_done(result, now_ms)
            return
        end = self.append(records, now_ms)

        def fail(error):
            result.error_code = error

        self.park(result, end, fail, 30_000, now_ms, on_done=on_done)

    # -- liveness ----------------------------------------------------------------------------------
    def fence_silent_brokers(self, last_heard_ms, node_id: int, now_ms: int) -> None:
        """Fence registered brokers not heard from within broker_session_timeout_ms."""
        if now_ms - self._active_since_ms < self._session_timeout_ms:
            return  # we just took over: nobody has had the time to reach us
        records = []
        for broker in self.image.brokers.values():
            if broker.fenced or broker.node_id == node_id:
                continue
            if now_ms - last_heard_ms(broker.node_id) > self._session_timeout_ms:
                records.append(_fence_record(broker))
        if records:
            self.append(records, now_ms)

    def next_placement_start(self, brokers: int) -> int:
        start = self._placement_start
        self._placement_start = (start + 1) % max(brokers, 1)
        return start

    def offline_partitions(self) -> int:
        """Partitions with no live leader (kraftd_offline_partitions)."""
        image = self.image
        return sum(1 for t in image.topics.values() for p in t.partitions.values()
                   if p.leader == NO_LEADER or not image.is_live(p.leader))


class DelayedMetadataWrite:
    """A controller request whose records must commit before it is answered."""

    def __init__(self, controller: Controller, response, end_offset: int, fail, deadline_ms: int,
                 on_done=None) -> None:
        self.controller = controller
        self.response = response
        self.end_offset = end_offset
        self.fail = fail                 # (ErrorCode) -> None: mark every result failed
        self.deadline_ms = deadline_ms
        self.on_done = on_done
        self.epoch = controller.epoch

    def watch_keys(self):
        return [self.controller.partition.key]

    def try_complete(self, now_ms: int):
        partition = self.controller.partition
        if partition.high_watermark >= self.end_offset and self._ours_committed(partition):
            # (also once we no longer lead: a leader that removed itself from the voters
            # resigns as the removal commits, and the removal succeeded)
            return self._done(now_ms)
        if not self.controller.active:
            self.fail(ErrorCode.NOT_CONTROLLER)
            return self._done(now_ms)
        return None

    def _ours_committed(self, partition) -> bool:
        """What committed at our last offset was written in our epoch: ours (one leader per epoch)."""
        if self.controller.active:
            return True
        return partition.log.epoch_cache.epoch_for_offset(self.end_offset - 1) == self.epoch

    def expire(self, now_ms: int):
        self.fail(ErrorCode.REQUEST_TIMED_OUT)
        return self._done(now_ms)

    def _done(self, now_ms: int):
        if self.on_done is not None:
            self.on_done(self.response, now_ms)
        return self.response


def _fence_record(broker):
    """The RegisterBrokerRecord that marks `broker` fenced."""
    fenced = copy.copy(broker)
    fenced.fenced = True
    return register_broker_record(fenced)


class _WriteResult:
    """The answer of a write the controller makes for itself (no client waits for it)."""
    error_code = 0


def new_topic_id(rng) -> uuid.UUID:
    """A random version-4 id that is never Kafka's reserved zero or metadata-topic id."""
    while True:
        topic_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        if topic_id.int > 1:
            return topic_id
