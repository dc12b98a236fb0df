"""KIP-630 snapshot files: `<endOffset:020d>-<epoch:010d>.checkpoint` in record-batch v2 format.

A snapshot is a SnapshotHeaderRecord control batch, data batches (one record per live key),
and a SnapshotFooterRecord control batch. It is written as `<name>.part`, fsynced and renamed,
so a reader never sees half a snapshot; a file without its header and footer, or with a bad
CRC anywhere, is rejected. Frozen files never change, so they are served through mmap slices.
Deleting renames to `.deleted` first, so a crash mid-delete leaves a name startup removes.
"""
from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple

from ..protocol import messages
from ..protocol.control_records import (ControlType, build_control_batch, control_record_key, control_value,
                                        parse_control_record_key)
from ..protocol.errors import CorruptRecordError
from ..protocol.records import (BATCH_HEADER_SIZE, BatchHeader, Compression, build_batch, crc_ok,
                                     decode_records, parse_batch_header)

from .atomic_file import fsync_dir
from .voter_set_cache import voters_values_in

__all__ = ["SnapshotId", "SnapshotWriter", "SnapshotReader", "SnapshotStore", "SnapshotRegion",
           "CorruptSnapshotError", "SnapshotInfo", "PartialSnapshot", "snapshot_filename",
           "parse_snapshot_filename", "verify_snapshot"]

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
_NAME = re.compile(r"^(\d{20})-(-?\d{9,10})\.checkpoint$")
_RECORD_OVERHEAD = 24  # a generous per-record estimate for batch sizing


class SnapshotId(NamedTuple):
    end_offset: int
    epoch: int


class CorruptSnapshotError(Exception):
    pass


def snapshot_filename(sid: SnapshotId) -> str:
    return f"{sid.end_offset:020d}-{sid.epoch:010d}{SUFFIX}"


def parse_snapshot_filename(name: str) -> SnapshotId | None:
    match = _NAME.match(name)
    return SnapshotId(int(match.group(1)), int(match.group(2))) if match else None


class SnapshotWriter:
    """Writes one snapshot to `<name>.part`; `freeze()` makes it durable and visible."""

    def __init__(self, directory, sid: SnapshotId, *, last_contained_log_timestamp: int,
                 compression: int = Compression.NONE, max_batch_bytes: int = 1 << 20,
                 voters: bytes | None = None) -> None:
        """`voters`: the VotersRecord in force at the snapshot's end offset (KIP-853), written
        after the header with a KRaftVersionRecord, as Kafka writes them."""
        self.snapshot_id = sid
        self.path = os.path.join(os.fspath(directory), snapshot_filename(sid))
        self.part_path = self.path + ".part"
        self._timestamp = last_contained_log_timestamp
        self._compression = compression
        self._max_batch_bytes = max_batch_bytes
        self._pending: list = []
        self._pending_bytes = 0
        self._next_offset = 0
        self._file = open(self.part_path, "wb")
        self._write(build_control_batch(
            ControlType.SNAPSHOT_HEADER,
            control_value(messages.SnapshotHeaderRecord(version=0,
                                                        last_contained_log_timestamp=last_contained_log_timestamp)),
            base_offset=self._take(1), timestamp=self._timestamp, leader_epoch=sid.epoch))
        if voters is not None:
            version = control_value(messages.KRaftVersionRecord(version=0, k_raft_version=1))
            self._write(build_batch([(control_record_key(ControlType.KRAFT_VERSION), version, None, self._timestamp),
                                     (control_record_key(ControlType.KRAFT_VOTERS), bytes(voters), None,
                                      self._timestamp)],
                                    base_offset=self._take(2), partition_leader_epoch=sid.epoch, is_control=True))

    def _take(self, n: int) -> int:
        base = self._next_offset
        self._next_offset += n
        return base

    def _write(self, data: bytes) -> None:
        self._file.write(data)

    def append(self, key: bytes, value: bytes) -> None:
        self._pending.append((key, value, None, self._timestamp))
        self._pending_bytes += len(key) + len(value) + _RECORD_OVERHEAD
        if self._pending_bytes >= self._max_batch_bytes:
            self._flush_batch()

    def append_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        for key, value in items:
            self.append(key, value)

    def _flush_batch(self) -> None:
        if self._pending:
            self._write(build_batch(self._pending, base_offset=self._take(len(self._pending)),
                                    compression=self._compression,
                                    partition_leader_epoch=self.snapshot_id.epoch))
            self._pending, self._pending_bytes = [], 0

    def freeze(self) -> str:
        self._flush_batch()
        self._write(build_control_batch(
            ControlType.SNAPSHOT_FOOTER, control_value(messages.SnapshotFooterRecord(version=0)),
            base_offset=self._take(1), timestamp=self._timestamp, leader_epoch=self.snapshot_id.epoch))
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self.part_path, self.path)
        fsync_dir(os.path.dirname(self.path) or ".")
        return self.path

    def abort(self) -> None:
        _discard_part(self._file, self.part_path)


