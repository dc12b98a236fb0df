"""`<data dir>/.lock`: held (flock, exclusive) by the process serving a data dir.

Offline tools that rewrite a data dir (`kraftd quorum force-leader`) refuse to run while a live
process holds it. The kernel drops the lock when the process dies, even by SIGKILL, so a stale
file never blocks anything.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .forced_recovery import LOCK_FILE


class DataDirInUse(RuntimeError):
    pass


class DataDirLock:
    def __init__(self, data_dir: str | os.PathLike) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "DataDirLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DataDirInUse(f"{self.path.parent} is in use by a live process"
                               + (f" (pid {holder})" if holder else "")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "DataDirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
