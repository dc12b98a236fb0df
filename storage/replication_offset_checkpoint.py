"""`replication-offset-checkpoint`: every hosted partition's high watermark, one file per data dir.

Kafka's format (its ReplicaManager writes the same file every
replica.high.watermark.checkpoint.interval.ms):

    0                       version
    2                       number of entries
    events 0 1042           topic partition offset
    __cluster_metadata 0 77

The server rewrites it atomically every few seconds and at clean shutdown, so it is always a
stale copy of the HWs; since a HW only moves forward, a stale value is a *lower bound* of the
true one, which is all `kraftd verify` needs: replicas must agree below it. The server writes
min(HW, flushed offset), so the value is also a lower bound of what this node's log holds
durably (a follower's HW may run ahead of its last fsync).
"""
from __future__ import annotations

import os
from typing import Mapping

from .atomic_file import atomic_write

__all__ = ["REPLICATION_OFFSET_CHECKPOINT_FILE", "CheckpointFormatError", "read_replication_offsets",
           "write_replication_offsets"]

REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
_VERSION = 0

PartitionOffsets = dict[tuple[str, int], int]


class CheckpointFormatError(ValueError):
    """The file is not a version-0 checkpoint; `line` is the 1-based line at fault (0: the file)."""

    def __init__(self, path: str, line: int, what: str) -> None:
        super().__init__(f"{path}: line {line}: {what}" if line else f"{path}: {what}")
        self.path = path
        self.line = line
        self.what = what


def write_replication_offsets(path: str | os.PathLike, offsets: Mapping[tuple[str, int], int]) -> None:
    """Replace the file with `offsets` (tmp + fsync + rename + directory fsync)."""
    lines = [str(_VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_replication_offsets(path: str | os.PathLike) -> PartitionOffsets:
    """{(topic, partition): offset}. FileNotFoundError if absent; CheckpointFormatError if malformed."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        lines = raw.decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise CheckpointFormatError(path, 0, "not ASCII text") from None
    if not lines or lines[0].strip() != str(_VERSION):
        raise CheckpointFormatError(path, 1, f"version {lines[0].strip()!r} is not {_VERSION}" if lines
                                    else "empty file")
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CheckpointFormatError(path, 2, "no entry count") from None
    if count < 0 or len(lines) - 2 != count:
        raise CheckpointFormatError(path, 2, f"{count} entries announced, {len(lines) - 2} present")
    offsets: PartitionOffsets = {}
    for number, line in enumerate(lines[2:], start=3):
        fields = line.split()
        try:
            topic, partition, offset = fields[0], int(fields[1]), int(fields[2])
        except (IndexError, ValueError):
            raise CheckpointFormatError(path, number, f"{line!r} is not 'topic partition offset'") from None
        if len(fields) != 3 or partition < 0 or offset < 0 or (topic, partition) in offsets:
            raise CheckpointFormatError(path, number, f"{line!r}: bad or repeated entry")
        offsets[topic, partition] = offset
    return offsets
