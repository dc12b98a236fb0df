"""FileLog: a partition log stored as Kafka-format segment files.

Threading: everything runs on the event-loop thread except `flush()`, which a worker thread
may run concurrently with appends. They share only the dirty-segment set, the log end offset
snapshot and `flushed_offset`, all under `_lock`; fsync itself runs outside the lock.

Durability: appends go to the page cache (one pwrite per call). `flush()` fsyncs every segment
written since the previous flush (rolled ones included) and the directory if files were
created or deleted, then publishes the snapshotted end offset as `flushed_offset` and records
it in the `recovery-point` file (no fsync: a stale value only makes the next recovery scan
more). Truncation, log-start changes and the epoch checkpoint are made durable immediately
(they are rare), so a crash can never resurrect truncated data under a flushed offset.

Recovery on open: every segment from the one holding the recovery point onward (all of them
after an unclean shutdown without one) and any segment whose index files look wrong is scanned
batch by batch (length, magic, contiguous offsets, CRC32C). The first bad batch and everything
after it (later segments too) is removed; nothing before it is touched.
"""
from __future__ import annotations

import bisect
import json
import logging
import os
import struct
import shutil
import threading
import uuid
import zlib

from ..protocol.errors import CorruptRecordError
from ..protocol.records import decode_records

from .atomic_file import atomic_write, fsync_dir
from .background_writes import background_writes
from .cleaner import CleaningPlan, finish_swaps
from .cleaning import CLEANER_CHECKPOINT_FILE, Cleanable, cleanable, commit_cleaning, plan_cleaning, \
    read_cleaner_checkpoint, truncate_cleaner_checkpoint
from .errors import OffsetOutOfRangeError
from .leader_epoch_cache import LeaderEpochCache
from .voter_set_cache import VOTER_SET_CHECKPOINT_FILE, VoterSetCache
from .log_base import PartitionLog, ReadResult, RecoveryReport
from .producer_state import ProducerStateTable
from .truncation import TruncationPlan, headers_between
from .segment import LogSegment

__all__ = ["FileLog"]

logger = logging.getLogger(__name__)

LOG_START_FILE = "log-start-offset"
DELETE_SUFFIX = "-delete"  # a deleted partition's directory, until it is removed
RECOVERY_POINT_FILE = "recovery-point"
EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PRODUCER_SNAPSHOT_FILE = "producer-state.json"
RETAINED_PRODUCERS_FILE = "producer-state-below-log-start.json"  # see PartitionLog._retained
COMPACTED_MARKER_FILE = "compacted"  # the log may have offset gaps (see gaps_allowed)
_RP = struct.Struct(">qBI")  # offset, clean-shutdown flag, crc32 of the first 9 bytes
_MAX_REL = 0xFFFFFFFF

# Directories FileLog.discard has queued to rename away, and the rename's background-writes
# sequence number: a log opened on such a directory waits for the rename first.
_renames_pending: dict[str, int] = {}
_renames_lock = threading.RLock()  # (re-entered when background writes run inline)


def _rename_away(source: str, doomed: str) -> None:
    try:
        os.rename(source, doomed)
    except FileNotFoundError:
        pass
    finally:
        with _renames_lock:
            _renames_pending.pop(source, None)


def _wait_for_rename_away(directory: str) -> None:
    with _renames_lock:
        seq = _renames_pending.get(directory)
    if seq is not None:
        background_writes().wait_for(seq)


