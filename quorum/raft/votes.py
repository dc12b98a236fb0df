"""Vote rules shared by the voter and the candidate side."""
from __future__ import annotations

from dataclasses import dataclass


def log_is_at_least(candidate: tuple[int, int], ours: tuple[int, int]) -> bool:
    """KIP-595: grant only to a candidate whose (last epoch, end offset) is at least ours."""
    return candidate >= ours


@dataclass(frozen=True, slots=True)
class VoteAnswer:
    """One partition of a VoteResponse, with the epoch the request was for."""

    epoch_of_request: int
    error: int
    leader_id: int
    leader_epoch: int
    granted: bool
