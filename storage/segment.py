"""One log segment: `<base>.log` plus its sparse `.index` and `.timeindex`.

Index entries are kept in memory (array module, bisect) and written to their files only when
the segment is sealed or the log is closed: they are rebuildable from the log file, so they are
never fsynced and the active segment's index is rebuilt by the recovery scan after a crash.

Offset index: (base offset of a batch − segment base: u32, file position: u32), one entry when
≥ index_interval_bytes were written since the previous one. Time index (Kafka's meaning):
(max timestamp so far: i64, relative offset of the batch holding it: u32), appended at the same
points when the running maximum grew, plus a final entry at seal so the last entry always
carries the segment's largest timestamp.

mmap and SIGBUS: segments are mapped lazily, on the first view of one of their regions. A
mapping never covers more than the bytes written when it was made, and those bytes never change
and are never cut while the file is open: appends only add, a failed append is undone only back
to its own start, and truncating into a segment copies the kept prefix into a new file renamed
over the old name (see `copy_prefix`); old mappings keep the old inode alive, so in-flight
regions stay readable. The active segment grows, so a view past its mapping maps it again
(the older mapping lives on while views hold it).
"""
from __future__ import annotations

import mmap
import os
import queue
import struct
import sys
import threading
from array import array
from bisect import bisect_right, bisect_left
from typing import Iterator

from ..protocol.errors import CorruptRecordError
from ..protocol.records import BATCH_HEADER_SIZE, BatchHeader, crc_ok, parse_batch_header

__all__ = ["LogSegment", "FileRegion", "segment_path"]

_INDEX_ENTRY = struct.Struct(">II")
MMAP_MIN_BYTES = 64 << 10
_TIME_ENTRY = struct.Struct(">qI")
_SCAN_CHUNK = 1 << 20
_HEADER_CHUNK = 8192
_PAGE = mmap.PAGESIZE
_MAX_REL = 0xFFFFFFFF
# The segment remembers where its last batches start (and their headers), so reads at the log
# end, which is where followers and caught-up consumers read, skip the index-and-scan lookup:
# with ~100-byte batches, a 4 KiB index interval meant parsing ~20 headers per fetch.
TAIL_BATCHES = 64


def segment_path(directory: str, base_offset: int, suffix: str = ".log") -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


class FileRegion:
    """Zero-copy slice of a segment file. Keeps the segment (and so its fd) alive."""

    __slots__ = ("segment", "position", "size")

    def __init__(self, segment: "LogSegment", position: int, size: int):
        self.segment = segment
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self.segment.fd

    def view(self) -> memoryview:
        """A zero-copy mmap slice of the segment (see the module doc on SIGBUS)."""
        return self.segment.view(self.position, self.size)

    def __repr__(self) -> str:
        return f"FileRegion({self.segment.base_offset}, pos={self.position}, size={self.size})"


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


_closing: "queue.SimpleQueue" = queue.SimpleQueue()
_closer_lock = threading.Lock()
_closer: threading.Thread | None = None


def _close_later(fd: int, mapping) -> None:
    """Close an unlinked segment's fd (and drop its mapping) on the closer thread, not the
    caller's (the event loop, where the last reference to a segment usually goes)."""
    global _closer
    _closing.put((fd, mapping))
    if _closer is None:
        with _closer_lock:
            if _closer is None:
                _closer = threading.Thread(target=_close_forever, name="kraftd-segment-closer", daemon=True)
                _closer.start()


def _close_forever() -> None:
    while True:
        fd, mapping = _closing.get()
        _close_fd(fd)
        del mapping  # (unmapped here, unless a view of it is still in flight)


