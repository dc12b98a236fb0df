"""Voter sets (KIP-853): who may vote in a group, keyed by (node id, directory id), and the set
a group's log holds (the log keeps its VotersRecords: storage/voter_set_cache.py).

A voter is a node id and the directory id of the data dir it voted from. A node restarted on
a new, empty dir has a new directory id, so it is not the voter it replaced: it may have voted
and acknowledged records there, and forgotten both. `directory_id` None is a voter of a static
set (`--voters`, kraft.version 0), which any directory of that node is.

The set in force is the newest one in the log, committed or not (Raft's rule for membership
changes); a truncation past a VotersRecord brings the older set back. Changes go one voter at
a time, so the majorities of two consecutive sets always overlap.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ...protocol import messages
from ...protocol.control_records import ControlType, control_record_key, control_value
from ...protocol.primitives import ZERO_UUID
from ...protocol.records import build_batch

KRAFT_VERSION_DYNAMIC = 1  # kraft.version 1: voters from VotersRecords (KIP-853)


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    directory_id: uuid.UUID | None = None
    host: str = ""
    port: int = 0

    def matches(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """Whether a replica (node id, directory id) is this voter. A voter whose directory is
        unknown (a static set) is any directory of its node; a replica that does not say its
        directory (nil) is taken at its word only by such a voter."""
        if node_id != self.node_id:
            return False
        if self.directory_id is None:
            return True
        return directory_id is not None and directory_id == self.directory_id


@dataclass(frozen=True)
class VoterSet:
    voters: tuple[Voter, ...] = field(default_factory=tuple)

    ids: tuple[int, ...] = field(init=False, compare=False)  # (group.voters: a hot path)

    @classmethod
    def static(cls, node_ids) -> VoterSet:
        return cls(tuple(Voter(n) for n in sorted(node_ids)))

    def __post_init__(self) -> None:
        ids = [v.node_id for v in self.voters]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a voter set names a node twice: {ids}")
        object.__setattr__(self, "voters", tuple(sorted(self.voters, key=lambda v: v.node_id)))
        object.__setattr__(self, "ids", tuple(sorted(ids)))

    # -- reading ------------------------------------------------------------------------------

    def get(self, node_id: int) -> Voter | None:
        return next((v for v in self.voters if v.node_id == node_id), None)

    def is_voter(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        voter = self.get(node_id)
        return voter is not None and voter.matches(node_id, directory_id)

    def majority(self) -> int:
        """How many voters make a majority."""
        return len(self.voters) // 2 + 1

    def is_majority(self, node_ids) -> bool:
        return len(set(node_ids) & set(self.ids)) >= self.majority()

    def differs_by_one(self, other: VoterSet) -> bool:
        """`other` adds or removes exactly one voter (the one-change-at-a-time rule)."""
        mine, theirs = set(self.voters), set(other.voters)
        return len(mine ^ theirs) == 1

    # -- changing -------------------------------------------------------------------------------
    def with_voter(self, voter: Voter) -> VoterSet:
        if self.get(voter.node_id) is not None:
            raise ValueError(f"node {voter.node_id} is a voter already")
        return VoterSet(self.voters + (voter,))

    def without(self, node_id: int, directory_id: uuid.UUID | None) -> VoterSet:
        voter = self.get(node_id)
        if voter is None or not voter.matches(node_id, directory_id):
            raise ValueError(f"({node_id}, {directory_id}) is not a voter")
        if len(self.voters) == 1:
            raise ValueError("the last voter cannot be removed")
        return VoterSet(tuple(v for v in self.voters if v.node_id != node_id))

    # -- the VotersRecord -----------------------------------------------------------------------
    def to_record(self) -> messages.VotersRecord:
        R = messages.VotersRecord
        return R(version=0, voters=[
            R.Voter(voter_id=v.node_id, voter_directory_id=v.directory_id or ZERO_UUID,
                    endpoints=[R.Endpoint(name="PLAINTEXT", host=v.host, port=v.port)] if v.host else [],
                    k_raft_version_feature=R.KRaftVersionFeature(min_supported_version=0,
                                                                 max_supported_version=KRAFT_VERSION_DYNAMIC))
            for v in self.voters])

    @classmethod
    def from_record(cls, record) -> VoterSet:
        voters = []
        for v in record.voters:
            endpoint = v.endpoints[0] if v.endpoints else None
            directory = v.voter_directory_id if v.voter_directory_id.int != 0 else None
            voters.append(Voter(v.voter_id, directory, endpoint.host if endpoint else "",
                                endpoint.port if endpoint else 0))
        return cls(tuple(voters))

    @classmethod
    def from_value(cls, value) -> VoterSet:
        """The set a VotersRecord control record's value holds."""
        record, _ = messages.VotersRecord.decode(memoryview(value), 0, 0)
        return cls.from_record(record)


def voters_batch(voter_set: VoterSet, epoch: int, now_ms: int, *, with_version: bool = True) -> bytearray:
    """A control batch holding the set, after KRaftVersionRecord(1) when `with_version`. Built
    at offset 0, as every batch a leader appends (the log moves it to its place)."""
    records = []
    if with_version:
        version = messages.KRaftVersionRecord(version=0, k_raft_version=KRAFT_VERSION_DYNAMIC)
        records.append((control_record_key(ControlType.KRAFT_VERSION),
                        control_value(version), None, now_ms))
    records.append((control_record_key(ControlType.KRAFT_VOTERS), control_value(voter_set.to_record()), None, now_ms))
    return bytearray(build_batch(records, base_offset=0, partition_leader_epoch=epoch, is_control=True))


class LogVoters:
    """A group's voters as its log says: the newest VotersRecord, committed or not (Raft's
    membership rule), else the configured set. Decoded once per record."""

    def __init__(self, log, static: VoterSet) -> None:
        self.log = log
        self.static = static
        self._decoded: tuple = (None, static)  # (the log's latest (offset, value), its set)

    def current(self) -> VoterSet:
        latest = self.log.voter_sets.latest()
        if latest is None:
            return self.static
        if latest != self._decoded[0]:
            self._decoded = (latest, VoterSet.from_value(latest[1]))
        return self._decoded[1]

    def offset(self) -> int:
        """The offset of the VotersRecord in force; -1 for the configured voters."""
        latest = self.log.voter_sets.latest()
        return -1 if latest is None else latest[0]
