"""What a RaftGroup and its role need from the node that hosts it (`Replication` is the one
implementation; a test may bring its own)."""
from __future__ import annotations

from typing import Any, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from random import Random

    from .config import BugSwitches, RaftConfig
    from .group import RaftGroup


class GroupEnv(Protocol):
    node_id: int
    config: RaftConfig
    rng: Random             # election jitter and backoff
    bugs: BugSwitches
    fsync_never: bool       # nothing waits for a flush: the log end counts as durable
    directory_id: Any       # this node's data dir (KIP-853: a voter is (node id, directory id))

    # -- timers and durability
    def schedule(self, group: RaftGroup, deadline_ms: int) -> None:
        """Call `group.poll` at `deadline_ms` if the group still waits for it then."""

    def persist(self, group: RaftGroup) -> None:
        """Write the group's ElectionState before this step's sends go out."""

    def forget_persist(self, group: RaftGroup) -> None:
        """Test-only (BugSwitches.vote_not_persisted): the vote is never made durable."""

    # -- following a leader
    def follow(self, group: RaftGroup, leader_id: int) -> None: ...

    def unfollow(self, group: RaftGroup, leader_id: int) -> None: ...

    def last_heard_from(self, leader_id: int) -> int:
        """When a fetch from that leader last succeeded (-1: never)."""

    def leader_unreachable(self, leader_id: int, now_ms: int) -> bool:
        """Its node has refused or reset our connections for the grace period."""

    def follower_fetch_ms(self, replica_id: int, key) -> int:
        """When that follower last fetched the group from us through its session (-1: never)."""

    # -- election RPCs (batched per destination)
    def send_vote(self, voter: int, group: RaftGroup, pre_vote: bool, epoch: int, last_epoch: int,
                  last_offset: int) -> None: ...

    def send_begin_epoch(self, voter: int, group: RaftGroup) -> None: ...

    def send_end_epoch(self, voter: int, group: RaftGroup, successors: list[int]) -> None: ...

    # -- what the node hears of
    def begin_epoch(self, group: RaftGroup, now_ms: int, granted: list[int]) -> None:
        """A new leader: append its LeaderChange batch (this epoch's start offset)."""

    def append_voters(self, group: RaftGroup, voter_set, now_ms: int) -> int:
        """The leader changes the voters: append a VotersRecord; its offset (KIP-853)."""

    def follower_directory(self, replica_id: int) -> Any:
        """The directory id that follower's fetches say (None: not heard)."""

    def record_election_latency(self, ms: int) -> None: ...

    def hw_moved(self, group: RaftGroup) -> None: ...

    def leadership_lost(self, group: RaftGroup) -> None: ...
