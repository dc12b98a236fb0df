"""Voter sets keyed by (node id, directory id), and their VotersRecord form (issue 25, KIP-853);
the log's keeping of them: tests/storage/test_voter_set_cache.py."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftd.protocol import messages
from kraftd.protocol.control_records import ControlType, parse_control_record_key
from kraftd.protocol.records import decode_records, parse_batch_header
from kraftd.quorum.raft.voter_set import Voter, VoterSet, voters_batch

D1, D2, D3, D9 = (uuid.UUID(int=n) for n in (101, 102, 103, 109))


def test_a_voter_is_its_node_and_its_directory():
    voters = VoterSet((Voter(1, D1), Voter(2, D2), Voter(3, None)))
    assert voters.is_voter(1, D1)
    assert not voters.is_voter(1, D9)      # the same node on a new disk
    assert not voters.is_voter(1, None)    # a replica that does not say its directory
    assert voters.is_voter(3, D9) and voters.is_voter(3, None)  # a static voter: any directory
    assert not voters.is_voter(4, D1)


def test_majorities():
    voters = VoterSet.static([1, 2, 3, 4])
    assert voters.majority() == 3
    assert voters.is_majority([1, 2, 3]) and not voters.is_majority([1, 2, 9])


def test_one_change_at_a_time():
    three = VoterSet((Voter(1, D1), Voter(2, D2), Voter(3, D3)))
    four = three.with_voter(Voter(4, D9))
    assert three.differs_by_one(four) and four.differs_by_one(three)
    two = three.without(3, D3)
    assert three.differs_by_one(two)
    assert not four.differs_by_one(two)
    replaced = two.with_voter(Voter(3, D9))  # the same node on a new disk: two changes from `three`
    assert not three.differs_by_one(replaced)
    with pytest.raises(ValueError):
        three.with_voter(Voter(2, D9))  # a node is one voter
    with pytest.raises(ValueError):
        three.without(2, D9)  # not that voter
    with pytest.raises(ValueError):
        VoterSet((Voter(1, D1),)).without(1, D1)


@given(st.lists(st.tuples(st.integers(0, 2 ** 31 - 1), st.uuids() | st.none(),
                          st.sampled_from(["", "h1", "node-2.example"]), st.integers(1, 65535)),
                min_size=1, max_size=7, unique_by=lambda t: t[0]))
def test_the_voters_record_round_trips(entries):
    voters = VoterSet(tuple(Voter(n, d if d is None or d.int else None, h, p if h else 0) for n, d, h, p in entries))
    parts: list = []
    messages.VotersRecord.encode(voters.to_record(), 0, parts)
    data = b"".join(bytes(p) for p in parts)
    record, end = messages.VotersRecord.decode(memoryview(data), 0, 0)
    assert end == len(data)
    assert VoterSet.from_record(record) == voters


def test_the_control_batch_holds_the_version_then_the_voters():
    voters = VoterSet((Voter(1, D1, "a", 1), Voter(2, D2, "b", 2)))
    batch = voters_batch(voters, epoch=7, now_ms=1000)
    header = parse_batch_header(batch)
    assert header.is_control and header.partition_leader_epoch == 7 and header.records_count == 2
    records = decode_records(bytes(batch), header)
    assert [parse_control_record_key(r.key)[1] for r in records] == [ControlType.KRAFT_VERSION,
                                                                     ControlType.KRAFT_VOTERS]
    record, _ = messages.VotersRecord.decode(memoryview(records[1].value), 0, 0)
    assert VoterSet.from_record(record) == voters
    only = voters_batch(voters, epoch=7, now_ms=1000, with_version=False)
    assert parse_batch_header(only).records_count == 1
