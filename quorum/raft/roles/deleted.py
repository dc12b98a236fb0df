"""The partition was deleted here: the group left every table and arms no timer."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Role


@dataclass(slots=True)
class Deleted(Role):
    """Requests parked on the partition may still ask whether it leads (it does not)."""

    epoch: int
    name = "Deleted"

    def deadline_ms(self) -> int:
        return -1