class LogSegment:
    _fd_open = False  # (until __init__ opened the file: __del__ then has nothing to close)
    _unlinked = False  # see unlinked()

    def __init__(self, directory: str, base_offset: int, *, create: bool = False,
                 index_interval_bytes: int = 4096, use_mmap: bool = True, path: str | None = None):
        self.directory = directory
        self.base_offset = base_offset
        self.path = path or segment_path(directory, base_offset)  # `path`: a file to be renamed into place
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        self.fd = os.open(self.path, flags, 0o644)
        # Closed when the last reference (the log or an in-flight FileRegion) goes away, so a
        # region handed to sendfile can never see a recycled fd number (`__del__`, not a
        # weakref.finalize: that is three more objects a partition for every full collection).
        self._fd_open = True
        self.size = os.fstat(self.fd).st_size
        self.index_interval_bytes = index_interval_bytes
        self.use_mmap = use_mmap
        self.sealed = False
        self.cold_from: int | None = None  # replicated bytes from here: drop from the cache once durable
        self._map: mmap.mmap | None = None
        self._map_size = 0
        self.next_offset = base_offset  # exact for the active segment and after a scan
        self.reset_indexes()

    # -- indexes --------------------------------------------------------------------------
    def reset_indexes(self) -> None:
        # Arrays from the first entry on; until then the shared empty tuple (most partitions'
        # active segments have no entry, and an array is one more object for every full
        # garbage collection to visit).
        self.idx_rel: array | tuple = ()
        self.idx_pos: array | tuple = ()
        self.time_ts: array | tuple = ()
        self.time_rel: array | tuple = ()
        self.bytes_since_index = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # base offset of the batch holding max_timestamp
        self._rolling_ts: int | None = None  # see rolling_timestamp
        self.forget_tail()

    def forget_tail(self) -> None:
        # The last batches written, oldest first, and every batch after the first of them:
        # base offsets (for bisect) and (position, header).
        self._tail_bases: list[int] = []
        self._tail: list[tuple[int, BatchHeader]] = []

    def _remember_tail(self, placed) -> None:
        bases, tail = self._tail_bases, self._tail
        for pos, h in placed:
            bases.append(h.base_offset)
            tail.append((pos, h))
        if len(bases) > 2 * TAIL_BATCHES:
            del bases[:-TAIL_BATCHES], tail[:-TAIL_BATCHES]

    def _index_batch(self, pos: int, base_offset: int, max_timestamp: int, size: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self.bytes_since_index >= self.index_interval_bytes:
            if not self.idx_rel:
                self.idx_rel, self.idx_pos = array("I"), array("I")
            self.idx_rel.append(base_offset - self.base_offset)
            self.idx_pos.append(pos)
            self._maybe_time_entry()
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def _maybe_time_entry(self) -> None:
        if self.max_timestamp >= 0 and (not self.time_ts or self.max_timestamp > self.time_ts[-1]):
            if not self.time_ts:
                self.time_ts, self.time_rel = array("q"), array("I")
            self.time_ts.append(self.max_timestamp)
            self.time_rel.append(self.offset_of_max_timestamp - self.base_offset)

    def write_index_files(self) -> None:
        n = len(self.idx_rel)
        both = array("I", bytes(8 * n))
        if n:
            both[0::2] = self.idx_rel
            both[1::2] = self.idx_pos
        if sys.byteorder == "little":
            both.byteswap()
        _write_file(segment_path(self.directory, self.base_offset, ".index"), both.tobytes())
        tbuf = bytearray(_TIME_ENTRY.size * len(self.time_ts))
        for i, (ts, rel) in enumerate(zip(self.time_ts, self.time_rel)):
            _TIME_ENTRY.pack_into(tbuf, i * _TIME_ENTRY.size, ts, rel)
        _write_file(segment_path(self.directory, self.base_offset, ".timeindex"), tbuf)

    def load_index_files(self) -> bool:
        """Load indexes of a sealed segment; False if they are missing or look inconsistent."""
        try:
            with open(segment_path(self.directory, self.base_offset, ".index"), "rb") as f:
                raw = f.read()
            with open(segment_path(self.directory, self.base_offset, ".timeindex"), "rb") as f:
                traw = f.read()
        except FileNotFoundError:
            return False
        if len(raw) % 8 or len(traw) % _TIME_ENTRY.size or (self.size and not traw and self._has_timestamps_hint()):
            return False
        both = array("I", raw)
        if sys.byteorder == "little":
            both.byteswap()
        rel, pos = both[0::2], both[1::2]
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]:
                return False
        if len(pos) and pos[-1] + BATCH_HEADER_SIZE > self.size:
            return False
        ts, trel = array("q"), array("I")
        for t, r in _TIME_ENTRY.iter_unpack(traw):
            if ts and (t <= ts[-1] or r < trel[-1]):
                return False
            ts.append(t)
            trel.append(r)
        self.reset_indexes()
        self.idx_rel, self.idx_pos, self.time_ts, self.time_rel = rel, pos, ts, trel
        if len(pos):  # spot check: the last entry must point at the batch it names
            h = self._header_at(pos[-1])
            if h is None or h.base_offset != self.base_offset + rel[-1]:
                self.reset_indexes()
                return False
        if ts:
            self.max_timestamp = ts[-1]
            self.offset_of_max_timestamp = self.base_offset + trel[-1]
        return True

    def rolling_timestamp(self) -> int:
        """The first batch's largest timestamp, -1 if it has none or there is no batch: what
        segment.ms measures a segment's age from (Kafka's rollingBasedTimestamp)."""
        ts = self._rolling_ts
        if ts is None:
            h = self._header_at(0)
            ts = h.max_timestamp if h is not None else -1
            if h is not None:
                self._rolling_ts = ts
        return ts

    def _has_timestamps_hint(self) -> bool:
        h = self._header_at(0)
        return h is not None and h.max_timestamp >= 0

    # -- reading ----------------------------------------------------------------------------
    def read_bytes(self, pos: int, n: int):
        """Bytes at [pos, pos + n): a slice of the current mapping when it covers them (also
        for the active segment: mapped bytes never change), else a pread copy."""
        if pos + n <= self._map_size and self._map is not None:
            return memoryview(self._map)[pos:pos + n]
        if self.sealed and self.use_mmap and self._map is not None:
            return self.view(pos, n)
        return _pread_full(self.fd, n, pos)

    def view(self, pos: int, n: int) -> memoryview:
        """A zero-copy mmap slice for large reads; a pread copy for small ones (a few KB copy
        cheaper than a mapping, and each mapping holds a file descriptor of its own)."""
        if self.use_mmap and self.size:
            if self._map is not None and pos + n <= self._map_size:
                return memoryview(self._map)[pos:pos + n]
            if n >= MMAP_MIN_BYTES:
                self._map = mmap.mmap(self.fd, self.size, prot=mmap.PROT_READ)
                self._map_size = self.size
                return memoryview(self._map)[pos:pos + n]
        return memoryview(_pread_full(self.fd, n, pos))

    def region(self, pos: int, n: int) -> FileRegion:
        return FileRegion(self, pos, n)

    def _header_at(self, pos: int) -> BatchHeader | None:
        if pos + BATCH_HEADER_SIZE > self.size:
            return None
        try:
            return parse_batch_header(self.read_bytes(pos, BATCH_HEADER_SIZE))
        except CorruptRecordError:
            return None

    def iter_headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the batches in [start, end), trusting lengths (sealed data)."""
        end = self.size if end is None else end
        pos = start
        buf, buf_start = b"", start
        while pos + BATCH_HEADER_SIZE <= end:
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = self.read_bytes(pos, min(_HEADER_CHUNK, end - pos))
                buf_start, off = pos, 0
            h = parse_batch_header(buf, off)
            yield pos, h
            pos += h.size

    def lookup(self, offset: int) -> tuple[int, BatchHeader | None]:
        """Position and header of the batch containing `offset` (or the first after it)."""
        bases = self._tail_bases
        if bases and offset >= bases[0]:
            j = bisect_right(bases, offset) - 1
            pos, h = self._tail[j]
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
            return self._tail[j + 1] if j + 1 < len(bases) else (self.size, None)
        i = bisect_right(self.idx_rel, offset - self.base_offset) - 1
        start = self.idx_pos[i] if i >= 0 else 0
        for pos, h in self.iter_headers(start):
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
        return self.size, None

    def boundary_before(self, target_pos: int, start: int, start_offset: int) -> tuple[int, int]:
        """Largest batch boundary ≤ target_pos at or after `start`, and the offset there."""
        i = bisect_right(self.idx_pos, target_pos) - 1
        if i >= 0 and self.idx_pos[i] > start:
            pos, off = self.idx_pos[i], self.base_offset + self.idx_rel[i]
        else:
            pos, off = start, start_offset
        for p, h in self.iter_headers(pos, target_pos):
            if p + h.size > target_pos:
                break
            pos, off = p + h.size, h.next_offset
        return pos, off

    def time_lookup_start(self, timestamp: int) -> int:
        """An offset from which a scan for the first batch with max ts ≥ timestamp may start."""
        j = bisect_left(self.time_ts, timestamp) - 1
        return self.base_offset + self.time_rel[j] if j >= 0 else self.base_offset

    # -- writing ----------------------------------------------------------------------------
    def append(self, buf, placed: list[tuple[int, BatchHeader]]) -> None:
        """Write `buf` at the end (one pwrite) and index its batches: (position in buf, header
        as written). The page cache only: flush() fsyncs."""
        assert not self.sealed, "sealed segments are immutable (they may be mmapped)"
        start = self.size
        try:
            _pwrite_full(self.fd, buf, start)
        except BaseException:
            os.ftruncate(self.fd, start)  # drop a partial write (ENOSPC); mappings end at or before start
            raise
        self.size = start + len(buf)
        placed = [(start + pos, h) for pos, h in placed]
        for pos, h in placed:
            self._index_batch(pos, h.base_offset, h.max_timestamp, h.size)
        self._remember_tail(placed)

    def seal(self) -> None:
        self._maybe_time_entry()
        self.write_index_files()
        self.sealed = True

    def truncate_file(self, pos: int) -> None:
        """Cut the file (recovery at open only: nothing can have mapped it yet)."""
        assert self._map is None
        os.ftruncate(self.fd, pos)
        self.size = pos
        self._rolling_ts = None
        self.forget_tail()

    def fsync(self) -> None:
        os.fsync(self.fd)

    def drop_cached(self, start: int, end: int) -> None:
        """Tell the kernel bytes [start, end) (durable by now) will not be read soon, so their
        page-cache pages are freed and reused for the next writes. Advisory: errors ignored.

        Whole pages only: the page holding `end` is where the next append lands, and this
        kernel (6.18) drops a partial last page too, so that append would read it back from
        disk first, on the event loop (bench/README.md, (g))."""
        start -= start % _PAGE
        end -= end % _PAGE
        if end > start:
            try:
                os.posix_fadvise(self.fd, start, end - start, os.POSIX_FADV_DONTNEED)
            except (OSError, AttributeError):
                pass

    # -- recovery scan ------------------------------------------------------------------------
    def recover(self, check_crc: bool = True, gaps: bool = False) -> tuple[int, str | None, list[BatchHeader]]:
        """Scan every batch, rebuilding the indexes. Returns (valid bytes, reason the rest is
        invalid or None, headers of the valid batches). `gaps`: a batch may start past the end of
        the one before it (a compacted log), never before."""
        self.reset_indexes()
        headers: list[BatchHeader] = []
        pos, expected = 0, self.base_offset
        buf, buf_start = b"", 0
        reason = None
        while pos < self.size:
            left = self.size - pos
            if left < BATCH_HEADER_SIZE:
                reason = f"torn batch header ({left} bytes) at position {pos}"
                break
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf, buf_start, off = _pread_full(self.fd, min(_SCAN_CHUNK, left), pos), pos, 0
            try:
                h = parse_batch_header(buf, off)
            except CorruptRecordError as exc:
                reason = f"corrupt batch header at position {pos}: {exc}"
                break
            if h.magic != 2:
                reason = f"magic {h.magic} at position {pos}"
                break
            if h.size > left:
                reason = f"torn batch at position {pos}: {h.size} bytes claimed, {left} present"
                break
            if (h.base_offset < expected if gaps else h.base_offset != expected) or h.last_offset_delta < 0:
                reason = f"batch at position {pos} has offset {h.base_offset}, expected {expected}"
                break
            if check_crc:
                if off + h.size > len(buf):
                    buf, buf_start, off = _pread_full(self.fd, max(h.size, min(_SCAN_CHUNK, left)), pos), pos, 0
                if not crc_ok(buf, off, h):
                    reason = f"CRC mismatch in batch at offset {h.base_offset} (position {pos})"
                    break
            self._index_batch(pos, h.base_offset, h.max_timestamp, h.size)
            self._remember_tail(((pos, h),))
            headers.append(h)
            expected = h.next_offset
            pos += h.size
        self.next_offset = expected
        return pos, reason, headers

    # -- lifecycle ------------------------------------------------------------------------------
    def copy_prefix(self, pos: int, *, use_mmap: bool) -> "LogSegment":
        """A new, active segment holding bytes [0, pos) under this segment's file name.
        The old file is replaced by rename, never truncated (it may be mapped)."""
        tmp = self.path + ".trunc"
        self._copy_to(tmp, pos)
        os.replace(tmp, self.path)
        seg = LogSegment(self.directory, self.base_offset,
                         index_interval_bytes=self.index_interval_bytes, use_mmap=use_mmap)
        seg.recover(check_crc=False)
        return seg

    def copy_prefix_aside(self, pos: int, *, use_mmap: bool) -> "LogSegment":
        """The first half of copy_prefix, safe on any thread (bytes [0, pos) never change): a
        segment holding them in `<name>.log.trunc`, durable and scanned, for `renamed_into_place`."""
        tmp = self.path + ".trunc"
        self._copy_to(tmp, pos)
        seg = LogSegment(self.directory, self.base_offset, index_interval_bytes=self.index_interval_bytes,
                         use_mmap=use_mmap, path=tmp)
        seg.recover(check_crc=False)
        return seg

    def renamed_into_place(self) -> None:
        """A segment made by copy_prefix_aside replaces the file of its base offset (by rename)."""
        final = segment_path(self.directory, self.base_offset)
        os.replace(self.path, final)
        self.path = final

    def _copy_to(self, tmp: str, pos: int) -> None:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            copied = 0
            while copied < pos:
                n = os.copy_file_range(self.fd, fd, pos - copied, copied, copied)
                if n == 0:
                    raise OSError(f"short copy of {self.path}")
                copied += n
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self) -> None:
        for suffix in (".log", ".index", ".timeindex"):
            try:
                os.unlink(segment_path(self.directory, self.base_offset, suffix))
            except FileNotFoundError:
                pass
        self.unlinked()

    def unlinked(self) -> None:
        """The file has no name any more (deleted, or another renamed over it): its last close
        frees its blocks, which takes the filesystem ~5 ms per MB here (71 ms for a 16 MB
        segment), so that close is left to a thread (see `_close_later`)."""
        self._unlinked = True
        self._map = None  # unmapped once in-flight regions drop their views

    def close(self) -> None:
        self._map = None
        self._release_fd()

    def _release_fd(self) -> None:
        if self._fd_open:
            self._fd_open = False
            if self._unlinked:
                _close_later(self.fd, self.__dict__.pop("_map", None))
            else:
                _close_fd(self.fd)

    def __del__(self) -> None:
        self._release_fd()

    def __copy__(self) -> "LogSegment":
        """The same segment without owning its fd (the original closes it)."""
        other = object.__new__(LogSegment)
        other.__dict__.update(self.__dict__)
        other._fd_open = False
        return other

    def __repr__(self) -> str:
        return f"LogSegment({self.base_offset}, size={self.size}, sealed={self.sealed})"


def _pread_full(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = os.pread(fd, n - got, pos + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _pwrite_full(fd: int, buf, pos: int) -> None:
    view = memoryview(buf)
    while view:
        n = os.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


def _write_file(path: str, data) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _pwrite_full(fd, data, 0)
    finally:
        os.close(fd)
