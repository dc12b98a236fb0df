"""One class per role (KIP-595 plus KIP-996's Prospective). A role holds only what that role
needs; the durable part (epoch, leader, vote) is the group's ElectionState."""
from __future__ import annotations

from dataclasses import dataclass, field

from .progress import ReplicaProgress


@dataclass(slots=True)
class Unattached:
    """No leader known in this epoch (it may have voted: see the group's ElectionState)."""

    epoch: int
    election_deadline_ms: int  # -1 for an observer or a replica that may not vote
    name = "Unattached"


@dataclass(slots=True)
class Voted:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    name = "Voted"


@dataclass(slots=True)
class Prospective:
    """KIP-996 pre-vote: asks whether it could win at epoch + 1 without bumping the epoch."""

    epoch: int
    election_deadline_ms: int
    leader_id: int = -1  # the leader it lost touch with, if any
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    retry_ms: int = 0
    name = "Prospective"


@dataclass(slots=True)
class Candidate:
    epoch: int
    election_deadline_ms: int
    granted: set = field(default_factory=set)
    rejected: set = field(default_factory=set)
    retry_ms: int = 0
    name = "Candidate"


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int
    progress: ReplicaProgress
    check_quorum_deadline_ms: int
    # Voters that have not acknowledged BeginQuorumEpoch (nor fetched) yet: resent on a timer.
    unacknowledged: set = field(default_factory=set)
    resend_ms: int = 0
    name = "Leader"


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    since_ms: int = -1   # when this role began: a pre-vote is refused only after a fetch since then
    name = "Follower"


@dataclass(slots=True)
class Resigned:
    """A leader that stepped down (shutdown or check-quorum); it no longer accepts writes."""

    epoch: int
    election_deadline_ms: int
    successors: list = field(default_factory=list)
    unacknowledged: set = field(default_factory=set)
    resend_ms: int = 0
    name = "Resigned"


Role = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned
