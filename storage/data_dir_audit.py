"""`kraftd verify`: an offline audit of one or more nodes' data dirs. Reads, never writes.

Per partition directory (`<topic>-<partition>/`):

- every segment, batch by batch (`segment_files.scan_segment`): framing, magic, CRC32C,
  offsets contiguous within and across segments, record counts; every record of a batch whose
  CRC holds is decoded (`check_records`), as Produce validates them; batch leader epochs never
  go backwards;
- `.index` entries: increasing, and each names a position where a batch with exactly that
  offset starts; `.timeindex` entries: increasing, and each names a batch whose max timestamp
  it holds;
- `leader-epoch-checkpoint`: Kafka's text format, epochs and start offsets strictly increasing,
  and below the recovery point (where the file must be current, see FileLog.flush) every
  batch's leader epoch is the one the checkpoint gives for its offset;
- `log-start-offset`, `recovery-point`, KIP-630 `*.checkpoint` snapshots (every CRC, header
  first, footer last: `SnapshotReader`), leftovers of crashes (`.part`, `.deleted`, `.tmp`,
  the cleaner's `.cleaned` and `.swap`);
- the log reaches the high watermark `replication-offset-checkpoint` records for it.

Per data dir: the JSON state files parse, `replication-offset-checkpoint` parses.

Across data dirs (`compare_replicas`): every partition held by two or more of them is compared
from the largest log start up to the smallest checkpointed HW, batch by batch (replicas copy
the leader's batches byte for byte), and where two batches differ, record by record; the first
offset where a replica differs is reported with each replica's file and byte position. The HW
checkpoint is a lower bound of the true HW (the server rewrites it every few seconds, and an HW
only grows), so everything compared was committed: replicas must agree there. A partition some
dir has no checkpointed HW for is not compared, and a note says so. A compacted topic's replicas
(cleanup.policy=compact in topics.json) clean on their own: there the latest value of each key
below the HW is compared instead (`compare_latest_values`), and offset gaps in a log are its
cleaner's work, not problems.

Findings fail the audit. Notes do not: they are states a crash leaves and startup repairs
without losing anything flushed — a torn tail in the last segment past the recovery point (an
unfinished write that recovery truncates), index problems in the active segment after an
unclean shutdown (recovery rebuilds those indexes), missing index files, leftover temporary
files, epoch-checkpoint entries past the log end (recovery drops them).
"""
from __future__ import annotations

import bisect
import json
import os
import re
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from ..protocol.records import BatchHeader, check_records, decode_records

from .forced_recovery import DISCARDED_PREFIX
from .file_log import (EPOCH_CHECKPOINT_FILE, LOG_START_FILE, PRODUCER_SNAPSHOT_FILE, RECOVERY_POINT_FILE,
                       RETAINED_PRODUCERS_FILE)
from .meta_properties import META_PROPERTIES, MetaPropertiesError, read_meta_properties
from .replication_offset_checkpoint import (REPLICATION_OFFSET_CHECKPOINT_FILE, CheckpointFormatError,
                                            read_replication_offsets)
from .segment_files import ScannedBatch, SegmentScan, list_segments, read_file, scan_segment
from .snapshots import DELETED_SUFFIX, PART_SUFFIX, SnapshotReader, parse_snapshot_filename

__all__ = ["Finding", "PartitionAudit", "DataDirAudit", "AuditResult", "audit_data_dirs", "audit_data_dir",
           "compare_replicas"]

FINDING, NOTE = "finding", "note"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_INDEX_ENTRY = struct.Struct(">II")      # relative offset, position (segment.py)
_TIME_ENTRY = struct.Struct(">qI")       # max timestamp so far, relative offset of its batch
_RECOVERY_POINT = struct.Struct(">qBI")  # offset, clean flag, crc32 of the first 9 bytes (file_log.py)
_STATE_FILES = ("topics.json", "quorum-state", "producer-id-block")
_MAX_REPORTED_PER_FILE = 5
_CLEANED_SHAPES = ("gap", "count")  # what a compacted log's cleaned batches look like (segment_files.py)
_ACTIVE_INDEX_NOTE = " (the active segment's indexes are rebuilt by recovery after an unclean shutdown)"


