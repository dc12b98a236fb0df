"""The quorum-state file: a node's term/vote (written before a transition takes effect)."""
from __future__ import annotations

import json
import os
from typing import Callable

from .atomic_file import atomic_write
from .background_writes import background_writes

__all__ = ["QuorumStateStore"]


class QuorumStateStore:
    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)

    def read(self) -> dict | None:
        """The last written state, or None if never written."""
        try:
            with open(self.path, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None

    def write(self, state: dict) -> None:
        """Durably replace the state (tmp + fsync + rename + directory fsync), after every write
        queued before (`write_later`, and the rest of storage's background writes)."""
        background_writes().barrier()
        self._write(state)

    def write_later(self, state: dict) -> Callable[[], bool]:
        """Replace the state in the background (storage/background_writes.py); the returned
        function says whether that write is durable yet."""
        writes = background_writes()
        seq = writes.submit(lambda: self._write(dict(state)))
        return lambda: writes.done(seq)

    def _write(self, state: dict) -> None:
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        atomic_write(self.path, json.dumps(state, sort_keys=True).encode())

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
