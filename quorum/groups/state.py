"""A classic group's states and the one table of transitions between them (Kafka's
GroupMetadata: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)."""
from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"                          # no members; may hold committed offsets
    PREPARING_REBALANCE = "PreparingRebalance"    # waiting for members to (re)join
    COMPLETING_REBALANCE = "CompletingRebalance"  # joined; waiting for the leader's assignment
    STABLE = "Stable"                        # assignment handed out; members heartbeat
    DEAD = "Dead"                            # deleted, or moved away with its partition


class IllegalGroupTransition(RuntimeError):
    pass


_S = GroupState
# The states each state may move to (Kafka's validPreviousStates, read the other way round).
TRANSITIONS: dict[GroupState, frozenset] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE, _S.STABLE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset(),
}


def check_transition(old: GroupState, new: GroupState) -> None:
    if new not in TRANSITIONS[old]:
        raise IllegalGroupTransition(f"group cannot move from {old.value} to {new.value}")
