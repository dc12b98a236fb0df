"""The data-dir files of an unclean recovery (`kraftd quorum force-leader`).

When a majority of the voters is lost for good, an operator runs `force-leader` on each stopped
survivor. The command rewrites the survivor's catalog (the metadata quorum's voters become the
new SPEC; every partition drops the lost replicas from its voters), clears every group's vote
and leader and raises its epoch, and leaves `forced-recovery.json` saying which nodes were lost.
On the next start the node's controller writes the same shrinking to the metadata log (so every
other node learns it) and then removes the file.

A node that finds itself outside the voters it was started with, having been a voter before,
was one of the lost: its data may hold records the survivor never had. It never merges them: its
whole data dir is set aside (moved into `discarded-<ms>/`, never deleted) and it starts empty,
fetching again whatever it is assigned.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .atomic_file import atomic_write

log = logging.getLogger(__name__)

FORCED_RECOVERY_FILE = "forced-recovery.json"
DISCARDED_PREFIX = "discarded-"
LOCK_FILE = ".lock"


@dataclass(frozen=True)
class ForcedRecovery:
    voters: tuple[int, ...]        # the metadata quorum's voters from now on
    lost: tuple[int, ...]          # former voters that are gone for good
    epoch: int                     # every group here was moved to this epoch (or above)

    def to_json(self) -> dict:
        return {"voters": list(self.voters), "lost": list(self.lost), "epoch": self.epoch}


def read_forced_recovery(data_dir: str | os.PathLike) -> ForcedRecovery | None:
    try:
        with open(Path(data_dir) / FORCED_RECOVERY_FILE, "rb") as f:
            doc = json.loads(f.read())
    except FileNotFoundError:
        return None
    return ForcedRecovery(tuple(int(v) for v in doc["voters"]), tuple(int(v) for v in doc["lost"]),
                          int(doc.get("epoch", 0)))


def write_forced_recovery(data_dir: str | os.PathLike, forced: ForcedRecovery) -> None:
    atomic_write(Path(data_dir) / FORCED_RECOVERY_FILE, json.dumps(forced.to_json(), indent=1).encode())


def clear_forced_recovery(data_dir: str | os.PathLike) -> None:
    try:
        os.unlink(Path(data_dir) / FORCED_RECOVERY_FILE)
    except FileNotFoundError:
        pass


def set_aside(data_dir: str | os.PathLike, now_ms: int | None = None) -> Path:
    """Move everything in `data_dir` (but the lock and earlier set-aside dirs) into a new
    `discarded-<ms>/` inside it; returns that directory. Nothing is deleted."""
    data_dir = Path(data_dir)
    target = data_dir / f"{DISCARDED_PREFIX}{now_ms if now_ms is not None else int(time.time() * 1000)}"
    target.mkdir()
    for entry in sorted(data_dir.iterdir()):
        if entry.name == LOCK_FILE or entry.name.startswith(DISCARDED_PREFIX):
            continue
        os.rename(entry, target / entry.name)
    fd = os.open(data_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target
