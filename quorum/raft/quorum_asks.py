"""The election RPCs between groups: each step's Vote, BeginQuorumEpoch and EndQuorumEpoch asks
become one request per destination and API, and each answer goes back to its groups."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...protocol import api
from ...protocol.errors import ErrorCode

from . import rpc
from .in_flight import InFlight
from .rpc import VoteAsk
from .votes import VoteAnswer

if TYPE_CHECKING:
    from .group import RaftGroup

# (destination, api key, version, request, now_ms, context) -> None: start a request
StartRequest = Callable[..., None]


class QuorumAsks:
    def __init__(self, node_id: int, cluster_id: str, groups: dict) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.groups = groups  # the driver's table, shared: an answer for a removed group is dropped
        self._votes: dict[int, list] = {}
        self._begins: dict[int, list] = {}
        self._ends: dict[int, list] = {}

    def vote(self, voter: int, group: RaftGroup, pre_vote: bool, epoch: int, last_epoch: int,
             last_offset: int) -> None:
        known = group.voter_set.get(voter)
        self._votes.setdefault(voter, []).append(VoteAsk(
            group.key, pre_vote, epoch, self.node_id, last_epoch, last_offset, group.env.directory_id,
            known.directory_id if known is not None else None))

    def begin_epoch(self, voter: int, group: RaftGroup) -> None:
        self._begins.setdefault(voter, []).append((group.key, self.node_id, group.epoch))

    def end_epoch(self, voter: int, group: RaftGroup, successors: list[int]) -> None:
        self._ends.setdefault(voter, []).append((group.key, self.node_id, group.epoch, list(successors)))

    def flush(self, start: StartRequest, now_ms: int) -> None:
        """Turn this step's per-group asks into one request per destination and API."""
        votes, self._votes = self._votes, {}
        for voter, asks in sorted(votes.items()):
            start(voter, api.VOTE, rpc.VOTE_VERSION, rpc.vote_request(self.cluster_id, voter, asks), now_ms,
                  {a.key: a for a in asks})
        begins, self._begins = self._begins, {}
        for voter, groups in sorted(begins.items()):
            start(voter, api.BEGIN_QUORUM_EPOCH, rpc.BEGIN_QUORUM_EPOCH_VERSION,
                  rpc.begin_epoch_request(self.cluster_id, voter, groups), now_ms)
        ends, self._ends = self._ends, {}
        for voter, groups in sorted(ends.items()):
            start(voter, api.END_QUORUM_EPOCH, rpc.END_QUORUM_EPOCH_VERSION,
                  rpc.end_epoch_request(self.cluster_id, groups), now_ms)

    # -- answers -----------------------------------------------------------------------------
    def on_response(self, flight: InFlight, response, now_ms: int) -> None:
        if flight.api_key == api.VOTE:
            self._on_vote_response(flight.destination, flight.context, response, now_ms)
        elif flight.api_key == api.BEGIN_QUORUM_EPOCH:
            self._on_epoch_response(flight.destination, response, now_ms, begin=True)
        elif flight.api_key == api.END_QUORUM_EPOCH:
            self._on_epoch_response(flight.destination, response, now_ms, begin=False)

    def on_failure(self, flight: InFlight, now_ms: int) -> None:
        if flight.api_key == api.VOTE:
            # A voter we cannot reach gives no vote this round: with the others' refusals the
            # election is lost now (a split vote backs off at once, not after its timeout).
            for key, ask in flight.context.items():
                group = self.groups.get(key)
                if group is not None:
                    group.on_vote_unanswered(flight.destination, ask.pre_vote, ask.epoch, now_ms)
        # BeginQuorumEpoch and EndQuorumEpoch (and unanswered votes) are resent by the roles' timers.

    def _on_vote_response(self, voter: int, asks: dict, response, now_ms: int) -> None:
        if response.error_code != 0:
            return
        for topic in response.topics:
            for p in topic.partitions:
                key = (topic.topic_name, p.partition_index)
                ask, group = asks.get(key), self.groups.get(key)
                if ask is None or group is None:
                    continue
                group.on_vote_response(voter, VoteAnswer(ask.epoch, p.error_code, p.leader_id, p.leader_epoch,
                                                         p.vote_granted), ask.pre_vote, now_ms)

    def _on_epoch_response(self, voter: int, response, now_ms: int, *, begin: bool) -> None:
        if response.error_code != 0:
            return
        for topic in response.topics:
            for p in topic.partitions:
                group = self.groups.get((topic.topic_name, p.partition_index))
                if group is None:
                    continue
                if group.observe_leader(p.leader_id, p.leader_epoch, now_ms):
                    continue
                if p.error_code == 0 and p.leader_epoch == group.epoch:
                    (group.on_begin_epoch_acked if begin else group.on_end_epoch_acked)(voter)
                elif begin and p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    group.on_begin_epoch_unknown(voter, now_ms)
