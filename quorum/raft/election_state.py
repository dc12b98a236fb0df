"""What a group must remember across crashes: epoch, leader, vote (KIP-595's quorum-state).

A transition is written before it takes effect: the core collects the changed states of one
poll into a `PersistBatch`, the shell writes them with one write and one fsync, then releases
what the core held back (vote answers, requests of the new role).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ...storage.atomic_file import atomic_write

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

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "leaderId": self.leader_id, "votedId": self.voted_id,
                "mayVote": self.may_vote}

    @classmethod
    def from_json(cls, doc: dict) -> "ElectionState":
        return cls(int(doc["epoch"]), int(doc.get("leaderId", NO_NODE)), int(doc.get("votedId", NO_NODE)),
                   bool(doc.get("mayVote", True)))


def group_name(key: GroupKey) -> str:
    return f"{key[0]}-{key[1]}"


class MemoryElectionStore:
    """For the simulation: survives a crash (it models the fsynced file), not a disk loss."""

    def __init__(self) -> None:
        self.states: dict[GroupKey, ElectionState] = {}
        self.writes = 0

    def load(self) -> dict[GroupKey, ElectionState]:
        return dict(self.states)

    def write(self, changed: dict[GroupKey, ElectionState]) -> None:
        self.states.update(changed)
        self.writes += 1


class FileElectionStore:
    """One JSON file for every group of the node: tmp + fsync + rename per batch.

    The previous single-node format ({"leaderEpoch": N, ...}) is read as every group's epoch.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._states: dict[GroupKey, ElectionState] | None = None
        self.legacy_epoch = 0
        self.writes = 0

    def load(self) -> dict[GroupKey, ElectionState]:
        if self._states is None:
            self._states = {}
            try:
                with open(self.path, "rb") as f:
                    doc = json.loads(f.read())
            except FileNotFoundError:
                doc = {}
            if "groups" in doc:
                for name, state in doc["groups"].items():
                    topic, _, index = name.rpartition("-")
                    self._states[(topic, int(index))] = ElectionState.from_json(state)
            else:
                self.legacy_epoch = int(doc.get("leaderEpoch", 0))
        return dict(self._states)

    def write(self, changed: dict[GroupKey, ElectionState]) -> None:
        if self._states is None:
            self.load()
        states = self._states
        states.update(changed)
        doc = {"data_version": 1, "groups": {group_name(k): s.to_json() for k, s in sorted(states.items())}}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        atomic_write(self.path, json.dumps(doc, separators=(",", ":")).encode())
        self.writes += 1
