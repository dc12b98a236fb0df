"""What handling a request produces. The server turns these into bytes (or nothing)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Respond:
    """Answer now with this response object."""

    response: Any


@dataclass(slots=True)
class NoResponse:
    """Send nothing (acks=0 produce); later responses on the connection are not held back."""


@dataclass(slots=True)
class Park:
    """The answer comes later as a Completion with the same token (long-poll fetch, acks=-1)."""

    token: int


@dataclass(slots=True)
class Completion:
    token: int
    response: Any


Outcome = Respond | NoResponse | Park
