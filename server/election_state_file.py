"""The file behind every group's election state (KIP-595's quorum-state), `<data dir>/quorum-state`."""
from __future__ import annotations

import json
import os

from ..quorum.raft.election_state import ElectionState, GroupKey, apply_changes, group_name
from ..storage.atomic_file import atomic_write


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

    def write(self, changed: dict[GroupKey, ElectionState | None]) -> None:
        if self._states is None:
            self.load()
        states = self._states
        apply_changes(states, changed)
        doc = {"data_version": 1, "groups": {group_name(k): s.to_json() for k, s in sorted(states.items())}}
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        atomic_write(self.path, json.dumps(doc, separators=(",", ":")).encode())
        self.writes += 1
