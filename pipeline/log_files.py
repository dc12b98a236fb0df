"""Reading a kraftd data dir without a server: partition directories, segments, splits.

Pure Python (no pyspark): `format("kraftd-log")`, `format("kraftd-snapshot")` and the jobs plan
and read with it. A data dir holds `<topic>-<p>/` directories of `<base>.log` segments with
sparse `.index` files (8-byte entries: relative offset, file position); large segments are
split at index entries, which always sit at batch boundaries. A compacted topic's log has
offset gaps where its cleaner removed records (read as they are: a reader sees the offsets
that remain). The active (last) segment may
end in a torn batch after a crash: reading stops there, as recovery truncates there.
"""
from __future__ import annotations

import logging
import mmap
import os
import re
import struct
from dataclasses import dataclass

from ..protocol.compression import decompress
from ..protocol.errors import CorruptRecordError
from ..protocol.records import BATCH_HEADER_SIZE, crc_ok, parse_batch_header
from ..storage.snapshots import SnapshotReader, parse_snapshot_filename, snapshot_filename

__all__ = ["SegmentSplit", "PartitionDir", "partition_dirs", "plan_segment_splits", "iter_split_batches",
           "latest_snapshot_path", "snapshot_splits", "iter_snapshot_batches", "records_section_size"]

log = logging.getLogger("kraftd.pipeline")
_DIR = re.compile(r"^(.+)-(\d+)$")
_INDEX_ENTRY = struct.Struct(">II")
DEFAULT_SPLIT_BYTES = 64 << 20


@dataclass(frozen=True)
class PartitionDir:
    path: str
    topic: str
    partition: int

    @property
    def log_start_offset(self) -> int:
        try:
            with open(os.path.join(self.path, "log-start-offset"), encoding="ascii") as f:
                return int(f.read().strip())
        except (FileNotFoundError, ValueError):
            return 0

    @property
    def compacted(self) -> bool:
        """A compacted topic's log (its `compacted` marker, storage/file_log.py): offsets may be
        missing between batches, where the cleaner removed records."""
        return os.path.exists(os.path.join(self.path, "compacted"))

    def segment_bases(self) -> list[int]:
        return sorted(int(n[:-4]) for n in os.listdir(self.path) if n.endswith(".log") and n[:-4].isdigit())


@dataclass(frozen=True)
class SegmentSplit:
    """Bytes [start, end) of one segment file (end None: to the end of the file)."""
    path: str
    topic: str
    partition: int
    base_offset: int
    start: int
    end: int | None
    active: bool          # the partition's last segment: a torn tail is expected, not an error
    log_start: int
    gaps: bool = False    # a compacted log: a batch may start past where the one before ended


def _as_partition_dir(path: str) -> PartitionDir | None:
    m = _DIR.match(os.path.basename(os.path.normpath(path)))
    if m is None or not os.path.isdir(path):
        return None
    if not any(n.endswith(".log") or n.endswith(".checkpoint") for n in os.listdir(path)):
        return None
    return PartitionDir(path, m.group(1), int(m.group(2)))