class FileLog(PartitionLog):
    def __init__(self, directory, *, segment_bytes: int = 1 << 30, index_interval_bytes: int = 4096,
                 use_mmap: bool = True, recovery_checks_crc: bool = True, segment_ms: int | None = None,
                 compacted: bool = False):
        if not 0 < segment_bytes <= 0x7FFFFFFF:
            raise ValueError("segment_bytes must fit u32 index positions")
        self.dir = os.fspath(directory)
        _wait_for_rename_away(self.dir)  # a deleted partition's directory of the same name
        os.makedirs(self.dir, exist_ok=True)
        self.segment_bytes = segment_bytes
        # segment.ms: a batch whose largest timestamp is more than this past the active segment's
        # first batch's starts a new segment (Kafka's rule; None: size alone decides).
        self.segment_ms = segment_ms
        # Once compacted, always: a cleaned log (or a follower's copy of one) keeps its gaps if
        # the topic's policy changes back to delete, so the marker file says so at every open.
        self.gaps_allowed = compacted or os.path.exists(os.path.join(self.dir, COMPACTED_MARKER_FILE))
        self.index_interval_bytes = index_interval_bytes
        self.use_mmap = use_mmap
        # False only to plant a bug (the simulation's BugSwitches.recovery_keeps_torn_batch):
        # recovery would then keep a torn batch whose CRC fails.
        self._recovery_checks_crc = recovery_checks_crc
        # A follower's copy is read again only if it becomes leader: once durable, its pages
        # leave the page cache (see flush) unless something reads it back (state machines).
        self.cache_replicated = False
        self._lock = threading.Lock()
        self._rp_fd: int | None = None  # the recovery-point file, kept open for in-place writes
        self._dirty: dict[int, LogSegment] = {}
        self._dir_dirty = False
        self._new_dir = False
        self._generation = 0  # bumped by truncation: a flush snapshot from before is stale
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._leo = 0
        self._log_start = 0
        self._flushed = 0
        self._unflushed_bytes = 0  # appended since the last flush began
        self.epoch_cache = LeaderEpochCache(os.path.join(self.dir, EPOCH_CHECKPOINT_FILE), deferred=True)
        self.voter_sets = VoterSetCache(os.path.join(self.dir, VOTER_SET_CHECKPOINT_FILE))
        self.producer_state = ProducerStateTable()
        self._retained = ProducerStateTable()
        self._retained_offset = 0
        self.cleaner_checkpoint = 0  # compacted logs: where the dirty part starts (storage/cleaning.py)
        self.recovery_report = self._open()
        if compacted:  # (after _open: it removes `.tmp` files, the marker's write among them)
            self._mark_compacted()

    # -- properties ---------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # -- append -------------------------------------------------------------------------------
    def _store(self, buf, placed, *, replicated: bool = False) -> None:
        self._write(buf, placed, cold=replicated and not self.cache_replicated)

    def _write(self, buf, placed, *, cold: bool = False) -> None:
        last = placed[-1][1].last_offset
        seg = self._segments[-1]
        if seg.size and (seg.size + len(buf) > self.segment_bytes or last - seg.base_offset > _MAX_REL
                         or self._aged(seg, placed)):
            seg = self._roll()
        start = seg.size
        seg.append(buf, placed)
        seg.next_offset = last + 1
        with self._lock:
            self._dirty[id(seg)] = seg
            self._unflushed_bytes += len(buf)
            self._leo = last + 1
            if cold and seg.cold_from is None:
                seg.cold_from = start

    def _aged(self, seg: LogSegment, placed) -> bool:
        if self.segment_ms is None:
            return False
        first = seg.rolling_timestamp()
        return first >= 0 and max(h.max_timestamp for _, h in placed) - first > self.segment_ms

    def _roll(self) -> LogSegment:
        self._segments[-1].seal()
        seg = LogSegment(self.dir, self._leo, create=True,
                         index_interval_bytes=self.index_interval_bytes, use_mmap=self.use_mmap)
        seg.next_offset = self._leo
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        with self._lock:
            self._dir_dirty = True
        return seg

    def roll(self) -> None:
        """Seal the active segment now (if it holds anything)."""
        if self._segments[-1].size:
            self._roll()

    # -- read ---------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        leo = self._leo
        if offset < self._log_start or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self._log_start}, {leo}]")
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit or (max_bytes <= 0 and not min_one_batch):
            return ReadResult([], 0, -1, offset)
        regions, total, first, next_off = [], 0, -1, offset
        i = bisect.bisect_right(self._bases, offset) - 1
        nseg = len(self._segments)
        while i < nseg:
            seg = self._segments[i]
            seg_end = self._bases[i + 1] if i + 1 < nseg else leo
            if offset >= seg_end:
                i += 1
                continue
            start, h = seg.lookup(offset)
            if h is None and i + 1 < nseg and seg_end <= limit:
                offset = seg_end  # nothing left in this segment (a compacted log's gap): the next
                i += 1
                continue
            if h is None or h.last_offset >= limit:
                break  # a batch reaching max_offset is never returned
            if first < 0:
                first = h.base_offset
            if limit < seg_end:
                end_pos, hl = seg.lookup(limit)
                end_next, last_segment = (hl.base_offset if hl is not None else limit), True
            else:
                end_pos, end_next, last_segment = seg.size, seg_end, False
            budget = max_bytes - total
            if end_pos - start <= budget:
                regions.append(seg.region(start, end_pos - start))
                total += end_pos - start
                next_off = end_next
                if last_segment:
                    break
                offset = seg_end
                i += 1
                continue
            cut, cut_next = seg.boundary_before(start + budget, start, h.base_offset)
            if cut == start:
                if total or not min_one_batch:
                    break
                cut, cut_next = start + h.size, h.next_offset  # KIP-74: one oversized batch
            regions.append(seg.region(start, cut - start))
            total += cut - start
            next_off = cut_next
            break
        if not regions:
            return ReadResult([], 0, -1, offset)
        return ReadResult(regions, total, first, next_off)

    # -- flush --------------------------------------------------------------------------------
    def flush_is_small(self, max_bytes: int) -> bool:
        """The next flush is one fsync of one segment with at most `max_bytes` appended: no
        directory to sync, no epoch checkpoint to write, no background write to wait for."""
        with self._lock:
            return (self._unflushed_bytes <= max_bytes and len(self._dirty) <= 1 and not self._dir_dirty
                    and not self.epoch_cache.checkpoint_pending and not background_writes().pending)

    def flush(self) -> int:
        if self.discarded:
            return self._flushed
        with self._lock:
            plan = self._take_dirty()
        try:
            # What was decided before this flush (a catalog entry, a log start) is durable
            # before the data it covers is called durable (storage/background_writes.py).
            background_writes().barrier()
            # Epochs first: once data is durable, the checkpoint must know its epochs.
            self.epoch_cache.write_checkpoint()
            for seg in plan.segments:
                seg.fsync()
            if plan.dir_dirty:
                fsync_dir(self.dir)
                if self._new_dir:  # and the directory's own entry in the data dir
                    fsync_dir(os.path.dirname(self.dir) or ".")
                    self._new_dir = False
        except BaseException:
            if self.discarded:  # deleted while this flush ran: its directory is gone (ENOENT)
                return self._flushed
            self.abort_flush(plan)
            raise
        return self.end_flush(plan)

    def begin_flush(self) -> "FlushPlan | None":
        """Only segment fsyncs (no directory to sync, no epoch checkpoint to write, no background
        write to wait for)."""
        with self._lock:
            if self._dir_dirty or self.epoch_cache.checkpoint_pending or background_writes().pending:
                return None
            return self._take_dirty()

    def _take_dirty(self) -> "FlushPlan":
        segs = list(self._dirty.values())
        self._dirty.clear()
        self._unflushed_bytes = 0
        dir_dirty, self._dir_dirty = self._dir_dirty, False
        cold = [(seg, seg.cold_from, seg.size) for seg in segs if seg.cold_from is not None]
        for seg, _, _ in cold:
            seg.cold_from = None
        return FlushPlan(self._leo, self._generation, segs, dir_dirty, cold)

    def abort_flush(self, plan: "FlushPlan") -> None:
        with self._lock:
            for seg in plan.segments:
                self._dirty.setdefault(id(seg), seg)
            self._dir_dirty |= plan.dir_dirty
            for seg, start, _ in plan.cold:
                if seg.cold_from is None:
                    seg.cold_from = start

    def end_flush(self, plan: "FlushPlan") -> int:
        # Durable now: a follower's freshly written pages go back to the kernel, which hands
        # them to the next writes. New page-cache pages are the dearest part of an append here
        # (~1.5 ms/MB on a fresh VM page vs ~0.3 ms/MB reused: bench/README.md, (g)), and a
        # follower writes every byte its leaders do.
        for seg, start, end in plan.cold:
            seg.drop_cached(start, end)
        with self._lock:
            if plan.generation == self._generation and plan.target > self._flushed:
                self._flushed = plan.target
            flushed = self._flushed
        if not self.discarded:  # (deleted meanwhile: its directory is being renamed away)
            self._write_recovery_point(flushed, clean=False, durable=False)
        return flushed

    # -- truncation, log start, retention -----------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        where = self._cut_point(offset)
        if where is None:
            return
        if isinstance(where, int):
            self.truncate_fully_and_start_at(where)
            return
        i, pos = where
        # A mapped file is never ftruncated (in-flight regions may point into it): copy the kept
        # prefix to a new file and rename it over the old name.
        self._install_truncated(i, self._segments[i].copy_prefix(pos, use_mmap=self.use_mmap), offset)
        self._rebuild_producer_state()

    def plan_truncation(self, offset: int) -> TruncationPlan | None:
        """truncate_to(offset) in two parts (storage/truncation.py) when it must copy part of a
        segment; None when it is cheap (nothing to cut, a whole-log reset): then truncate_to."""
        where = self._cut_point(offset)
        return TruncationPlan(self, where[0], offset, where[1]) if isinstance(where, tuple) else None

    def commit_truncation(self, plan: TruncationPlan) -> bool:
        """Swap in what `plan.run()` prepared, if the log did not change since the plan was made
        (no append, truncation, log-start move); False (and the copy discarded) otherwise."""
        i = plan.index
        if (not plan.ready or plan.generation != self._generation or plan.log_end != self._leo
                or i >= len(self._segments) or self._segments[i] is not plan.source
                or plan.log_start != self._log_start):
            plan.discard()
            return False
        seg = plan.segment
        seg.renamed_into_place()
        self._install_truncated(i, seg, plan.offset)
        self.producer_state = plan.producer_state
        return True

    def _cut_point(self, offset: int) -> tuple[int, int] | int | None:
        """Where truncate_to(offset) cuts: (segment index, position); an offset where the whole
        log restarts instead; None when there is nothing to cut."""
        if offset >= self._leo:
            return None
        if offset <= self._log_start:
            return offset
        i = bisect.bisect_right(self._bases, offset) - 1
        pos, h = self._segments[i].lookup(offset)
        if h is not None and h.base_offset <= self._log_start:
            # The batch holding `offset` starts below the log start: nothing visible remains.
            return self._log_start
        return i, pos

    def _install_truncated(self, i: int, seg: LogSegment, offset: int) -> None:
        """Segment i is now `seg` (its kept prefix, under the segment's name); later ones go. The
        log ends at `offset`, the truncation's, even where a compacted log's gap comes before it
        (as Kafka's truncateTo; a restart's recovery ends it at its last batch); or, if `offset`
        falls inside a batch, at that batch's base offset."""
        for later in self._segments[i + 1:]:
            later.delete()
        del self._segments[i + 1:], self._bases[i + 1:]
        old = self._segments[i]
        if self.gaps_allowed and offset > seg.next_offset:
            # A gap before the cut (the cleaner's): the log ends at `offset`, or at the base of the
            # batch holding it, which went whole.
            _, h = old.lookup(offset)
            seg.next_offset = offset if h is None else min(offset, h.base_offset)
        old.unlinked()  # (its file was renamed over)
        self._segments[i] = seg
        new_leo = seg.next_offset
        fsync_dir(self.dir)
        with self._lock:
            self._generation += 1
            self._dirty = {k: v for k, v in self._dirty.items() if v in self._segments}
            self._dirty.pop(id(old), None)
            self._leo = new_leo
            self._flushed = min(self._flushed, new_leo)
        self._write_recovery_point(self._flushed, clean=False, durable=True)
        truncate_cleaner_checkpoint(self, new_leo)
        self.epoch_cache.truncate_from_end(new_leo)
        self.epoch_cache.write_checkpoint()  # truncations are rare: durable at once
        self.voter_sets.truncate_from_end(new_leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete()
        seg = LogSegment(self.dir, offset, create=True,
                         index_interval_bytes=self.index_interval_bytes, use_mmap=self.use_mmap)
        seg.next_offset = offset
        self._segments, self._bases = [seg], [offset]
        self._producers_restarted_at(offset)
        self._persist_retained()
        self._persist_log_start(offset)
        fsync_dir(self.dir)
        with self._lock:
            self._generation += 1
            self._dirty.clear()
            self._leo = self._log_start = self._flushed = offset
        self._write_recovery_point(offset, clean=False, durable=True)
        truncate_cleaner_checkpoint(self, offset)
        self.epoch_cache.clear()
        self.epoch_cache.write_checkpoint()
        self.voter_sets.clear()

    def advance_log_start(self, offset: int) -> None:
        if offset <= self._log_start:
            return
        if offset > self._leo:
            raise OffsetOutOfRangeError(f"log start {offset} beyond log end {self._leo}")
        self._retain_producers(offset)
        self._persist_retained()
        self._persist_log_start(offset)
        n = 0
        while n + 1 < len(self._segments) and self._bases[n + 1] <= offset:
            n += 1
        self._delete_oldest(n)
        self.epoch_cache.truncate_from_start(offset)
        self.voter_sets.truncate_from_start(offset)

    def apply_retention(self, now_ms: int, retention_ms: int, retention_bytes: int, *,
                        max_offset: int | None = None) -> int:
        """Kafka's cleanup.policy=delete. Negative limits disable a rule. Returns segments deleted."""
        segs, nseg = self._segments, len(self._segments)
        upper = self._leo if max_offset is None else min(max_offset, self._leo)

        def end(i: int) -> int:
            return self._bases[i + 1] if i + 1 < nseg else self._leo

        n_time = 0
        if retention_ms >= 0:
            # (An empty segment counts only if it is not the active one: a compacted log's cleaner
            # may leave an empty sealed segment.)
            while n_time < nseg and (segs[n_time].size or n_time + 1 < nseg) and end(n_time) <= upper:
                largest = segs[n_time].max_timestamp
                if largest < 0:
                    largest = int(os.fstat(segs[n_time].fd).st_mtime * 1000)
                if now_ms - largest <= retention_ms:
                    break
                n_time += 1
        n_bytes = 0
        if retention_bytes >= 0:
            excess = self.size_in_bytes - retention_bytes
            while n_bytes < nseg and (segs[n_bytes].size or n_bytes + 1 < nseg) and end(n_bytes) <= upper \
                    and excess - segs[n_bytes].size >= 0:
                excess -= segs[n_bytes].size
                n_bytes += 1
        n = max(n_time, n_bytes)
        if n == 0:
            return 0
        if n == nseg:
            self._roll()  # like Kafka: the active segment is never deleted, so seal it first
        new_start = max(self._log_start, self._bases[n])
        self._retain_producers(new_start)
        self._persist_retained()
        self._persist_log_start(new_start)
        self._delete_oldest(n)
        self.epoch_cache.truncate_from_start(self._log_start)
        self.voter_sets.truncate_from_start(self._log_start)
        return n

    def _delete_oldest(self, n: int) -> None:
        if n <= 0:
            return
        for seg in self._segments[:n]:
            seg.delete()
        del self._segments[:n], self._bases[:n]
        with self._lock:
            self._dir_dirty = True
            self._dirty = {k: v for k, v in self._dirty.items() if v in self._segments}

    def _headers_between(self, start: int, end: int):
        """Headers of the batches whose last offset is in [start, end)."""
        return headers_between(self._segments, start, end)

    def _persist_retained(self) -> None:
        """The producer state below the log start, queued before the log start that needs it (a
        crash between the two leaves it ahead of the log start: rebuilds replay from its offset)."""
        data = json.dumps({"offset": self._retained_offset, "producers": self._retained.snapshot()}).encode()
        background_writes().submit(lambda: self._write_retained(data))

    def _write_retained(self, data: bytes) -> None:
        if self.discarded:
            return
        atomic_write(os.path.join(self.dir, RETAINED_PRODUCERS_FILE), data)

    def _load_retained(self) -> None:
        try:
            with open(os.path.join(self.dir, RETAINED_PRODUCERS_FILE), "rb") as f:
                snap = json.loads(f.read())
            table, offset = ProducerStateTable.from_snapshot(snap["producers"]), int(snap["offset"])
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("%s: ignoring unreadable %s: %s", self.dir, RETAINED_PRODUCERS_FILE, exc)
            return
        self._retained, self._retained_offset = table, offset

    def _persist_log_start(self, offset: int) -> None:
        """Durable in the background (a crash before it only keeps older records readable:
        recovery takes the larger of the file and the first segment), and before the next flush."""
        self._log_start = offset
        background_writes().submit(lambda: self._write_log_start(offset))

    def _write_log_start(self, offset: int) -> None:
        if self.discarded:
            return  # the partition was deleted meanwhile: its directory is gone or going
        atomic_write(os.path.join(self.dir, LOG_START_FILE), f"{offset}\n".encode())

    # -- compaction (storage/cleaning.py, storage/cleaner.py) -----------------------------------
    def reconfigure(self, *, segment_bytes: int, segment_ms: int | None, compacted: bool) -> None:
        super().reconfigure(segment_bytes=segment_bytes, segment_ms=segment_ms, compacted=compacted)
        if compacted:
            self._mark_compacted()

    def _mark_compacted(self) -> None:
        path = os.path.join(self.dir, COMPACTED_MARKER_FILE)
        if not os.path.exists(path):
            background_writes().submit(lambda: None if self.discarded else atomic_write(path, b"compacted\n"))

    def cleanable(self, *, max_offset: int, now_ms: int, min_lag_ms: int) -> Cleanable | None:
        return cleanable(self, max_offset=max_offset, now_ms=now_ms, min_lag_ms=min_lag_ms)

    def plan_cleaning(self, range_: Cleanable, **settings) -> CleaningPlan:
        return plan_cleaning(self, range_, **settings)

    def commit_cleaning(self, plan: CleaningPlan) -> bool:
        return commit_cleaning(self, plan)

    # -- timestamps -----------------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        for seg in self._segments:
            if seg.max_timestamp < timestamp:
                continue
            start = max(self._log_start, seg.base_offset, seg.time_lookup_start(timestamp))
            pos, _ = seg.lookup(start)
            for p, h in seg.iter_headers(pos):
                if h.max_timestamp >= timestamp and h.last_offset >= self._log_start:
                    return self._record_at(seg, p, h, lambda ts: ts >= timestamp)
        return None

    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        best = None
        for seg in self._segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return None
        pos, h = best.lookup(best.offset_of_max_timestamp)
        if h is None:
            return None
        return self._record_at(best, pos, h, lambda ts: ts == h.max_timestamp)

    def _record_at(self, seg, pos, h, match) -> tuple[int, int, int]:
        if h.timestamp_type == 0:  # CreateTime: the exact record, like Kafka
            for r in decode_records(seg.read_bytes(pos, h.size), h):
                if r.offset >= self._log_start and match(r.timestamp):
                    return r.offset, r.timestamp, h.partition_leader_epoch
        return max(h.base_offset, self._log_start), h.max_timestamp, h.partition_leader_epoch

    # -- open / close -----------------------------------------------------------------------------
    def discard(self, *, remove: bool = True) -> None:
        """The partition is deleted: let go of every segment without writing anything (each
        descriptor closes with its last reference, a read in flight included), and queue
        (on the background-writes thread, in order with what was queued before) the rename of
        the directory to `<dir>.<id>-delete`, then its removal. `remove=False` queues only the
        rename; `remove_discarded()` queues the removal later (after a catalog change queued in
        between). A leftover `-delete` directory is finished at startup
        (server/data_dir_startup.py).

        The rename is not done on the caller's thread (the event loop): ext4 makes it wait for
        the journal, 65 ms while other deletions' removals kept it busy (bench/README.md, (v)).
        A FileLog opened on the same directory before the rename ran waits for it."""
        self.discarded = True
        with self._lock:
            self._close_recovery_point()
        # Not closed here: a Fetch answer may still be reading a segment (its descriptor, closed
        # now, could be reused for another file before the answer is sent; sim seed 8486 read a
        # closed one). Their files go with the directory; the last reference closes each.
        for seg in self._segments:
            seg.unlinked()
        self._segments, self._bases = [], []
        self._doomed = doomed = f"{self.dir}.{uuid.uuid4().hex}{DELETE_SUFFIX}"
        source = self.dir
        with _renames_lock:
            seq = background_writes().submit(lambda: _rename_away(source, doomed))
            if not background_writes().done(seq):
                _renames_pending[source] = seq
        if remove:
            self.remove_discarded()

    def remove_discarded(self) -> None:
        """Queue the removal of the directory `discard(remove=False)` renamed away."""
        doomed = self._doomed
        background_writes().submit(lambda: shutil.rmtree(doomed, ignore_errors=True))

    def close(self) -> None:
        """Flush, persist indexes and producer state, mark the shutdown clean."""
        if not self._segments:
            background_writes().barrier()  # (a log closed before: what was queued for it is written)
            return
        self.flush()
        active = self._segments[-1]
        active._maybe_time_entry()
        active.write_index_files()
        atomic_write(os.path.join(self.dir, PRODUCER_SNAPSHOT_FILE),
                     json.dumps({"offset": self._leo, "producers": self.producer_state.snapshot()}).encode())
        self._write_recovery_point(self._leo, clean=True, durable=True)
        for seg in self._segments:
            seg.close()
        self._segments, self._bases = [], []

    def abandon(self) -> None:
        """Close every descriptor and write nothing: what a crashed process leaves behind (the
        simulation tears the unflushed bytes, then opens the log again to recover it)."""
        with self._lock:
            self._close_recovery_point()
        for seg in self._segments:
            seg.close()
        self._segments, self._bases = [], []

    def _open(self) -> RecoveryReport:
        report = RecoveryReport()
        cleaner_files = False
        for name in os.listdir(self.dir):
            if name.endswith((".tmp", ".trunc")):
                os.unlink(os.path.join(self.dir, name))
            cleaner_files |= name.endswith((".swap", ".cleaned", CLEANER_CHECKPOINT_FILE))
        if cleaner_files:
            report.swaps_finished = finish_swaps(self.dir)
            self.cleaner_checkpoint = read_cleaner_checkpoint(self.dir)
        log_start = _read_int_file(os.path.join(self.dir, LOG_START_FILE))
        rp, clean = self._read_recovery_point()
        report.clean_shutdown = clean
        bases = sorted(int(n[:-4]) for n in os.listdir(self.dir)
                       if n.endswith(".log") and n[:-4].isdigit())
        fresh = not bases
        if fresh:
            # A new partition: nothing to make durable yet. The first flush fsyncs the directory
            # (and its parent) before any data counts as durable, so creating topics costs no fsync.
            bases = [log_start or 0]
            LogSegment(self.dir, bases[0], create=True).close()
            self._dir_dirty = self._new_dir = True
        first_unflushed = max(0, bisect.bisect_right(bases, rp) - 1)
        new_epochs: list[tuple[int, int]] = []
        scanned: list[LogSegment] = []
        i = 0
        while i < len(bases):
            seg = LogSegment(self.dir, bases[i], index_interval_bytes=self.index_interval_bytes,
                             use_mmap=self.use_mmap)
            self._segments.append(seg)
            self._bases.append(seg.base_offset)
            last = i == len(bases) - 1
            if clean or (i < first_unflushed and not last):
                if seg.load_index_files() and (not last or self._tail_ok(seg)):
                    i += 1
                    continue
                report.indexes_rebuilt.append(seg.base_offset)
            report.segments_scanned.append(seg.base_offset)
            valid, reason, headers = seg.recover(check_crc=self._recovery_checks_crc, gaps=self.gaps_allowed)
            scanned.append(seg)
            for h in headers:
                if h.partition_leader_epoch >= 0 and (not new_epochs or h.partition_leader_epoch > new_epochs[-1][0]):
                    new_epochs.append((h.partition_leader_epoch, h.base_offset))
            if reason is None and not last and (seg.next_offset > bases[i + 1] or
                                                seg.next_offset < bases[i + 1] and not self.gaps_allowed):
                reason = f"segment ends at offset {seg.next_offset}, next starts at {bases[i + 1]}"
            if reason is not None:
                report.truncated_segment, report.truncated_at_position = seg.base_offset, valid
                report.truncated_bytes, report.truncation_reason = seg.size - valid, reason
                logger.warning("%s: truncating segment %d at position %d (%d bytes): %s",
                               self.dir, seg.base_offset, valid, seg.size - valid, reason)
                seg.truncate_file(valid)
                for base in bases[i + 1:]:
                    report.deleted_segments.append(base)
                    for suffix in (".log", ".index", ".timeindex"):
                        try:
                            os.unlink(os.path.join(self.dir, f"{base:020d}{suffix}"))
                        except FileNotFoundError:
                            pass
                bases = bases[:i + 1]
            if not last and i + 1 < len(bases):
                seg.write_index_files()
            i += 1
        for seg in self._segments[:-1]:
            seg.sealed = True
        active = self._segments[-1]
        if active not in scanned:  # clean shutdown: its end offset comes from the index tail
            active.next_offset = self._scan_end(active)
        self._leo = active.next_offset
        if not fresh:  # recovered bytes are durable before anything counts them as flushed
            for seg in scanned:
                seg.fsync()
            if scanned:
                fsync_dir(self.dir)
        self._flushed = self._leo
        self._load_retained()
        self._log_start = max(log_start or 0, self._bases[0])
        if self._log_start > self._leo:
            self.truncate_fully_and_start_at(self._log_start)
        self.epoch_cache.truncate_from_end(self._leo)
        for epoch, start in new_epochs:
            latest = self.epoch_cache.latest_epoch
            if start < self._leo and (latest is None or epoch > latest):
                self.epoch_cache.assign(epoch, start)
        self.epoch_cache.truncate_from_start(self._log_start)
        self.voter_sets.truncate_from_end(self._leo)  # (written before its data: trim what did not land)
        self.voter_sets.truncate_from_start(self._log_start)
        self._load_producer_state(clean)
        # Recovery scans only past the recovery point: the epochs below it must be on disk first.
        self.epoch_cache.write_checkpoint()
        self._write_recovery_point(self._leo, clean=False, durable=not fresh)
        report.segments = len(self._segments)
        report.log_start_offset, report.log_end_offset = self._log_start, self._leo
        return report.settle()

    def _tail_ok(self, seg: LogSegment) -> bool:
        """Clean shutdown: the active segment must end exactly at a batch boundary."""
        start = seg.idx_pos[-1] if len(seg.idx_pos) else 0
        pos = start
        try:
            for p, h in seg.iter_headers(start):
                pos = p + h.size
        except CorruptRecordError:
            return False
        return pos == seg.size

    def _scan_end(self, seg: LogSegment) -> int:
        start = seg.idx_pos[-1] if len(seg.idx_pos) else 0
        end = seg.base_offset + (seg.idx_rel[-1] if len(seg.idx_rel) else 0)
        for _, h in seg.iter_headers(start):
            end = h.next_offset
        return end

    def _load_producer_state(self, clean: bool) -> None:
        path = os.path.join(self.dir, PRODUCER_SNAPSHOT_FILE)
        snap = None
        if os.path.exists(path):
            if clean:
                with open(path, "rb") as f:
                    snap = json.loads(f.read())
            os.unlink(path)  # a later crash must not reuse it
            fsync_dir(self.dir)
        if snap is not None and snap.get("offset") == self._leo:
            self.producer_state = ProducerStateTable.from_snapshot(snap["producers"])
        else:
            self._rebuild_producer_state()

    def _rebuild_producer_state(self) -> None:
        self.producer_state = self._producers_rebuilt(self._headers_between(self._log_start, self._leo))

    def _read_recovery_point(self) -> tuple[int, bool]:
        try:
            with open(os.path.join(self.dir, RECOVERY_POINT_FILE), "rb") as f:
                raw = f.read()
            offset, clean, crc = _RP.unpack(raw)
        except (FileNotFoundError, struct.error):
            return 0, False
        if zlib.crc32(raw[:9]) != crc:
            return 0, False
        return offset, bool(clean)

    def _write_recovery_point(self, offset: int, *, clean: bool, durable: bool) -> None:
        head = struct.pack(">qB", offset, int(clean))
        data = head + struct.pack(">I", zlib.crc32(head))
        path = os.path.join(self.dir, RECOVERY_POINT_FILE)
        if durable:  # a new file renamed over the old one: the kept fd would write the old inode
            with self._lock:
                self._close_recovery_point()
            atomic_write(path, data)
            return
        # 13 bytes in place after every flush; a torn write fails the CRC and means "scan
        # everything". The fd stays open: open and close per flush were two more syscalls, and
        # each syscall in the fsync thread is a GIL hand-off with the event loop.
        with self._lock:
            if self._rp_fd is None:
                self._rp_fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.pwrite(self._rp_fd, data, 0)

    def _close_recovery_point(self) -> None:
        fd, self._rp_fd = self._rp_fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # (a log never closed; not a weakref.finalize: see LogSegment)
        if getattr(self, "_rp_fd", None) is not None:
            self._close_recovery_point()

    def __repr__(self) -> str:
        return f"FileLog({self.dir!r}, start={self._log_start}, end={self._leo}, segments={len(self._segments)})"


def _read_int_file(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


class FlushPlan:
    """What one flush covers: the log end and generation when it was taken, the segments to
    fsync, whether the directory needs one too, and the replicated byte ranges to drop from the
    page cache once durable."""

    __slots__ = ("target", "generation", "segments", "dir_dirty", "cold")

    def __init__(self, target: int, generation: int, segments: list, dir_dirty: bool, cold: list) -> None:
        self.target = target
        self.generation = generation
        self.segments = segments
        self.dir_dirty = dir_dirty
        self.cold = cold

    @property
    def fds(self) -> list[int]:
        return [seg.fd for seg in self.segments]
