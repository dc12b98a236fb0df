"""The leader's view of its voters: how far each has durably reached, and when it last fetched.

HW (KIP-595): the largest offset a majority of voters have durably reached, counting the
leader's own *flushed* offset; it moves only once that offset passes the epoch's start offset
(so an entry of an older epoch is committed only through one of this epoch), and never back.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class VoterProgress:
    end_offset: int = -1          # the durable offset it reported (a follower's fetch offset)
    last_fetch_ms: int = -1
    prev_fetch_ms: int = -1       # the fetch before that one
    last_caught_up_ms: int = -1   # the last time it had everything the leader had
    leader_end_at_fetch: int = -1  # the leader's log end when it last fetched


class ReplicaProgress:
    def __init__(self, leader_id: int, voters: tuple[int, ...], now_ms: int) -> None:
        self.leader_id = leader_id
        self.voters = voters
        self.by_voter: dict[int, VoterProgress] = {v: VoterProgress() for v in voters}
        self.observers: dict[int, VoterProgress] = {}
        self.by_voter[leader_id].last_fetch_ms = now_ms
        self.started_ms = now_ms  # when this leadership began

    def set_voters(self, voters: tuple[int, ...]) -> None:
        """The voter set changed (KIP-853): a new voter keeps what it reported as an observer,
        a removed one becomes an observer."""
        for v in voters:
            if v not in self.by_voter:
                self.by_voter[v] = self.observers.pop(v, None) or VoterProgress()
        for v in [v for v in self.by_voter if v not in voters]:
            self.observers.setdefault(v, self.by_voter.pop(v))  # (the node on a new disk's, if it fetches)
        self.voters = voters

    def majority_offset(self, leader_durable: int) -> int:
        """The offset a majority of voters has durably reached (the leader counts `leader_durable`)."""
        offsets = sorted((leader_durable if v == self.leader_id else p.end_offset
                          for v, p in self.by_voter.items()), reverse=True)
        return offsets[len(offsets) // 2]

    def record_fetch(self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: int,
                     caught_up_until: int = -1, is_voter: bool = True) -> bool:
        """A follower fetched from `fetch_offset`, which it has durably reached. True for voters.
        `is_voter` False: a node with a voter's id fetching from another directory (a replaced
        disk, KIP-853) counts as an observer, never as that voter."""
        p = self.by_voter.get(replica_id) if is_voter else None
        voter = p is not None
        if p is None:
            p = self.observers.setdefault(replica_id, VoterProgress())
        if fetch_offset >= leader_end:
            p.last_caught_up_ms = now_ms
        elif caught_up_until >= 0:
            # It has everything we had until our log grew past its end (our append history).
            p.last_caught_up_ms = max(p.last_caught_up_ms, caught_up_until)
        elif 0 <= p.leader_end_at_fetch <= fetch_offset:
            # Kafka's rule: it now has what we had at its previous fetch, so it was caught up
            # then (under steady writes a follower is never level with the log end itself).
            p.last_caught_up_ms = max(p.last_caught_up_ms, p.last_fetch_ms)
        p.end_offset = fetch_offset
        p.prev_fetch_ms = p.last_fetch_ms
        p.last_fetch_ms = now_ms
        p.leader_end_at_fetch = leader_end
        return voter

    def alive_majority(self, now_ms: int, window_ms: int, session_fetch_ms) -> bool:
        """Check-quorum: a majority (the leader included) fetched within the window.
        `session_fetch_ms(v)`: when v last fetched through a session holding this group."""
        alive = 1 if self.leader_id in self.by_voter else 0  # (a leader removing itself is no voter)
        for v, p in self.by_voter.items():
            if v == self.leader_id:
                continue
            last = max(p.last_fetch_ms, session_fetch_ms(v))
            if last >= 0 and now_ms - last <= window_ms:
                alive += 1
        return alive > len(self.by_voter) // 2

    def min_live_offset(self, now_ms: int, window_ms: int, session_fetch_ms) -> int | None:
        """The smallest end offset among replicas that fetched within the window (log-start gating)."""
        offsets = []
        for v, p in list(self.by_voter.items()) + list(self.observers.items()):
            if v == self.leader_id:
                continue
            last = max(p.last_fetch_ms, session_fetch_ms(v))
            if last >= 0 and now_ms - last <= window_ms:
                offsets.append(p.end_offset)
        return min(offsets) if offsets else None

    def quiet_voters(self, now_ms: int, window_ms: int, session_fetch_ms) -> set[int]:
        """Other voters that have not fetched within the window (a session fetch that did not
        name this partition counts, once the voter has fetched it in this epoch)."""
        quiet = set()
        for v, p in self.by_voter.items():
            if v == self.leader_id:
                continue
            last = max(p.last_fetch_ms, session_fetch_ms(v))
            if last < 0 or now_ms - last > window_ms:
                quiet.add(v)
        return quiet

    def successors(self) -> list[int]:
        """Other voters, most caught-up first (EndQuorumEpoch's PreferredSuccessors)."""
        others = [(p.end_offset, v) for v, p in self.by_voter.items() if v != self.leader_id]
        return [v for _, v in sorted(others, key=lambda t: (-t[0], t[1]))]


def caught_up_until(log_, offset: int) -> int:
    """When the leader's log last ended at or before `offset`: a follower whose log ends there
    had everything we had until that moment (-1: not in the recent append history)."""
    appends = getattr(log_, "leader_appends", None)
    if not appends or appends[0][0] > offset:
        return -1
    for before, at_ms in reversed(appends):
        if before <= offset:
            # The append at or after `offset` follows this one (or none has happened since).
            return at_ms
    return -1