def partition_dirs(path: str) -> list[PartitionDir]:
    """A data dir's partition directories, or `path` itself if it is one."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: not a directory")
    own = _as_partition_dir(path)
    if own is not None:
        return [own]
    found = [d for n in sorted(os.listdir(path)) if (d := _as_partition_dir(os.path.join(path, n))) is not None]
    return sorted(found, key=lambda d: (d.topic, d.partition))


def _index_positions(path: str, base: int) -> list[int]:
    try:
        with open(os.path.join(path, f"{base:020d}.index"), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    return [pos for _, pos in _INDEX_ENTRY.iter_unpack(raw[:len(raw) - len(raw) % 8])]


def plan_segment_splits(directory: PartitionDir, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[SegmentSplit]:
    """One split per segment; segments larger than `split_bytes` cut at index entries."""
    bases = directory.segment_bases()
    log_start = directory.log_start_offset
    gaps = directory.compacted
    out = []
    for i, base in enumerate(bases):
        active = i == len(bases) - 1
        if not active and bases[i + 1] <= log_start:
            continue  # wholly below the log start
        path = os.path.join(directory.path, f"{base:020d}.log")
        size = os.path.getsize(path)
        if size == 0:
            continue
        cuts = [0]
        if size > split_bytes:
            for pos in _index_positions(directory.path, base):
                if pos - cuts[-1] >= split_bytes and size - pos >= split_bytes // 4 and pos < size:
                    cuts.append(pos)
        for j, start in enumerate(cuts):
            end = cuts[j + 1] if j + 1 < len(cuts) else None
            out.append(SegmentSplit(path, directory.topic, directory.partition, base, start, end, active, log_start,
                                    gaps))
    return out


def _map(path: str):
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""


def iter_split_batches(split: SegmentSplit):
    """(view of the batch, header) for each valid batch of the split. Stops at a torn or
    corrupt batch of the active segment (recovery truncates there); raises on one in a
    sealed segment."""
    buf = _map(split.path)
    view = memoryview(buf)
    size = len(view)
    end = size if split.end is None else min(split.end, size)
    pos = split.start
    expected = split.base_offset if split.start == 0 else None
    while pos < end:
        reason = None
        if size - pos < BATCH_HEADER_SIZE:
            reason = f"torn batch header ({size - pos} bytes)"
        else:
            try:
                h = parse_batch_header(view, pos)
            except CorruptRecordError as exc:
                h, reason = None, str(exc)
            if h is not None:
                if h.magic != 2:
                    reason = f"magic {h.magic}"
                elif pos + h.size > size:
                    reason = f"torn batch: {h.size} bytes claimed, {size - pos} present"
                elif expected is not None and (h.base_offset < expected or h.base_offset > expected and not split.gaps):
                    reason = f"offset {h.base_offset}, expected {expected}"
                elif not crc_ok(view, pos, h):
                    reason = "CRC mismatch"
        if reason is not None:
            where = f"{split.path} at position {pos}"
            if split.active:
                log.warning("%s: %s; the rest of the active segment is skipped, as recovery would truncate it",
                            where, reason)
                return
            raise CorruptRecordError(f"{where}: {reason} in a sealed segment (start kraftd once to recover the log)")
        yield view[pos:pos + h.size], h
        expected = h.next_offset
        pos += h.size


def records_section_size(batch, header) -> int:
    """Bytes of the batch's records section once decompressed."""
    section = bytes(batch[BATCH_HEADER_SIZE:header.size])
    codec = header.attributes & 0x07
    return len(decompress(codec, section)) if codec else len(section)


# -- snapshots ------------------------------------------------------------------------------------

def latest_snapshot_path(path: str) -> str:
    """`path` if it is a checkpoint file, else the newest `.checkpoint` in the directory."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return path
    ids = sorted(sid for n in os.listdir(path) if (sid := parse_snapshot_filename(n)) is not None)
    if not ids:
        raise FileNotFoundError(f"{path}: no .checkpoint file")
    return os.path.join(path, snapshot_filename(ids[-1]))


def snapshot_splits(path: str, split_bytes: int = DEFAULT_SPLIT_BYTES) -> list[tuple[str, int, int, list]]:
    """Validate the snapshot (every CRC, header, footer) and cut its data batches into splits:
    (path, end offset, epoch, [(position, size), ...])."""
    reader = SnapshotReader.open(path)
    sid = reader.snapshot_id
    end_offset, epoch = (sid.end_offset, sid.epoch) if sid else (-1, -1)
    splits, current, current_bytes = [], [], 0
    for pos, header in reader.data_batches():
        current.append((pos, header.size))
        current_bytes += header.size
        if current_bytes >= split_bytes:
            splits.append((path, end_offset, epoch, current))
            current, current_bytes = [], 0
    if current or not splits:
        splits.append((path, end_offset, epoch, current))
    return splits


def iter_snapshot_batches(path: str, positions: list):
    buf = _map(path)
    view = memoryview(buf)
    for pos, size in positions:
        yield view[pos:pos + size], parse_batch_header(view, pos)
