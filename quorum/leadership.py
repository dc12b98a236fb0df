"""The node's leader epoch: persisted before use, raised at every start (single node)."""
from __future__ import annotations

from kraftd.protocol import messages
from kraftd.protocol.control_records import ControlType, build_control_batch


class Leadership:
    """Durable epoch transitions: the quorum-state file is written before the epoch is used."""

    def __init__(self, store, node_id: int) -> None:
        self._store = store
        self.node_id = node_id
        self.epoch = -1

    def become_leader(self) -> int:
        state = self._store.read() or {}
        epoch = int(state.get("leaderEpoch", 0)) + 1
        self._store.write({
            "leaderId": self.node_id,
            "leaderEpoch": epoch,
            "votedId": self.node_id,
            "currentVoters": [{"voterId": self.node_id}],
            "data_version": 0,
        })
        self.epoch = epoch
        return epoch

    def leader_change_batch(self, now_ms: int) -> bytearray:
        """A LeaderChange control batch (type 2) that gives the epoch its start offset."""
        message = messages.LeaderChangeMessage(
            version=0,
            leader_id=self.node_id,
            voters=[messages.LeaderChangeMessage.Voter(voter_id=self.node_id)],
            granting_voters=[messages.LeaderChangeMessage.Voter(voter_id=self.node_id)],
        )
        parts: list = []
        messages.LeaderChangeMessage.encode(message, 0, parts)
        value = b"".join(bytes(p) for p in parts)
        return bytearray(build_control_batch(
            ControlType.LEADER_CHANGE, value, base_offset=0, timestamp=now_ms, leader_epoch=self.epoch,
        ))