def _discard_part(file, part_path: str) -> None:
    """Close and delete an unfinished `.part` file (a failed write or download)."""
    if not file.closed:
        file.close()
    try:
        os.unlink(part_path)
    except FileNotFoundError:
        pass


class PartialSnapshot:
    """A snapshot being downloaded from a leader (KIP-630 FetchSnapshot) into `<name>.part`.

    `complete(size)` checks the size the leader announced and validates the file like any
    reader (every CRC, header first, footer last), then fsyncs, renames and registers it; a
    file that fails stays invisible and is removed. `abort()` drops it.
    """

    def __init__(self, store: "SnapshotStore", sid: SnapshotId) -> None:
        self.store = store
        self.snapshot_id = sid
        self.path = store.path(sid)
        self.part_path = self.path + ".part"
        self._file = open(self.part_path, "wb")

    def write(self, position: int, data) -> None:
        self._file.seek(position)
        self._file.write(data)

    def complete(self, expected_size: int) -> str:
        self.validate(expected_size)
        return self.publish()

    def validate(self, expected_size: int) -> None:
        """The slow half of complete() (any thread; it touches only the `.part` file): fsync,
        check the announced size, check every CRC, the header and the footer. On failure the
        file is removed and the error raised."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            size = os.fstat(self._file.fileno()).st_size
            self._file.close()
            if size != expected_size:
                raise CorruptSnapshotError(f"{self.part_path}: {size} bytes, the leader announced {expected_size}")
            with open(self.part_path, "rb") as f:  # mapped, not read: snapshots can be large
                buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""
            _validated_batches(self.part_path, memoryview(buf))
        except BaseException:
            self.abort()
            raise

    def publish(self) -> str:
        """The other half (the loop): rename the validated file into place and register it."""
        try:
            os.replace(self.part_path, self.path)
            fsync_dir(self.store.dir)
        except BaseException:
            self.abort()
            raise
        self.store.add(self.snapshot_id)
        return self.path

    def abort(self) -> None:
        _discard_part(self._file, self.part_path)


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: SnapshotId | None
    size: int
    batches: int
    records: int
    last_contained_log_timestamp: int


class SnapshotReader:
    """A validated snapshot file: every CRC checked, header first and footer last."""

    def __init__(self, path: str, buf, batches: list, last_timestamp: int) -> None:
        self.path = path
        self.snapshot_id = parse_snapshot_filename(os.path.basename(path))
        self._buf = buf
        self._batches = batches
        self.size = len(buf)
        self.last_contained_log_timestamp = last_timestamp

    @classmethod
    def open(cls, path) -> "SnapshotReader":
        path = os.fspath(path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b""
        batches = _validated_batches(path, memoryview(buf))
        header_pos, header = batches[0]
        records = decode_records(memoryview(buf)[header_pos:header_pos + header.size], header)
        value = records[0].value
        header_record, _ = messages.SnapshotHeaderRecord.decode(memoryview(value), 0, 0)
        return cls(path, buf, batches, header_record.last_contained_log_timestamp)

    def close(self) -> None:
        """Unmap the file now (its descriptor was closed at open); decoded items are copies."""
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()

    def __enter__(self) -> "SnapshotReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def data_batches(self) -> list[tuple[int, BatchHeader]]:
        """(file position, header) of every data batch, in file order: the batches between the
        SnapshotHeader and the SnapshotFooter, control batches left out. Positions index the
        file itself, so a reader may map it and decode a subset (the Spark pipeline splits a
        snapshot this way)."""
        return [(pos, header) for pos, header in self._batches[1:-1] if not header.is_control]

    def voters_value(self) -> bytes | None:
        """The VotersRecord (value bytes) the snapshot holds, if any (KIP-853)."""
        view = memoryview(self._buf)
        found = [value for pos, header in self._batches[1:-1] if header.is_control
                 for _, value in voters_values_in(view[pos:pos + header.size], header)]
        return found[-1] if found else None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        view = memoryview(self._buf)
        for pos, header in self.data_batches():
            for record in decode_records(view[pos:pos + header.size], header):
                yield record.key, record.value

    def info(self) -> SnapshotInfo:
        data = [h for _, h in self.data_batches()]
        return SnapshotInfo(self.snapshot_id, self.size, len(self._batches), sum(h.records_count for h in data),
                            self.last_contained_log_timestamp)


def verify_snapshot(path) -> SnapshotInfo:
    return SnapshotReader.open(path).info()


def _validated_batches(path: str, buf) -> list:
    batches, pos, end = [], 0, len(buf)
    while pos < end:
        if end - pos < BATCH_HEADER_SIZE:
            raise CorruptSnapshotError(f"{path}: torn batch header at {pos}")
        try:
            header = parse_batch_header(buf, pos)
        except CorruptRecordError as exc:
            raise CorruptSnapshotError(f"{path}: {exc}") from None
        if header.magic != 2 or pos + header.size > end:
            raise CorruptSnapshotError(f"{path}: bad or torn batch at {pos}")
        if not crc_ok(buf, pos, header):
            raise CorruptSnapshotError(f"{path}: CRC mismatch in batch at {pos}")
        batches.append((pos, header))
        pos += header.size
    if len(batches) < 2:
        raise CorruptSnapshotError(f"{path}: no snapshot header and footer")
    for (pos, header), expected in ((batches[0], ControlType.SNAPSHOT_HEADER),
                                    (batches[-1], ControlType.SNAPSHOT_FOOTER)):
        if not header.is_control or _control_type(buf, pos, header) != expected:
            where = "first" if expected == ControlType.SNAPSHOT_HEADER else "last"
            raise CorruptSnapshotError(f"{path}: the {where} batch is not a {expected.name} control record")
    return batches


def _control_type(buf, pos: int, header) -> int | None:
    records = decode_records(buf[pos:pos + header.size], header)
    if len(records) != 1 or records[0].key is None:
        return None
    return parse_control_record_key(records[0].key)[1]


class SnapshotRegion:
    """A zero-copy slice of a frozen snapshot, written to the socket like a FileRegion."""

    __slots__ = ("_file", "position", "size")

    def __init__(self, file: "_MappedSnapshot", position: int, size: int) -> None:
        self._file = file
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self._file.fd

    def view(self) -> memoryview:
        return self._file.view(self.position, self.size)


class _MappedSnapshot:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size
        self._map = mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ) if self.size else None

    def view(self, position: int, size: int) -> memoryview:
        return memoryview(self._map)[position:position + size] if self._map is not None else memoryview(b"")

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class SnapshotStore:
    """The snapshots of one partition directory. Mutated only by the thread that owns it."""

    def __init__(self, directory) -> None:
        self.dir = os.fspath(directory)
        os.makedirs(self.dir, exist_ok=True)
        self._ids = sorted(sid for name in os.listdir(self.dir) if (sid := parse_snapshot_filename(name)))
        self._sizes: dict[SnapshotId, int] = {}
        self._mapped: dict[SnapshotId, _MappedSnapshot] = {}

    def __contains__(self, sid) -> bool:
        return sid in self._ids

    def remove_leftovers(self) -> list[str]:
        removed = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(PART_SUFFIX) or name.endswith(DELETED_SUFFIX):
                os.unlink(os.path.join(self.dir, name))
                removed.append(name)
        if removed:
            fsync_dir(self.dir)
        return removed

    def ids(self) -> list[SnapshotId]:
        return list(self._ids)

    def latest(self) -> SnapshotId | None:
        return self._ids[-1] if self._ids else None

    def earliest_at_or_after(self, offset: int) -> SnapshotId | None:
        return next((sid for sid in self._ids if sid.end_offset >= offset), None)

    def path(self, sid: SnapshotId) -> str:
        return os.path.join(self.dir, snapshot_filename(sid))

    def size(self, sid: SnapshotId) -> int:
        size = self._sizes.get(sid)
        if size is None:
            size = self._sizes[sid] = os.stat(self.path(sid)).st_size
        return size

    def writer(self, sid: SnapshotId, **kwargs) -> SnapshotWriter:
        return SnapshotWriter(self.dir, sid, **kwargs)

    def begin_download(self, sid: SnapshotId) -> PartialSnapshot:
        """A snapshot to be fetched from the leader in chunks (see PartialSnapshot)."""
        return PartialSnapshot(self, sid)

    def add(self, sid: SnapshotId) -> None:
        """Register a snapshot frozen by a writer."""
        if sid not in self._ids:
            self._ids.append(sid)
            self._ids.sort()
        self._sizes.pop(sid, None)

    def reader(self, sid: SnapshotId) -> SnapshotReader:
        return SnapshotReader.open(self.path(sid))

    def voters_value(self, sid: SnapshotId) -> bytes | None:
        """The VotersRecord a (validated) snapshot holds, read from the control batch that
        follows its header only: cheap enough for the event loop, whatever the snapshot's size."""
        with open(self.path(sid), "rb") as f:
            head = f.read(BATCH_HEADER_SIZE)
            if len(head) < BATCH_HEADER_SIZE:
                return None
            f.seek(parse_batch_header(head).size)
            head = f.read(BATCH_HEADER_SIZE)
            if len(head) < BATCH_HEADER_SIZE:
                return None
            header = parse_batch_header(head)
            if not header.is_control:
                return None
            batch = head + f.read(header.size - BATCH_HEADER_SIZE)
        found = voters_values_in(batch, header)
        return found[-1][1] if found else None

    def region(self, sid: SnapshotId, position: int, size: int) -> SnapshotRegion:
        mapped = self._mapped.get(sid)
        if mapped is None:
            mapped = self._mapped[sid] = _MappedSnapshot(self.path(sid))
        size = max(0, min(size, mapped.size - position))
        return SnapshotRegion(mapped, position, size)

    def delete_older_than(self, sid: SnapshotId) -> list[SnapshotId]:
        old = [s for s in self._ids if s < sid]
        if not old:
            return []
        for s in old:
            os.replace(self.path(s), self.path(s)[: -len(SUFFIX)] + DELETED_SUFFIX)
        fsync_dir(self.dir)
        for s in old:
            os.unlink(self.path(s)[: -len(SUFFIX)] + DELETED_SUFFIX)
            self._ids.remove(s)
            self._sizes.pop(s, None)
            self._mapped.pop(s, None)  # in-flight regions keep their mapping alive
        return old
