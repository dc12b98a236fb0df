"""Small durable-file helpers shared by the storage modules.

A checkpoint must never be observed half-written after a crash, so every rewrite goes to a
temporary file that is fsynced and then renamed over the target; the directory is fsynced so
the rename itself survives power loss.
"""
from __future__ import annotations

import os

__all__ = ["atomic_write", "fsync_dir"]

TMP_SUFFIX = ".tmp"


def fsync_dir(path: str | os.PathLike) -> None:
    """Make creations/renames/deletions in directory `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data`: tmp + fsync + rename + directory fsync."""
    path = os.fspath(path)
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")
