"""The follower side: our Fetch streams, one per leader we follow (fetcher.py), and what we
know of each leader's reachability from them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from .fetcher import FetchStream

if TYPE_CHECKING:
    from .group import RaftGroup


class FetchStreams:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.by_leader: dict[int, FetchStream] = {}

    def follow(self, group: RaftGroup, leader_id: int) -> None:
        if leader_id == self.node_id or leader_id < 0:
            return
        self.by_leader.setdefault(leader_id, FetchStream(leader_id)).add(group)

    def unfollow(self, group: RaftGroup, leader_id: int) -> None:
        stream = self.by_leader.get(leader_id)
        if stream is not None:
            stream.remove(group)

    def remove(self, group: RaftGroup) -> None:
        for stream in self.by_leader.values():
            stream.remove(group)

    def of(self, group: RaftGroup) -> FetchStream | None:
        """The stream of the leader `group` follows, if any."""
        return self.by_leader.get(group.leader_id)

    def ready(self, now_ms: int) -> Iterator[FetchStream]:
        return (stream for stream in self.by_leader.values() if stream.ready(now_ms))

    def next_send_ms(self) -> list[int]:
        return [stream.next_send_ms for stream in self.by_leader.values()
                if not stream.in_flight and not stream.unflushed and (stream.groups or stream.sent)]

    # -- each leader's reachability ----------------------------------------------------------
    def last_heard_from(self, leader_id: int) -> int:
        stream = self.by_leader.get(leader_id)
        return stream.last_success_ms if stream is not None else -1

    def heard_from(self, leader_id: int, now_ms: int) -> None:
        stream = self.by_leader.get(leader_id)
        if stream is not None:
            stream.last_success_ms = max(stream.last_success_ms, now_ms)

    def unreachable(self, node_id: int, now_ms: int, grace_ms: int, rng) -> None:
        """The shell could not reach `node_id`: if we follow it, its groups may stand after
        `grace_ms`, unless it answers meanwhile."""
        stream = self.by_leader.get(node_id)
        if stream is None:
            return
        if stream.unreachable_since_ms < 0:
            stream.unreachable_since_ms = now_ms
        for group in list(stream.groups.values()):
            # Jitter: every follower hears of the loss at once; standing at once too, they
            # would split the vote (the benchmark saw three elections in a row).
            group.leader_unreachable(stream.unreachable_since_ms + grace_ms + rng.randrange(grace_ms + 1), now_ms)

    def leader_unreachable(self, leader_id: int, now_ms: int, grace_ms: int) -> bool:
        stream = self.by_leader.get(leader_id)
        return (stream is not None and stream.unreachable_since_ms >= 0
                and now_ms - stream.unreachable_since_ms >= grace_ms)
