"""A partition's segment files read offline, batch by batch, with everything wrong in them named.

`LogSegment` opens files read-write and stops at the first bad batch (that is recovery's job:
keep the valid prefix). A reader that only reports — `kraftd verify`, the cluster tests'
replica logs — needs the opposite: never write, and say what is wrong and where, going on
past a bad CRC as long as the batch lengths still frame the file.

    for segment in list_segments(directory):
        scan = scan_segment(read_file(segment.path), path=segment.path, base_offset=segment.base_offset)
        scan.batches    # (position, header, crc_ok) of every framed batch, in file order
        scan.problems   # ScanProblem(kind, position, offset, message)

Problem kinds: "torn" (the file ends inside a batch header or a batch), "header" (a length
below the minimum, or a negative offset delta), "magic" (not 2) — the walk cannot go on past
"torn", "header" lengths and "magic" — then "crc", "gap" (a batch starts after the offset the
previous one ended at), "backwards" (it starts before it) and "count" (a record count that
disagrees with the offset delta).
"""
from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ..protocol.errors import CorruptRecordError
from ..protocol.records import BATCH_HEADER_SIZE, MAGIC, BatchHeader, crc_ok, parse_batch_header

__all__ = ["SegmentFile", "ScannedBatch", "ScanProblem", "SegmentScan", "list_segments", "read_file",
           "scan_segment", "SEGMENT_NAME"]

SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_MIN_BATCH_SIZE = BATCH_HEADER_SIZE  # a batch with no records


class SegmentFile(NamedTuple):
    base_offset: int
    path: str


class ScannedBatch(NamedTuple):
    position: int
    header: BatchHeader
    crc_ok: bool


class ScanProblem(NamedTuple):
    kind: str      # see the module doc
    position: int  # byte position in the file
    offset: int    # the batch's base offset; where no header could be read, the next expected offset
    message: str


@dataclass
class SegmentScan:
    path: str
    base_offset: int
    size: int
    batches: list[ScannedBatch] = field(default_factory=list)
    problems: list[ScanProblem] = field(default_factory=list)
    end_offset: int = 0  # the offset after the last framed batch (base_offset if none)
    end_position: int = 0  # where the framed batches end (the file size unless the walk stopped)

    @property
    def recovery_keeps(self) -> int:
        """Bytes a recovery scan (`LogSegment.recover`) keeps: everything before the first problem
        it checks for (all but "count")."""
        return min((p.position for p in self.problems if p.kind != "count"), default=self.size)


def list_segments(directory: str | os.PathLike) -> list[SegmentFile]:
    """The `<20-digit base offset>.log` files of a partition directory, by base offset."""
    directory = os.fspath(directory)
    found = []
    for name in os.listdir(directory):
        match = SEGMENT_NAME.match(name)
        if match:
            found.append(SegmentFile(int(match.group(1)), os.path.join(directory, name)))
    return sorted(found)


def read_file(path: str | os.PathLike, *, mapped: bool = True):
    """The file's bytes: a read-only mmap (no copy; the file must not shrink while it is read,
    which holds for a stopped node and for segments, which a running node only appends to or
    replaces by rename) or, with mapped=False, a copy."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if not mapped or size == 0:
            return f.read()
        return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


def scan_segment(buf, *, path: str, base_offset: int, expected_offset: int | None = None) -> SegmentScan:
    """Walk every batch of a segment (or snapshot) file held in `buf`.

    `expected_offset` is where the first batch should start (default: `base_offset`, the
    offset the file is named after); each later one should start where its predecessor ended."""
    scan = SegmentScan(path, base_offset, len(buf))
    expected = base_offset if expected_offset is None else expected_offset
    pos, end = 0, len(buf)
    while pos < end:
        left = end - pos
        if left < BATCH_HEADER_SIZE:
            scan.problems.append(ScanProblem("torn", pos, expected,
                                             f"torn batch header: {left} bytes at position {pos}"))
            break
        try:
            h = parse_batch_header(buf, pos)
        except CorruptRecordError as exc:
            scan.problems.append(ScanProblem("header", pos, expected,
                                             f"unreadable batch header at position {pos}: {exc}"))
            break
        if h.size < _MIN_BATCH_SIZE:
            scan.problems.append(ScanProblem("header", pos, h.base_offset,
                                             f"batch at position {pos} claims {h.size} bytes, below the minimum"))
            break
        if h.magic != MAGIC:
            scan.problems.append(ScanProblem("magic", pos, h.base_offset, f"magic {h.magic} at position {pos}"))
            break
        if h.size > left:
            scan.problems.append(ScanProblem("torn", pos, h.base_offset,
                                             f"torn batch at position {pos}: {h.size} bytes claimed, {left} present"))
            break
        ok = crc_ok(buf, pos, h)
        if not ok:
            scan.problems.append(ScanProblem("crc", pos, h.base_offset,
                                             f"CRC mismatch in batch at offset {h.base_offset} (position {pos})"))
        if h.base_offset > expected:
            scan.problems.append(ScanProblem("gap", pos, h.base_offset,
                                             f"batch at position {pos} starts at offset {h.base_offset}, expected "
                                             f"{expected}: offsets {expected}..{h.base_offset - 1} are missing"))
        elif h.base_offset < expected:
            scan.problems.append(ScanProblem("backwards", pos, h.base_offset,
                                             f"batch at position {pos} starts at offset {h.base_offset}, below "
                                             f"the previous batch's end {expected}"))
        if h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
            # A negative delta stops recovery (LogSegment.recover); a count mismatch alone does not.
            scan.problems.append(ScanProblem("header" if h.last_offset_delta < 0 else "count", pos, h.base_offset,
                                             f"batch at offset {h.base_offset} (position {pos}) has "
                                             f"{h.records_count} records but last offset delta {h.last_offset_delta}"))
        scan.batches.append(ScannedBatch(pos, h, ok))
        expected = h.next_offset
        pos += h.size
    scan.end_offset = scan.batches[-1].header.next_offset if scan.batches else base_offset
    scan.end_position = pos
    return scan
