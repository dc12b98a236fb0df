"""A voter keeps its listener current in the metadata quorum's VotersRecord (KIP-853's
UpdateRaftVoter): once the quorum records its voters, a voter whose recorded endpoint is not its
advertised listener asks the leader to record it. (kraftd reaches nodes at their registered
listeners; the VotersRecord's endpoints are what DescribeQuorum and Kafka's tools read.)"""
from __future__ import annotations

from ...protocol import api
from ...protocol import messages as m
from ..raft.membership import propose_update_voter
from ..raft.voter_set import Voter

RETRY_MS = 2000


class VoterListener:
    def __init__(self) -> None:
        self._in_flight = False
        self._next_ms = 0

    def poll(self, plane, now_ms: int) -> None:
        group = plane.partition.raft if plane.partition is not None else None
        if group is None or self._in_flight or now_ms < self._next_ms or group.log_voters.offset() < 0:
            return
        c = plane.config
        me = group.voter_set.get(plane.node_id)
        if me is None or me.directory_id != plane.replication.directory_id or \
                (me.host, me.port) == (c.advertised_host, c.advertised_port):
            return
        if group.is_leader:  # our own entry: no request to ourselves
            error, _ = propose_update_voter(group, Voter(plane.node_id, me.directory_id, c.advertised_host,
                                                         c.advertised_port), now_ms)
            self._next_ms = now_ms + (0 if not error else RETRY_MS)
            return
        request = m.UpdateRaftVoterRequest(
            cluster_id=plane.replication.cluster_id, current_leader_epoch=group.epoch, voter_id=plane.node_id,
            voter_directory_id=me.directory_id,
            listeners=[m.UpdateRaftVoterRequest.Listener(name="PLAINTEXT", host=c.advertised_host,
                                                         port=c.advertised_port)],
            k_raft_version_feature=m.UpdateRaftVoterRequest.KRaftVersionFeature(min_supported_version=0,
                                                                                 max_supported_version=1))

        def done(response, at_ms):
            self._in_flight = False
            self._next_ms = at_ms + (0 if response is not None and response.error_code == 0 else RETRY_MS)

        if plane.call_controller(api.UPDATE_RAFT_VOTER, 0, request, now_ms, done):
            self._in_flight = True
        else:
            self._next_ms = now_ms + RETRY_MS
