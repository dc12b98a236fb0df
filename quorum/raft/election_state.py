"""What a group must remember across crashes: epoch, leader, vote (KIP-595's quorum-state).

A transition is written before it takes effect: the core collects the changed states of one
poll into a `PersistBatch`, the shell writes them with one write and one fsync, then releases
what the core held back (vote answers, requests of the new role).
"""
from __future__ import annotations

from dataclasses import dataclass

GroupKey = tuple[str, int]
NO_NODE = -1


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int = 0
    leader_id: int = NO_NODE
    voted_id: int = NO_NODE
    # False while a replica that lost its disk has not yet caught up with a leader once: it may
    # have voted in an epoch it no longer remembers, so it must not vote or stand (disk-loss rule).
    may_vote: bool = True
    # True when the mark above is only a new copy's (a partition moved here): this node may
    # have voted for the partition before, under the same directory id, in a copy it has
    # deleted since. Following the leader of an
    # epoch, it will not vote in that epoch, nor in an older one: it may vote from then on. (The
    # disk-loss rule waits for the leader's HW too; a new voter that waited for it kept a group
    # whose leader died before telling it leaderless: sim seed 8333.)
    joining: bool = False

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "leaderId": self.leader_id, "votedId": self.voted_id,
                "mayVote": self.may_vote, "joining": self.joining}

    @classmethod
    def from_json(cls, doc: dict) -> "ElectionState":
        return cls(int(doc["epoch"]), int(doc.get("leaderId", NO_NODE)), int(doc.get("votedId", NO_NODE)),
                   bool(doc.get("mayVote", True)), bool(doc.get("joining", False)))

    def moved_to(self, epoch: int, leader_id: int, voted_id: int) -> "ElectionState":
        """The next state, keeping the no-vote mark, except that a joining copy that now knows
        its epoch's leader may vote again."""
        if self.joining and leader_id != NO_NODE:
            return ElectionState(epoch, leader_id, voted_id)
        return ElectionState(epoch, leader_id, voted_id, self.may_vote, self.joining)


def apply_changes(states: dict, changed: dict) -> None:
    """A store's states after a write: a None state is a deleted group's, dropped."""
    for key, state in changed.items():
        if state is None:
            states.pop(key, None)
        else:
            states[key] = state


def group_name(key: GroupKey) -> str:
    return f"{key[0]}-{key[1]}"


class MemoryElectionStore:
    """For the simulation: survives a crash (it models the fsynced file), not a disk loss."""

    def __init__(self) -> None:
        self.states: dict[GroupKey, ElectionState] = {}
        self.writes = 0

    def load(self) -> dict[GroupKey, ElectionState]:
        return dict(self.states)

    def write(self, changed: dict[GroupKey, ElectionState | None]) -> None:
        apply_changes(self.states, changed)
        self.writes += 1
