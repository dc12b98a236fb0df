"""When a group's next election may start: the election timeout with jitter, the backoff after
a lost election, and the turns of a resigned leader's successors."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .group import RaftGroup


class ElectionTiming:
    def __init__(self, group: RaftGroup) -> None:
        self.group = group
        self.retries = 0  # elections lost in a row (reset on winning one)

    def election_deadline(self, now_ms: int) -> int:
        group = self.group
        if not group.may_stand:
            # An observer, or a voter that may not vote yet (a replaced disk catching up), never
            # stands; this deadline is when it next looks for the leader. (Waiting for the
            # leader's BeginQuorumEpoch is not enough: the leader may no longer count this
            # node's directory among its voters, KIP-853.)
            return now_ms + group.env.config.retry_backoff_ms
        if group.voters == (group.node_id,):
            return now_ms  # a group of one: nobody to wait for
        return self.round_deadline(now_ms)

    def round_deadline(self, now_ms: int) -> int:
        """An election timeout with as much jitter: when a (pre-)election round gives up."""
        base = self.group.env.config.election_timeout_ms
        return now_ms + base + self.group.env.rng.randrange(base + 1)

    def backoff_deadline(self, now_ms: int) -> int:
        """After a lost election: exponential backoff with jitter (Kafka's election backoff).
        Two followers of a dead leader that stood within a vote's round trip of each other
        split the vote; the first of them to stand again wins, so the wait is the retry backoff
        plus jitter much wider than a round trip (it used to start at half an election timeout,
        which made such a failover ~0.5 s slower than it needs to be)."""
        if not self.group.may_stand:
            return -1
        self.retries += 1
        config = self.group.env.config
        upper = min(config.election_backoff_max_ms, 200 * (1 << min(self.retries, 10)))
        return now_ms + config.retry_backoff_ms + self.group.env.rng.randrange(upper + 1)

    def successor_turn(self, successors: list[int], now_ms: int) -> int:
        """The most caught-up successor stands first; the others wait their turn (KIP-595)."""
        group = self.group
        position = successors.index(group.node_id) if group.node_id in successors else len(group.voters)
        step = group.env.config.election_timeout_ms // 4
        return now_ms + position * step + group.env.rng.randrange(step // 2 + 1)
