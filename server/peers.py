"""Node-to-node transport: up to three Kafka connections per peer (follower fetches, snapshot
chunks, every other request: `LANES`), the core's Sends written in order, answers matched by correlation id
and handed back to the node.

A peer is reached at the address this node's --voters gives for it. Connections are made on
the first send and remade after a failure with exponential backoff; while a peer cannot be
reached its sends fail at once (`on_unreachable`) and the core's own timers retry.

With a cluster secret, a new connection first authenticates as `User:kraftd-node-<id>`
(SaslHandshake + SCRAM-SHA-512, server/sasl.py), and only then carries the core's requests: the
peer believes our replica, voter and leader ids only on such a connection. SCRAM's last answer
proves the peer knows the secret too; a peer that cannot is logged and treated as unreachable.
"""
from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Callable

import structlog

from ..protocol import messages as m
from ..protocol.framing import decode_response, encode_request, frame_bytes
from ..server.frame_reader import FrameReader, FrameSizeError
from ..server.node_auth import NodeCredentials, node_user
from ..server.sasl import AuthenticationFailed, NodeAuthExchange

log = structlog.get_logger("kraftd.peers")

_SIZE = struct.Struct(">i")
CONNECT_TIMEOUT_S = 2.0
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0
MAX_FRAME = 256 * 1024 * 1024
FETCH_API, FETCH_SNAPSHOT_API = 1, 59
# A Kafka connection answers in request order, so each kind of request that must not wait
# behind another gets its own connection to the peer ("lane"):
# - "fetch": the follower's long-poll Fetch, parked by the leader up to fetch_max_wait_ms;
# - "snapshot": FetchSnapshot chunks, answered at once; behind a parked Fetch every 1 MiB chunk
#   waited up to 500 ms (a 1 GiB rejoin ran at 2 MB/s);
# - "control": Vote, BeginQuorumEpoch, EndQuorumEpoch and the controller RPCs; behind a parked
#   Fetch a Vote waited for it, and the benchmark saw split votes last seconds that way.
LANES = {FETCH_API: "fetch", FETCH_SNAPSHOT_API: "snapshot"}
AUTH_CORRELATION = -1  # the SASL exchange's requests (the core's correlation ids are positive)


