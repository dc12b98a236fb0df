"""The LeaderChange control batch (type 2) a new leader appends: its epoch's start offset."""
from __future__ import annotations

from ...protocol import messages
from ...protocol.control_records import ControlType, build_control_batch


def leader_change_batch(leader_id: int, epoch: int, voters, granting, now_ms: int) -> bytearray:
    Voter = messages.LeaderChangeMessage.Voter
    message = messages.LeaderChangeMessage(
        version=0, leader_id=leader_id, voters=[Voter(voter_id=v) for v in voters],
        granting_voters=[Voter(voter_id=v) for v in sorted(granting)])
    parts: list = []
    messages.LeaderChangeMessage.encode(message, 0, parts)
    value = b"".join(bytes(p) for p in parts)
    return bytearray(build_control_batch(ControlType.LEADER_CHANGE, value, base_offset=0, timestamp=now_ms,
                                         leader_epoch=epoch))
