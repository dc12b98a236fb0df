"""The LeaderChange control batch (type 2) a new leader appends: its epoch's start offset."""
from __future__ import annotations

from ...protocol import messages
from ...protocol.control_records import ControlType, build_control_batch, control_value


def leader_change_batch(leader_id: int, epoch: int, voters, granting, now_ms: int) -> bytearray:
    Voter = messages.LeaderChangeMessage.Voter
    message = messages.LeaderChangeMessage(
        version=0, leader_id=leader_id, voters=[Voter(voter_id=v) for v in voters],
        granting_voters=[Voter(voter_id=v) for v in sorted(granting)])
    return bytearray(build_control_batch(ControlType.LEADER_CHANGE, control_value(message), base_offset=0,
                                         timestamp=now_ms, leader_epoch=epoch))