class PeerLink(asyncio.BufferedProtocol):
    """The connection to one peer (reconnecting); requests are pipelined."""

    def __init__(self, links: "PeerLinks", node_id: int, address: tuple[str, int]) -> None:
        self._links = links
        self.node_id = node_id
        self.address = address
        self._transport: asyncio.Transport | None = None
        self._connecting: asyncio.Task | None = None
        self._queue: list[tuple[int, bytes]] = []          # (correlation, frame) until connected
        self._in_flight: dict[int, tuple[int, int]] = {}   # correlation -> (api key, version)
        self._reader = FrameReader(MAX_FRAME)
        self._backoff = BACKOFF_MIN_S
        self._next_attempt = 0.0
        self._ready = False                       # connected and (with a secret) authenticated
        self._auth: NodeAuthExchange | None = None
        self._auth_kind: tuple[int, int] | None = None  # (api key, version) of the step in flight

    # -- sending -------------------------------------------------------------------------------
    def send(self, send) -> None:
        header = m.RequestHeader(request_api_key=send.api_key, request_api_version=send.api_version,
                                 correlation_id=send.correlation_id, client_id=self._links.client_id)
        parts: list = []
        encode_request(header, send.request, parts)
        frame = frame_bytes(parts)
        self._in_flight[send.correlation_id] = (send.api_key, send.api_version)
        if self._ready:
            self._transport.write(frame)
            return
        if self._transport is not None:  # still authenticating
            self._queue.append((send.correlation_id, frame))
            return
        loop = asyncio.get_running_loop()
        if self._connecting is None and loop.time() < self._next_attempt:
            self._fail_all()  # backing off: the core retries on its own timers
            return
        self._queue.append((send.correlation_id, frame))
        if self._connecting is None:
            self._connecting = loop.create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = self._links.tls
            await asyncio.wait_for(loop.create_connection(lambda: self, *self.address, ssl=tls,
                                                          server_hostname=self.address[0] if tls else None),
                                   CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as e:
            self._next_attempt = loop.time() + self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            log.debug("peer unreachable", peer=self.node_id, address=self.address, error=repr(e))
            self._queue.clear()
            self._fail_all()
        finally:
            self._connecting = None

    # -- asyncio callbacks ---------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self._transport = transport
        credentials = self._links.credentials
        if credentials is None:
            self._become_ready()
            return
        self._auth = NodeAuthExchange(node_user(self._links.node_id), credentials.password(self._links.node_id))
        self._send_auth_step()

    def _become_ready(self) -> None:
        self._ready = True
        self._backoff = BACKOFF_MIN_S
        self._links.auth_failures.pop(self.node_id, None)
        queued, self._queue = self._queue, []
        if queued:
            self._transport.write(b"".join(frame for _, frame in queued))

    def _send_auth_step(self) -> None:
        api_key, version, request = self._auth.next_request()
        header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                                 correlation_id=AUTH_CORRELATION, client_id=self._links.client_id)
        parts: list = []
        encode_request(header, request, parts)
        self._auth_kind = (api_key, version)
        self._transport.write(frame_bytes(parts))

    def _on_auth_frame(self, frame) -> None:
        try:
            _, body = decode_response(memoryview(frame), *self._auth_kind)
            self._auth.on_response(body)
        except AuthenticationFailed as e:
            self._auth_failed(str(e))
            return
        except Exception as e:
            self._auth_failed(f"undecodable answer: {e!r}")
            return
        if self._auth.done:
            self._auth = self._auth_kind = None
            self._become_ready()
        else:
            self._send_auth_step()

    def _auth_failed(self, why: str) -> None:
        # Logged when the reason changes, not at every retry (a node with another secret
        # retries for as long as it runs).
        if self._links.auth_failures.get(self.node_id) != why:
            self._links.auth_failures[self.node_id] = why
            log.warning("peer refused: node authentication failed", peer=self.node_id, address=self.address,
                        reason=why)
        loop = asyncio.get_running_loop()
        self._next_attempt = loop.time() + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
        self._auth = self._auth_kind = None
        self._abort("node authentication failed")

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            self._abort(f"bad frame size {e.args[0]}")
            return
        for frame in frames:
            self._on_frame(frame)
            if self._transport is None:
                return

    def _on_frame(self, frame) -> None:
        correlation = _SIZE.unpack_from(frame, 0)[0]
        if correlation == AUTH_CORRELATION and self._auth is not None:
            self._on_auth_frame(frame)
            return
        kind = self._in_flight.pop(correlation, None)
        if kind is None:
            return  # an answer to a request we already gave up on
        try:
            _, body = decode_response(memoryview(frame), *kind)
        except Exception as e:
            self._abort(f"undecodable response: {e!r}")
            return
        self._links.on_response(self.node_id, correlation, body)

    def connection_lost(self, exc) -> None:
        self._transport = None
        self._ready = False
        self._auth = self._auth_kind = None
        self._queue.clear()  # still in _in_flight: reported as failed below
        self._reader.reset()
        self._fail_all()

    def _abort(self, why: str) -> None:
        if self._auth is not None or self._ready:
            log.warning("dropping peer connection", peer=self.node_id, reason=why)
        if self._transport is not None:
            self._transport.abort()

    def _fail_all(self) -> None:
        if self._in_flight:
            self._in_flight.clear()
            self._links.on_unreachable(self.node_id)

    def close(self) -> None:
        if self._connecting is not None:
            self._connecting.cancel()
        if self._transport is not None:
            self._transport.close()


class PeerLinks:
    """Every peer's link; `send(sends)` routes the core's Sends by destination."""

    def __init__(self, node_id: int, addresses: dict[int, tuple[str, int]], *,
                 on_response: Callable[[int, int, object], None], on_unreachable: Callable[[int], None],
                 resolve: Callable[[int], tuple[str, int] | None] = lambda node_id: None,
                 credentials: NodeCredentials | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self.client_id = node_user(node_id)
        self.credentials = credentials  # None: no cluster secret (peers are not asked to believe us)
        self.tls = tls  # the listeners speak TLS: so do the links (server/tls.py, peer_context)
        self.auth_failures: dict[int, str] = {}  # peer -> the last reason logged
        self._addresses = addresses   # voters, as --voters gives them
        self._resolve = resolve       # other brokers: their registered (advertised) address
        self.on_response = on_response
        self._on_unreachable = on_unreachable
        self._links: dict[int, PeerLink] = {}

    def on_unreachable(self, node_id: int) -> None:
        # Never re-enter the node from inside the send loop: report on the next loop turn.
        asyncio.get_running_loop().call_soon(self._on_unreachable, node_id)

    def send(self, sends) -> None:
        for send in sends:
            lane = LANES.get(send.api_key, "control")
            link = self._links.get((send.destination, lane))
            if link is None:
                address = self._addresses.get(send.destination) or self._resolve(send.destination)
                if address is None:
                    log.warning("no address for node", node=send.destination)
                    self.on_unreachable(send.destination)
                    continue
                link = self._links[(send.destination, lane)] = PeerLink(self, send.destination, address)
            link.send(send)

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