@dataclass(frozen=True)
class Finding:
    check: str           # segment, records, index, timeindex, leader-epoch-checkpoint, snapshot, replicas, ...
    path: str            # the file at fault
    message: str
    partition: str | None = None   # "<topic>-<partition>"
    offset: int | None = None      # the offset concerned, or the base offset of the batch holding it
    position: int | None = None    # byte position in `path`
    severity: str = FINDING        # or NOTE: reported, but does not fail the audit

    def __str__(self) -> str:
        where = [self.path]
        if self.partition is not None:
            where.append(f"partition {self.partition}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        if self.position is not None:
            where.append(f"position {self.position}")
        return f"{self.severity.upper()} [{self.check}] {', '.join(where)}: {self.message}"


@dataclass
class PartitionAudit:
    name: str
    directory: str
    segments: list[SegmentScan]
    log_start: int
    log_end: int
    high_watermark: int | None  # from the data dir's replication-offset-checkpoint
    compacted: bool = False     # cleanup.policy=compact[,delete] in the data dir's topics.json


@dataclass
class DataDirAudit:
    data_dir: str
    partitions: dict[str, PartitionAudit] = field(default_factory=dict)
    high_watermarks: dict | None = None  # None: no readable replication-offset-checkpoint
    findings: list[Finding] = field(default_factory=list)


@dataclass
class AuditResult:
    data_dirs: list[DataDirAudit]
    findings: list[Finding]  # every finding and note, data dirs first, then the replica comparison
    partitions_compared: int = 0

    @property
    def failed(self) -> bool:
        return any(f.severity == FINDING for f in self.findings)

    def summary(self) -> str:
        n_find = sum(f.severity == FINDING for f in self.findings)
        n_note = len(self.findings) - n_find
        partitions = sum(len(d.partitions) for d in self.data_dirs)
        segments = sum(len(p.segments) for d in self.data_dirs for p in d.partitions.values())
        batches = sum(len(s.batches) for d in self.data_dirs for p in d.partitions.values() for s in p.segments)
        return (f"{n_find} findings, {n_note} notes: {len(self.data_dirs)} data dirs, {partitions} partitions, "
                f"{segments} segments, {batches} batches checked; {self.partitions_compared} partitions "
                f"compared across replicas below their high watermark")


def audit_data_dirs(data_dirs: Iterable, *, check_record_contents: bool = True) -> AuditResult:
    audits = [audit_data_dir(d, check_record_contents=check_record_contents) for d in data_dirs]
    findings = [f for a in audits for f in a.findings]
    compared = 0
    if len(audits) > 1:
        replica_findings, compared = compare_replicas(audits)
        findings += replica_findings
    return AuditResult(audits, findings, compared)


# -- one data dir -----------------------------------------------------------------------------------
def audit_data_dir(data_dir, *, check_record_contents: bool = True) -> DataDirAudit:
    data_dir = os.fspath(data_dir)
    audit = DataDirAudit(data_dir)
    out = audit.findings
    if not os.path.isdir(data_dir):
        out.append(Finding("data-dir", data_dir, "not a directory"))
        return audit
    hw_path = os.path.join(data_dir, REPLICATION_OFFSET_CHECKPOINT_FILE)
    try:
        audit.high_watermarks = read_replication_offsets(hw_path)
    except FileNotFoundError:
        out.append(Finding("replication-offset-checkpoint", hw_path,
                           "missing: no high watermark is known, so logs are not checked against one and "
                           "replicas are not compared", severity=NOTE))
    except CheckpointFormatError as exc:
        out.append(Finding("replication-offset-checkpoint", hw_path, str(exc.what) + f" (line {exc.line})"))
    for name in _STATE_FILES:
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            _check_json(path, None, out)
    try:
        read_meta_properties(data_dir)
    except MetaPropertiesError as exc:
        out.append(Finding("meta.properties", os.path.join(data_dir, META_PROPERTIES), str(exc)))
    compacted = _compacted_topics(data_dir)
    for name in sorted(os.listdir(data_dir)):
        directory = os.path.join(data_dir, name)
        match = _PARTITION_DIR.match(name)
        if match is None or not os.path.isdir(directory) or name.startswith(DISCARDED_PREFIX):
            continue  # (what an unclean recovery set aside is no longer this node's data)
        key = (match.group(1), int(match.group(2)))
        hw = audit.high_watermarks.get(key) if audit.high_watermarks is not None else None
        audit.partitions[name] = _audit_partition(directory, name, hw, out, check_record_contents,
                                                  compacted=key[0] in compacted)
    return audit


def _compacted_topics(data_dir: str) -> set[str]:
    """The topics topics.json gives a compacting cleanup.policy (its own problems are reported
    by the state-file check)."""
    try:
        with open(os.path.join(data_dir, "topics.json"), "rb") as f:
            topics = json.loads(f.read()).get("topics", {})
        return {name for name, t in topics.items() if "compact" in str(t.get("configs", {}).get("cleanup.policy", ""))}
    except (OSError, ValueError, AttributeError):
        return set()


def _check_json(path: str, partition: str | None, out: list[Finding]) -> None:
    try:
        with open(path, "rb") as f:
            json.loads(f.read())
    except (ValueError, UnicodeDecodeError) as exc:
        out.append(Finding("state-file", path, f"not valid JSON: {exc}", partition))


class _RecoveryPoint:
    def __init__(self, offset: int, clean: bool) -> None:
        self.offset, self.clean = offset, clean


def _audit_partition(directory: str, name: str, hw: int | None, out: list[Finding],
                     check_record_contents: bool, compacted: bool = False) -> PartitionAudit:
    """`compacted`: the log cleaner leaves offset gaps between batches and inside them
    (storage/cleaner.py), so those are not problems here."""
    files = set(os.listdir(directory))
    log_start_file = _read_log_start(directory, name, out)
    rp = _read_recovery_point(directory, name, out)
    segments = list_segments(directory)
    scans: list[SegmentScan] = []
    prev_end: int | None = None
    top_epoch, top_epoch_at = -1, None  # the highest batch leader epoch so far, and the last batch with it
    # FileLog._open rescans the segments from the one holding the recovery point on, and none
    # after a clean shutdown (unless their index files look wrong).
    bases = [s.base_offset for s in segments]
    first_rescanned = max(0, bisect.bisect_right(bases, rp.offset) - 1) if rp is not None else 0
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        buf = read_file(segment.path)
        scan = scan_segment(buf, path=segment.path, base_offset=segment.base_offset)
        scans.append(scan)
        if prev_end is not None and (segment.base_offset < prev_end if compacted else segment.base_offset != prev_end):
            out.append(Finding("segment", segment.path, f"the segment is named for offset {segment.base_offset} "
                               f"but the previous segment ends at offset {prev_end}", name, segment.base_offset, 0))
        prev_end = scan.end_offset
        rescanned = (rp is None or not rp.clean) and (i >= first_rescanned or last)
        for problem in scan.problems:
            if not (compacted and problem.kind in _CLEANED_SHAPES):
                out.append(_segment_problem(scan, problem, name, last, rescanned, rp, hw))
        for b in scan.batches:
            h = b.header
            if check_record_contents and b.crc_ok:
                try:
                    check_records(memoryview(buf)[b.position:b.position + h.size], h)
                except Exception as exc:  # any decoder error: the audit reports, never crashes
                    out.append(Finding("records", segment.path, f"batch {h.base_offset}..{h.last_offset}: records "
                                       f"unreadable although the CRC holds: {exc}", name, h.base_offset, b.position))
            epoch = h.partition_leader_epoch
            if 0 <= epoch < top_epoch:
                out.append(Finding("segment", segment.path, f"batch {h.base_offset}..{h.last_offset} has leader "
                                   f"epoch {epoch}, below epoch {top_epoch} of the batch at offset {top_epoch_at}",
                                   name, h.base_offset, b.position))
            elif epoch >= top_epoch:
                top_epoch, top_epoch_at = epoch, h.base_offset
        index_severity = NOTE if last and not (rp is not None and rp.clean) else FINDING
        _check_offset_index(scan, name, index_severity, out)
        _check_time_index(scan, name, index_severity, out)
    log_end = scans[-1].end_offset if scans else (log_start_file or 0)
    log_start = max(log_start_file or 0, segments[0].base_offset if segments else 0)
    if log_start_file is not None and log_start_file > log_end:
        out.append(Finding("log-start-offset", os.path.join(directory, LOG_START_FILE),
                           f"log start {log_start_file} is past the log end {log_end}: recovery empties the log and "
                           f"starts it there", name, log_start_file, severity=NOTE))
    _check_epoch_checkpoint(directory, name, scans, log_start, log_end, rp, out)
    _check_snapshots(directory, name, files, out, check_record_contents)
    _check_leftovers(directory, name, files, out)
    for state_file in (PRODUCER_SNAPSHOT_FILE, RETAINED_PRODUCERS_FILE):
        if state_file in files:
            _check_json(os.path.join(directory, state_file), name, out)
    if hw is not None and hw > log_end:
        out.append(Finding("high-watermark", scans[-1].path if scans else directory,
                           f"the log ends at offset {log_end}, below the high watermark {hw} in "
                           f"{REPLICATION_OFFSET_CHECKPOINT_FILE}: committed records are missing", name, log_end,
                           scans[-1].end_position if scans else None))
    return PartitionAudit(name, directory, scans, log_start, log_end, hw, compacted)


def _segment_problem(scan: SegmentScan, problem, name: str, last: bool, rescanned: bool,
                     rp: _RecoveryPoint | None, hw: int | None) -> Finding:
    message = problem.message
    severity = FINDING
    if problem.position == scan.recovery_keeps:
        if rescanned:
            message += f"; recovery keeps the first {problem.position} bytes and truncates the other " \
                       f"{scan.size - problem.position}" + ("" if last else ", and deletes every later segment")
        else:
            message += ("; startup does not rescan this segment (" + ("clean shutdown" if rp.clean else
                        f"below the recovery point {rp.offset}") + "), so the node would keep and serve it")
    if problem.kind == "torn" and last:
        unflushed = rp is not None and not rp.clean and problem.offset >= rp.offset
        if unflushed and (hw is None or problem.offset >= hw):
            severity = NOTE
            message += f" (an unfinished write past the recovery point {rp.offset}: nothing flushed is lost)"
        elif rp is None:
            message += " (no readable recovery point: cannot tell whether it was flushed)"
        else:
            message += (" after a clean shutdown" if rp.clean else
                        f" below the recovery point {rp.offset} or the high watermark {hw}: flushed data is lost")
    return Finding("segment", scan.path, message, name, problem.offset, problem.position, severity)


def _read_log_start(directory: str, name: str, out: list[Finding]) -> int | None:
    path = os.path.join(directory, LOG_START_FILE)
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii").strip()
        value = int(text)
        if value < 0:
            raise ValueError(f"negative offset {value}")
        return value
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as exc:
        out.append(Finding("log-start-offset", path, f"unreadable: {exc}", name))
        return None


def _read_recovery_point(directory: str, name: str, out: list[Finding]) -> _RecoveryPoint | None:
    path = os.path.join(directory, RECOVERY_POINT_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        offset, clean, crc = _RECOVERY_POINT.unpack(raw)
    except struct.error:
        crc, offset, clean = None, 0, 0
    if crc is None or zlib.crc32(raw[:9]) != crc:
        # Written in place without fsync: a torn write is expected after a crash (FileLog).
        out.append(Finding("recovery-point", path, "unreadable (torn write or bad CRC): recovery scans every segment",
                           name, severity=NOTE))
        return None
    return _RecoveryPoint(offset, bool(clean))


# -- indexes ----------------------------------------------------------------------------------------
def _index_entries(path: str, entry: struct.Struct, name: str, severity: str, out: list[Finding]):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    whole = len(raw) - len(raw) % entry.size
    if whole != len(raw):
        out.append(Finding(os.path.splitext(path)[1][1:], path, f"size {len(raw)} is not a multiple of "
                           f"{entry.size}: {len(raw) - whole} trailing bytes", name, None, whole, severity))
    return list(entry.iter_unpack(raw[:whole]))


def _missing_index(path: str, name: str, out: list[Finding]) -> None:
    out.append(Finding(os.path.splitext(path)[1][1:], path, "missing: recovery rebuilds it from the segment", name,
                       severity=NOTE))


def _report_capped(bad: list[Finding], out: list[Finding]) -> None:
    out.extend(bad[:_MAX_REPORTED_PER_FILE])
    if len(bad) > _MAX_REPORTED_PER_FILE:
        f = bad[_MAX_REPORTED_PER_FILE]
        out.append(Finding(f.check, f.path, f"and {len(bad) - _MAX_REPORTED_PER_FILE} more bad entries", f.partition,
                           severity=f.severity))


def _check_offset_index(scan: SegmentScan, name: str, severity: str, out: list[Finding]) -> None:
    path = scan.path[:-len(".log")] + ".index"
    entries = _index_entries(path, _INDEX_ENTRY, name, severity, out)
    if entries is None:
        if scan.size:
            _missing_index(path, name, out)
        return
    at_position = {b.position: b.header.base_offset for b in scan.batches}
    note = _ACTIVE_INDEX_NOTE if severity == NOTE else ""
    bad = []
    prev_rel = prev_pos = -1
    for i, (rel, pos) in enumerate(entries):
        offset = scan.base_offset + rel
        if rel <= prev_rel or pos <= prev_pos:
            what = f"does not come after entry {i - 1} (offset {scan.base_offset + prev_rel} -> position {prev_pos})"
        elif pos not in at_position:
            what = ("points past the end of the segment" if pos >= scan.size else "points where no batch starts")
        elif at_position[pos] != offset:
            what = f"points at the batch with base offset {at_position[pos]}"
        else:
            what = None
        if what is not None:
            bad.append(Finding("index", path, f"entry {i} maps offset {offset} to segment position {pos} but {what}"
                               + note, name, offset, i * _INDEX_ENTRY.size, severity))
        prev_rel, prev_pos = rel, pos
    _report_capped(bad, out)


def _check_time_index(scan: SegmentScan, name: str, severity: str, out: list[Finding]) -> None:
    path = scan.path[:-len(".log")] + ".timeindex"
    entries = _index_entries(path, _TIME_ENTRY, name, severity, out)
    if entries is None:
        if scan.size:
            _missing_index(path, name, out)
        return
    by_offset = {b.header.base_offset: b.header for b in scan.batches}
    note = _ACTIVE_INDEX_NOTE if severity == NOTE else ""
    bad = []
    prev_ts, prev_rel = None, -1
    for i, (ts, rel) in enumerate(entries):
        offset = scan.base_offset + rel
        h = by_offset.get(offset)
        if prev_ts is not None and (ts <= prev_ts or rel < prev_rel):
            what = f"does not come after entry {i - 1} (timestamp {prev_ts}, offset {scan.base_offset + prev_rel})"
        elif h is None:
            what = "no batch starts at that offset"
        elif h.max_timestamp != ts:
            what = f"the batch there has max timestamp {h.max_timestamp}"
        else:
            what = None
        if what is not None:
            bad.append(Finding("timeindex", path, f"entry {i} maps timestamp {ts} to offset {offset} but {what}" + note,
                               name, offset, i * _TIME_ENTRY.size, severity))
        prev_ts, prev_rel = ts, rel
    _report_capped(bad, out)


# -- leader-epoch-checkpoint ----------------------------------------------------------------------
def _check_epoch_checkpoint(directory: str, name: str, scans: list[SegmentScan], log_start: int, log_end: int,
                            rp: _RecoveryPoint | None, out: list[Finding]) -> None:
    path = os.path.join(directory, EPOCH_CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raw = None
    epochs: list[int] = []
    starts: list[int] = []
    if raw is not None:
        parsed = _parse_epoch_checkpoint(path, raw, name, out)
        if parsed is None:
            return  # unreadable: nothing to check the batches against
        for line, position, epoch, start in parsed:
            if epochs and (epoch <= epochs[-1] or start <= starts[-1]):
                out.append(Finding("leader-epoch-checkpoint", path,
                                   f"line {line}: entry (epoch {epoch}, start offset {start}) does not come after "
                                   f"(epoch {epochs[-1]}, start offset {starts[-1]}): epochs and start offsets must "
                                   f"both increase", name, start, position))
                return
            epochs.append(epoch)
            starts.append(start)
        beyond = [s for s in starts if s >= log_end]
        if beyond:
            out.append(Finding("leader-epoch-checkpoint", path, f"{len(beyond)} entries start at or past the log end "
                               f"{log_end} (written before their data; recovery drops them)", name, beyond[0],
                               severity=NOTE))
    # Below the recovery point the checkpoint was written before the data was flushed, so it
    # must give every batch's epoch there (FileLog.flush writes epochs first).
    upto = min(rp.offset, log_end) if rp is not None else log_start
    for scan in scans:
        for b in scan.batches:
            h = b.header
            if h.base_offset >= upto:
                return
            if h.base_offset < log_start or h.partition_leader_epoch < 0:
                continue
            i = bisect.bisect_right(starts, h.base_offset)
            expected = epochs[i - 1] if i else None
            if expected != h.partition_leader_epoch:
                says = f"epoch {expected}" if expected is not None else "no epoch"
                out.append(Finding("leader-epoch-checkpoint", raw is not None and path or scan.path,
                                   f"the batch at offset {h.base_offset} ({os.path.basename(scan.path)} position "
                                   f"{b.position}) has leader epoch {h.partition_leader_epoch}, the checkpoint gives "
                                   f"{says} for it (below the recovery point {upto}, where it must be current)",
                                   name, h.base_offset, b.position if raw is None else None))
                return


def _parse_epoch_checkpoint(path: str, raw: bytes, name: str, out: list[Finding]):
    """[(line number, byte position, epoch, start)] or None (a finding was added)."""
    def bad(line: int, position: int, what: str):
        out.append(Finding("leader-epoch-checkpoint", path, f"line {line}: {what}", name, None, position))

    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        bad(0, exc.start, "not ASCII text")
        return None
    lines = text.splitlines(keepends=True)
    positions = [0]
    for line in lines:
        positions.append(positions[-1] + len(line))
    lines = [line.rstrip("\r\n") for line in lines]
    if not lines or lines[0].strip() != "0":
        bad(1, 0, f"version {lines[0]!r} is not 0" if lines else "empty file")
        return None
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        bad(2, positions[1] if len(positions) > 1 else 0, "no entry count")
        return None
    if count != len(lines) - 2:
        bad(2, positions[1], f"{count} entries announced, {len(lines) - 2} present")
        return None
    entries = []
    for n, line in enumerate(lines[2:], start=3):
        fields = line.split()
        try:
            if len(fields) != 2:
                raise ValueError
            epoch, start = int(fields[0]), int(fields[1])
            if epoch < 0 or start < 0:
                raise ValueError
        except ValueError:
            bad(n, positions[n - 1], f"{line!r} is not 'epoch start-offset'")
            return None
        entries.append((n, positions[n - 1], epoch, start))
    return entries


# -- snapshots and leftovers ----------------------------------------------------------------------
def _check_snapshots(directory: str, name: str, files: set[str], out: list[Finding],
                     check_record_contents: bool) -> None:
    for file in sorted(files):
        sid = parse_snapshot_filename(file)
        path = os.path.join(directory, file)
        if sid is None:
            if file.endswith(PART_SUFFIX) or file.endswith(DELETED_SUFFIX):
                out.append(Finding("snapshot", path, "left by a crash (an unfinished or half-deleted snapshot); "
                                   "startup removes it", name, severity=NOTE))
            continue
        buf = read_file(path)
        scan = scan_segment(buf, path=path, base_offset=0)
        label = f"snapshot {sid.end_offset}-{sid.epoch}"
        for p in scan.problems:
            out.append(Finding("snapshot", path, f"{label}: {p.message}", name, p.offset, p.position))
        if scan.problems:
            continue
        if check_record_contents:
            for b in scan.batches:
                try:
                    check_records(memoryview(buf)[b.position:b.position + b.header.size], b.header)
                except Exception as exc:  # any decoder error: the audit reports, never crashes
                    out.append(Finding("snapshot", path, f"{label}: records unreadable although the CRC holds: {exc}",
                                       name, b.header.base_offset, b.position))
        try:
            SnapshotReader.open(path)
        except Exception as exc:  # CorruptSnapshotError, or a decoder error in the header record
            batches = scan.batches
            where = (batches[-1] if "last" in str(exc) else batches[0]) if batches else None
            out.append(Finding("snapshot", path, f"{label}: {exc}", name,
                               where.header.base_offset if where else None, where.position if where else 0))


def _check_leftovers(directory: str, name: str, files: set[str], out: list[Finding]) -> None:
    logs = {f[:-len(".log")] for f in files if f.endswith(".log")}
    for file in sorted(files):
        path = os.path.join(directory, file)
        stem, ext = os.path.splitext(file)
        if ext in (".index", ".timeindex") and stem not in logs:
            out.append(Finding(ext[1:], path, "no segment of that name: startup ignores it", name, severity=NOTE))
        elif ext in (".tmp", ".trunc", ".cleaned"):
            out.append(Finding("leftover", path, "a temporary file left by a crash; startup removes it", name,
                               severity=NOTE))
        elif ext == ".swap":
            out.append(Finding("leftover", path, "a cleaned segment a crash left mid-swap; startup finishes the swap",
                               name, severity=NOTE))


# -- replicas -------------------------------------------------------------------------------------
class _BatchRef:
    """One replica's batch: where it is and its bytes."""

    __slots__ = ("path", "batch", "_buf")

    def __init__(self, path: str, batch: ScannedBatch, buf) -> None:
        self.path, self.batch, self._buf = path, batch, buf

    @property
    def header(self) -> BatchHeader:
        return self.batch.header

    def data(self) -> memoryview:
        p = self.batch.position
        return memoryview(self._buf)[p:p + self.batch.header.size]


def _batches_from(partition: PartitionAudit, start: int, limit: int) -> Iterator[_BatchRef]:
    """The replica's framed batches holding offsets in [start, limit), in file order."""
    for scan in partition.segments:
        if scan.end_offset <= start:
            continue
        buf = None
        for b in scan.batches:
            if b.header.next_offset <= start:
                continue
            if b.header.base_offset >= limit:
                return
            if buf is None:
                buf = read_file(scan.path)
            yield _BatchRef(scan.path, b, buf)


def _record_identity(h: BatchHeader, r) -> tuple:
    sequence = h.base_sequence + (r.offset - h.base_offset) if h.base_sequence >= 0 else -1
    return (r.timestamp, r.key, r.value, tuple(r.headers), h.partition_leader_epoch, h.is_control,
            h.producer_id, h.producer_epoch, sequence)


def _first_difference(a: Iterator[_BatchRef], b: Iterator[_BatchRef], start: int) -> tuple[int, str] | None:
    """The first offset ≥ start where two replicas' batch streams differ, and how."""
    x, y = next(a, None), next(b, None)
    while x is not None and y is not None:
        hx, hy = x.header, y.header
        if hx.base_offset == hy.base_offset and hx.size == hy.size and x.data() == y.data():
            x, y = next(a, None), next(b, None)
            continue
        return _difference_within(x, y, start)
    if x is None and y is None:
        return None
    present = x if x is not None else y
    return max(start, present.header.base_offset), "one replica's log ends there"


def _difference_within(x: _BatchRef, y: _BatchRef, start: int) -> tuple[int, str]:
    hx, hy = x.header, y.header
    first = max(start, min(hx.base_offset, hy.base_offset))
    if hx.base_offset != hy.base_offset:
        return first, "the replicas' batches start at different offsets"
    if not (x.batch.crc_ok and y.batch.crc_ok):
        return first, "a copy of the batch fails its CRC"
    try:
        rx = {r.offset: _record_identity(hx, r) for r in decode_records(x.data(), hx)}
        ry = {r.offset: _record_identity(hy, r) for r in decode_records(y.data(), hy)}
    except Exception:  # any decoder error
        return first, "a copy of the batch has unreadable records"
    for offset in range(first, min(hx.last_offset, hy.last_offset) + 1):
        if rx.get(offset) != ry.get(offset):
            return offset, "the records differ"
    if hx.last_offset != hy.last_offset:
        return max(first, min(hx.last_offset, hy.last_offset) + 1), "the replicas' batches end at different offsets"
    return first, "same records, but the batches' bytes differ (header fields or encoding)"


def _holding(partition: PartitionAudit, offset: int) -> tuple[SegmentScan, ScannedBatch] | None:
    for scan in partition.segments:
        for b in scan.batches:
            if b.header.base_offset <= offset <= b.header.last_offset:
                return scan, b
    return None


def _describe(data_dir: str, partition: PartitionAudit,
              offset: int) -> tuple[str, bytes | None, str | None, int | None]:
    """(text, identity bytes of the batch, path, position) of one replica at `offset`."""
    found = _holding(partition, offset)
    if found is None:
        return f"{data_dir}: no batch holds it (log {partition.log_start}..{partition.log_end})", None, None, None
    scan, b = found
    h = b.header
    text = (f"{scan.path} position {b.position}: batch {h.base_offset}..{h.last_offset}, leader epoch "
            f"{h.partition_leader_epoch}, crc {'ok' if b.crc_ok else 'MISMATCH'}")
    buf = read_file(scan.path)
    data = bytes(memoryview(buf)[b.position:b.position + h.size])
    if b.crc_ok:
        try:
            record = next((r for r in decode_records(data, h) if r.offset == offset), None)
        except Exception:  # any decoder error
            record = None
        if record is not None and not h.is_control:
            text += f", record key={_short(record.key)} value={_short(record.value)}"
        elif h.is_control:
            text += ", control batch"
    return text, data, scan.path, b.position


def _short(b: bytes | None, limit: int = 32) -> str:
    if b is None:
        return "null"
    text = bytes(b).decode("utf-8", errors="backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def compare_replicas(audits: list[DataDirAudit]) -> tuple[list[Finding], int]:
    """Findings where replicas of a partition differ below the smallest checkpointed HW, and the
    number of partitions compared."""
    out: list[Finding] = []
    compared = 0
    names = sorted({n for a in audits for n in a.partitions})
    for name in names:
        holders = [(a.data_dir, a.partitions[name]) for a in audits if name in a.partitions]
        if len(holders) < 2:
            continue
        unknown = [d for d, p in holders if p.high_watermark is None]
        if unknown:
            out.append(Finding("replicas", holders[0][1].directory, "not compared: no high watermark checkpointed for "
                               f"it in {', '.join(unknown)}", name, severity=NOTE))
            continue
        start = max(p.log_start for _, p in holders)
        limit = min(p.high_watermark for _, p in holders)
        compared += 1
        if start >= limit:
            continue
        if all(p.compacted for _, p in holders):
            out += compare_latest_values(name, holders, start, limit)
            continue
        reference = holders[0][1]
        first: tuple[int, str] | None = None
        for _, other in holders[1:]:
            diff = _first_difference(_batches_from(reference, start, limit), _batches_from(other, start, limit), start)
            if diff is not None and diff[0] < limit and (first is None or diff[0] < first[0]):
                first = diff
        if first is None:
            continue
        offset, how = first
        described = [_describe(d, p, offset) for d, p in holders]
        # Blame the copy fewest replicas share (the odd one out), else the second replica.
        counts = Counter(identity for _, identity, _, _ in described)
        odd = min(range(len(described)), key=lambda i: (counts[described[i][1]], i != 1))
        _, _, path, position = described[odd]
        out.append(Finding("replicas", path or holders[odd][1].directory,
                           f"replicas differ at offset {offset}, below the high watermark {limit} (the smallest "
                           f"checkpointed): {how}; " + "; ".join(text for text, _, _, _ in described),
                           name, offset, position))
    return out, compared


def compare_latest_values(name: str, holders: list, start: int, limit: int) -> list[Finding]:
    """Replicas of a compacted partition clean on their own, so they hold different batches;
    what must agree is the latest record of each key in [start, limit) (its offset and value,
    a tombstone counting as no record: a cleaner drops it after delete.retention.ms). A key
    some replica also has at or past `limit` is left out: there a replica's cleaner may have
    removed its older records below `limit` (it cleans up to its own high watermark)."""
    latest: list[dict] = []
    later: set = set()
    for _, partition in holders:
        values: dict = {}
        for ref in _batches_from(partition, start, partition.log_end):
            h = ref.header
            if h.is_control or not ref.batch.crc_ok:
                continue
            for r in decode_records(ref.data(), h):
                if r.key is None or r.offset < start:
                    continue
                if r.offset >= limit:
                    later.add(r.key)
                else:
                    values[r.key] = (r.offset, r.value)
        latest.append({k: v for k, v in values.items() if v[1] is not None})
    reference = holders[0]
    out = []
    for (data_dir, partition), state in zip(holders[1:], latest[1:]):
        differ = sorted(k for k in (set(latest[0]) | set(state)) - later if latest[0].get(k) != state.get(k))
        if differ:
            key = differ[0]
            mine, theirs = latest[0].get(key), state.get(key)
            out.append(Finding("replicas", partition.directory,
                               f"the latest values of a compacted partition differ below the high watermark {limit} "
                               f"for {len(differ)} keys, first {_short(key)}: {reference[0]} has "
                               f"{_latest_text(mine)}, {data_dir} has {_latest_text(theirs)}",
                               name, (theirs or mine)[0]))
    return out


def _latest_text(entry) -> str:
    return "no record" if entry is None else f"offset {entry[0]} value {_short(entry[1])}"
