"""The quorum-state file: a node's term/vote (written before a transition takes effect)."""
from __future__ import annotations

import json
import os

from .atomic_file import atomic_write

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
        """Durably replace the state (tmp + fsync + rename + directory fsync)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        atomic_write(self.path, json.dumps(state, sort_keys=True).encode())

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
