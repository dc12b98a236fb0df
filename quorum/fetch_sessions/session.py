"""One incremental fetch session (KIP-227): its partitions, their order and what was last sent.

Per-partition state is kept in columns (arrays indexed by a slot number) rather than one
object per partition: a session may cache 10,000 partitions, and the KIP's point is that an
incremental fetch costs little. A partition is *active* when the next fetch must look at it:
it was named in the request, it changed (high watermark, log start, leadership, or an append:
read from the node's ChangeJournal at each fetch), it still has data the fetcher may read (below
the high watermark for a consumer, below the log end for a follower), or it last answered an
error.
"""
from __future__ import annotations

from array import array
from typing import Any, NamedTuple, Protocol

NO_OFFSET = -1
MAX_EPOCH = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """Session epochs run 1, 2, … MAX_INT, then 1 again."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1



class AskedFetch(NamedTuple):
    """One partition as a fetcher asked for it: named in the request, or cached in its session."""
    topic_key: Any                # the name (< v13) or id (v13+) the fetcher uses
    partition_index: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int
    fetcher_log_start_offset: int
    partition: Any = None         # quorum.partition.Partition, once resolved

class FetchedPartition(Protocol):
    """What a fetch request says of one partition (handlers/fetch_read.py's PartitionFetch)."""
    session_key: Any
    topic_key: Any
    partition_index: int
    partition: Any
    fetch_offset: int
    max_bytes: int
    fetcher_log_start_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int


class FetchSession:
    __slots__ = (
        "id", "epoch", "privileged", "principal", "uses_topic_ids", "created_ms", "last_used_ms",
        "_slot_of", "_topic", "_index", "_partition", "_free", "_active", "_next_rank",
        "_max_bytes", "_current_leader_epoch", "_last_fetched_epoch", "_rank",
        "_fetch_offset", "_fetcher_log_start", "_sent_hw", "_sent_lso", "_sent_log_start", "journal_position",
        "__weakref__",
    )

    def __init__(self, session_id: int, *, privileged: bool, principal, uses_topic_ids: bool,
                 now_ms: int) -> None:
        self.id = session_id
        self.epoch = 1  # the epoch the next incremental request must carry
        self.privileged = privileged
        self.principal = principal
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self._slot_of: dict[int, int] = {}
        self._topic: list = []      # slot -> topic name or topic id (shared objects)
        self._index = array("i")
        self._partition: list = []  # slot -> quorum Partition, or None if unknown here
        self._free: list[int] = []
        self._active: set[int] = set()
        self._next_rank = 0
        self._max_bytes = array("i")
        self._current_leader_epoch = array("i")
        self._last_fetched_epoch = array("i")
        self._rank = array("q")
        self._fetch_offset = array("q")
        self._fetcher_log_start = array("q")
        self._sent_hw = array("q")
        self._sent_lso = array("q")
        self._sent_log_start = array("q")
        self.journal_position = 0  # how far into the node's ChangeJournal this session has read

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, key) -> bool:
        return key in self._slot_of

    # -- membership ---------------------------------------------------------------------------
    def upsert(self, fetch: FetchedPartition) -> int:
        """Add a partition or update what the fetcher told us about it; it becomes active."""
        key, topic, index, partition = fetch.session_key, fetch.topic_key, fetch.partition_index, fetch.partition
        slot = self._slot_of.get(key)
        if slot is None and partition is not None:
            slot = self._slot_of.get((topic, index))
            if slot is not None:
                self.attach(slot, key, partition)
        if slot is None:
            slot = self._allocate(key, topic, index, partition)
        self._max_bytes[slot] = fetch.max_bytes
        self._fetch_offset[slot] = fetch.fetch_offset
        self._fetcher_log_start[slot] = fetch.fetcher_log_start_offset
        self._current_leader_epoch[slot] = fetch.current_leader_epoch
        self._last_fetched_epoch[slot] = fetch.last_fetched_epoch
        self._active.add(slot)
        return slot

    def remove(self, key: int) -> None:
        slot = self._slot_of.pop(key, None)
        if slot is None:
            return
        self._partition[slot] = None
        self._topic[slot] = None
        self._active.discard(slot)
        self._free.append(slot)

    def attach(self, slot: int, key, partition) -> None:
        """A partition cached while its topic was unknown here (keyed by (name or id, index))
        now exists: key it as known partitions are, so its changes, the fetcher's later updates
        and ForgottenTopicsData find this slot rather than a second one."""
        if self._partition[slot] is not None or partition is None:
            return
        old_key = (self._topic[slot], self._index[slot])
        if self._slot_of.get(old_key) == slot:
            del self._slot_of[old_key]
        self._slot_of[key] = slot
        self._partition[slot] = partition

    def _allocate(self, key: int, topic, index: int, partition) -> int:
        rank = self._next_rank
        self._next_rank += 1
        if self._free:
            slot = self._free.pop()
            self._topic[slot], self._partition[slot] = topic, partition
            self._index[slot] = index
            self._rank[slot] = rank
            self._sent_hw[slot] = self._sent_lso[slot] = self._sent_log_start[slot] = NO_OFFSET
        else:
            slot = len(self._topic)
            self._topic.append(topic)
            self._partition.append(partition)
            self._index.append(index)
            self._rank.append(rank)
            for column in (self._max_bytes, self._current_leader_epoch, self._last_fetched_epoch):
                column.append(0)
            for column in (self._fetch_offset, self._fetcher_log_start):
                column.append(0)
            for column in (self._sent_hw, self._sent_lso, self._sent_log_start):
                column.append(NO_OFFSET)
        self._slot_of[key] = slot
        return slot

    # -- what a fetch reads ----------------------------------------------------------------
    def catch_up(self, journal) -> None:
        """Activate the partitions whose HW or log start moved since this session last looked."""
        keys = journal.since(self.journal_position)
        if keys is None:  # fell behind the journal's trimmed head: look at everything
            self._active.update(s for s in range(len(self._topic)) if self._topic[s] is not None)
        else:
            slot_of, active = self._slot_of, self._active
            for key in keys:
                slot = slot_of.get(key)
                if slot is not None:
                    active.add(slot)
        self.journal_position = journal.end

    def shrink(self) -> None:
        """After a full fetch most slots go quiet; sets never shrink on their own."""
        self._active = set(self._active)

    def all_slots_in_order(self) -> list[int]:
        slots = [s for s in range(len(self._topic)) if self._topic[s] is not None]
        slots.sort(key=self._rank.__getitem__)
        return slots

    def active_slots_in_order(self) -> list[int]:
        slots = sorted(self._active, key=self._rank.__getitem__)
        return slots

    def partition_at(self, slot: int):
        return self._partition[slot]

    def fetch_state(self, slot: int) -> AskedFetch:
        return AskedFetch(self._topic[slot], self._index[slot], self._fetch_offset[slot],
                          self._current_leader_epoch[slot], self._last_fetched_epoch[slot], self._max_bytes[slot],
                          self._fetcher_log_start[slot], self._partition[slot])

    # -- what was answered -----------------------------------------------------------------
    def must_send(self, slot: int, data, stop: bool) -> bool:
        """KIP-227: an incremental response carries a partition only if something changed."""
        return (stop or data.error_code != 0 or len(data.records or b"") > 0
                or data.diverging_epoch.epoch != -1 or data.diverging_epoch.end_offset != -1
                or data.snapshot_id.epoch != -1 or data.snapshot_id.end_offset != -1
                or data.high_watermark != self._sent_hw[slot]
                or data.last_stable_offset != self._sent_lso[slot]
                or data.log_start_offset != self._sent_log_start[slot])

    def record_sent(self, slot: int, data) -> None:
        """Remember what the fetcher now knows; rotate partitions that returned records."""
        error = data.error_code != 0
        # After an error the cached HW is reset so the partition is sent again next time.
        self._sent_hw[slot] = NO_OFFSET if error else data.high_watermark
        self._sent_lso[slot] = data.last_stable_offset
        self._sent_log_start[slot] = data.log_start_offset
        if len(data.records or b"") > 0:
            self._rank[slot] = self._next_rank  # to the end: nobody starves under max_bytes
            self._next_rank += 1

    def settle(self, slot: int, data, stop: bool) -> None:
        """Keep a partition active only while the next fetch could have something for it: a
        consumer reads up to the high watermark, a follower (privileged) up to the log end."""
        partition = self._partition[slot]
        if partition is None or stop or data.error_code != 0:
            return
        upper = partition.log.log_end_offset if self.privileged else partition.high_watermark
        if self._fetch_offset[slot] >= upper:
            self._active.discard(slot)

    def nbytes(self) -> int:
        """Approximate bytes held for the partitions (for the memory benchmark)."""
        import sys
        columns = (self._index, self._max_bytes, self._current_leader_epoch, self._last_fetched_epoch,
                   self._rank, self._fetch_offset, self._fetcher_log_start, self._sent_hw, self._sent_lso,
                   self._sent_log_start)
        total = sum(sys.getsizeof(c) for c in columns)
        total += sys.getsizeof(self._slot_of) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self._slot_of.items())
        total += sys.getsizeof(self._topic) + sys.getsizeof(self._partition)
        total += sys.getsizeof(self._active) + sys.getsizeof(self._free)
        return total
