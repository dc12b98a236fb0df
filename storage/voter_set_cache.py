"""The VotersRecords a log holds, by offset (KIP-853), with a checkpoint file.

A group's voter set is the newest VotersRecord in its log, committed or not; a truncation past
one brings the one before back, and moving the log start keeps the one in force there. The
log finds them in the control batches it appends (they are rare: one per membership change),
keeps each record's value as bytes (the quorum layer decodes it), and rewrites
`voter-set-checkpoint` atomically *before* the data it describes, as the leader-epoch
checkpoint is: after a crash it may name offsets past the recovered log end, which recovery
drops with `truncate_from_end`.

File format (text): "0" (version), the count, then one "<offset> <base64 value>" line each.
"""
from __future__ import annotations

import base64
import bisect
import os

from ..protocol.control_records import ControlType, parse_control_record_key
from ..protocol.records import decode_records
from .atomic_file import atomic_write

__all__ = ["VOTER_SET_CHECKPOINT_FILE", "VoterSetCache", "voters_values_in"]

VOTER_SET_CHECKPOINT_FILE = "voter-set-checkpoint"
_VERSION = 0


class VoterSetCache:
    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self._path = os.fspath(path) if path is not None else None
        self._offsets: list[int] = []
        self._values: list[bytes] = []
        if self._path is not None and os.path.exists(self._path):
            for offset, value in _read(self._path):
                self._offsets.append(offset)
                self._values.append(value)

    # -- reading ----------------------------------------------------------------------------
    def latest(self) -> tuple[int, bytes] | None:
        return (self._offsets[-1], self._values[-1]) if self._offsets else None

    def value_at(self, offset: int) -> bytes | None:
        """The record in force at `offset` (the newest at or below it), or None."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._values[i - 1] if i else None

    def entries(self) -> list[tuple[int, bytes]]:
        return list(zip(self._offsets, self._values))

    def __len__(self) -> int:
        return len(self._offsets)

    # -- changing (each change is durable when it returns, for a file-backed cache) --------------
    def assign(self, offset: int, value: bytes) -> None:
        """A VotersRecord at `offset`; anything at or past it is superseded."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i:], self._values[i:]
        self._offsets.append(offset)
        self._values.append(bytes(value))
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """The log ends at `end_offset` now: records at or past it are gone."""
        i = bisect.bisect_left(self._offsets, end_offset)
        if i < len(self._offsets):
            del self._offsets[i:], self._values[i:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log starts at `start_offset`: keep the record in force there and every later one."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i > 1:
            del self._offsets[:i - 1], self._values[:i - 1]
            self._write()

    def clear(self) -> None:
        if self._offsets:
            self._offsets, self._values = [], []
            self._write()

    def _write(self) -> None:
        if self._path is None:
            return
        lines = [str(_VERSION), str(len(self._offsets))]
        lines += [f"{o} {base64.b64encode(v).decode()}" for o, v in zip(self._offsets, self._values)]
        atomic_write(self._path, ("\n".join(lines) + "\n").encode())


def _read(path: str) -> list[tuple[int, bytes]]:
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0].strip() != str(_VERSION):
        raise ValueError(f"{path}: not a version {_VERSION} voter-set checkpoint")
    count = int(lines[1])
    out = []
    for line in lines[2:2 + count]:
        offset, _, value = line.partition(" ")
        out.append((int(offset), base64.b64decode(value)))
    if len(out) != count:
        raise ValueError(f"{path}: {count} entries announced, {len(out)} found")
    return out


def voters_values_in(batch, header) -> list[tuple[int, bytes]]:
    """(offset, value) of each VotersRecord in one control batch (`batch` starts at it)."""
    return [(r.offset, bytes(r.value)) for r in decode_records(batch, header)
            if r.key is not None and len(r.key) >= 4 and parse_control_record_key(r.key)[1] == ControlType.KRAFT_VOTERS]
