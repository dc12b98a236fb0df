"""Node-to-node connections: a follower's long-poll Fetch, parked by the leader, holds up
nothing else. FetchSnapshot chunks and Votes go to the same peer on their own connections
(a Kafka connection answers in request order; FetchSnapshot behind a parked Fetch made a
1 GiB disk-loss rejoin run at 2 MB/s)."""
from __future__ import annotations

import asyncio

from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.framing import decode_request, encode_response, frame_bytes
from kraftd.quorum.raft import rpc
from kraftd.quorum.raft.fetcher import FETCH_VERSION
from kraftd.server.peers import PeerLinks


class ParkingPeer(asyncio.Protocol):
    """Answers everything at once except Fetch, which it never answers (a parked long poll)."""

    connections: list = []

    def connection_made(self, transport) -> None:
        self.transport, self.buffer = transport, b""
        self.apis: list[int] = []
        ParkingPeer.connections.append(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(self.buffer[:4], "big"):
            size = int.from_bytes(self.buffer[:4], "big")
            frame, self.buffer = self.buffer[4:4 + size], self.buffer[4 + size:]
            header, _ = decode_request(frame)
            self.apis.append(header.request_api_key)
            answer = {api.FETCH_SNAPSHOT: m.FetchSnapshotResponse(throttle_time_ms=0, error_code=0, topics=[]),
                      api.VOTE: m.VoteResponse(error_code=0, topics=[])}.get(header.request_api_key)
            if answer is not None:
                parts: list = []
                encode_response(header, answer, parts)
                self.transport.write(frame_bytes(parts))


async def test_fetch_snapshot_and_vote_are_answered_while_a_fetch_is_parked():
    ParkingPeer.connections = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(ParkingPeer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    answered: dict[int, asyncio.Future] = {n: loop.create_future() for n in (1, 2, 3)}
    links = PeerLinks(1, {2: ("127.0.0.1", port)},
                      on_response=lambda node, corr, body: answered[corr].set_result(body),
                      on_unreachable=lambda node: None)
    try:
        fetch = m.FetchRequest(replica_id=1, max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[],
                               forgotten_topics_data=[], rack_id="")
        links.send([rpc.Send(2, api.FETCH, FETCH_VERSION, fetch, 1),
                    rpc.Send(2, api.FETCH_SNAPSHOT, rpc.FETCH_SNAPSHOT_VERSION,
                             rpc.fetch_snapshot_request("c", 1, 1 << 20, []), 2),
                    rpc.Send(2, api.VOTE, rpc.VOTE_VERSION, rpc.vote_request("c", 2, []), 3)])
        snapshot = await asyncio.wait_for(answered[2], 5)
        vote = await asyncio.wait_for(answered[3], 5)
        assert isinstance(snapshot, m.FetchSnapshotResponse) and isinstance(vote, m.VoteResponse)
        assert not answered[1].done()  # the Fetch is still parked
        assert sorted(c.apis for c in ParkingPeer.connections) == sorted(
            [[api.FETCH], [api.FETCH_SNAPSHOT], [api.VOTE]])
    finally:
        links.close()
        server.close()
        await server.wait_closed()
