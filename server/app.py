"""Process lifecycle: bind, open the node, serve, and shut down cleanly on SIGTERM/SIGINT.

`serve(settings)` is what `kraftd serve` runs; `node_factory` lets tests drive a fake core.
"""
from __future__ import annotations

import asyncio
import signal
import time
from typing import Callable

import structlog
import uvloop

from ..config.settings import Settings, format_host_port

from .broker import Broker, Durability, now_ms
from .connection import KafkaConnection
from .connection_limits import (FD_RESERVE, FDS_PER_PARTITION, ConnectionLimits, fit_descriptor_limit,
                                open_file_limit)
from .hw_checkpoints import HighWatermarkCheckpointer
from .heap_freeze import freeze_startup_heap
from .malloc_tuning import tune_malloc
from .metrics import MetricsHttpServer, ServerMetrics
from .node_api import NodeApi
from .node_auth import NodeCredentials
from .node_files import open_file_node
from .tls import listener_context, peer_context

log = structlog.get_logger("kraftd.app")

# How long shutdown waits for in-flight requests (parked fetches, acks=-1 produces).
SHUTDOWN_GRACE_S = 5.0
# How long SIGTERM waits for other nodes to take over the leaderships this node gave up.
HANDOVER_WAIT_S = 3.0
# A TLS client has this long to finish its handshake (asyncio's default is 60 s).
TLS_HANDSHAKE_TIMEOUT_S = 10.0

NodeFactory = Callable[[dict, int], NodeApi]  # (to_node_config() dict, now_ms) -> node


class KraftdServer:
    def __init__(self, settings: Settings, node_factory: NodeFactory = open_file_node) -> None:
        self.settings = settings
        self._node_factory = node_factory
        self.metrics = ServerMetrics()
        self.node: NodeApi | None = None
        self.broker: Broker | None = None
        self.kafka_address: tuple[str, int] | None = None
        self.metrics_address: tuple[str, int] | None = None
        self._listener: asyncio.AbstractServer | None = None
        self._metrics_http: MetricsHttpServer | None = None
        self._serving = False
        self._stop = asyncio.Event()
        self.freezes_heap = False  # serve() sets it: not for a server inside a test process
        self._hw_checkpoints: HighWatermarkCheckpointer | None = None

    @property
    def serving(self) -> bool:
        return self._serving

    def request_stop(self) -> None:
        self._stop.set()

    async def start(self) -> None:
        s = self.settings
        loop = asyncio.get_running_loop()
        host, port = s.listen_address
        tls = (listener_context(s.tls_cert_file, s.tls_key_file, s.tls_ca_file, s.tls_client_auth)
               if s.uses_tls else None)
        # Bind before opening the node: with port 0 the node must advertise the real port.
        self._listener = await loop.create_server(
            self._new_connection, host, port, start_serving=False, reuse_address=True,
            backlog=1024, ssl=tls, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if tls else None)
        self.kafka_address = self._listener.sockets[0].getsockname()[:2]
        config = s.to_node_config(bound_port=self.kafka_address[1])
        nofile = open_file_limit()
        max_connections, config["max_partitions"] = fit_descriptor_limit(s.max_connections, s.max_partitions, nofile)
        if (max_connections, config["max_partitions"]) != (s.max_connections, s.max_partitions):
            log.warning("the open file limit cannot hold max_connections and max_partitions: both lowered",
                        nofile=nofile, max_connections=max_connections, max_partitions=config["max_partitions"],
                        configured=(s.max_connections, s.max_partitions),
                        needs=s.max_connections + FDS_PER_PARTITION * s.max_partitions + FD_RESERVE)
        self.node = await loop.run_in_executor(None, self._node_factory, config, now_ms())
        self.metrics.watch_node(lambda: self.node)
        self.metrics.observe_snapshot_loads(self.node)
        aio = None
        if s.fsync_aio and s.fsync_policy != "never":
            from ..storage.aio_fsync import AioFsync
            aio = await loop.run_in_executor(None, AioFsync.open, s.data_dir)
            log.info("segment fsyncs through native AIO" if aio else
                     "native AIO fsync does not work here; fsyncs on the loop and in the fsync pool")
        credentials = (NodeCredentials(s.cluster_secret.get_secret_value().encode())
                       if s.cluster_secret is not None else None)
        durability = Durability(fsync_policy=s.fsync_policy, flush_interval_ms=s.flush_interval_ms,
                                fsync_inline_max_bytes=s.fsync_inline_max_bytes, aio=aio)
        self.broker = Broker(self.node, durability=durability, metrics=self.metrics, node_credentials=credentials,
                             limits=ConnectionLimits(max_connections, s.max_connections_per_ip),
                             sasl_mechanisms=tuple(s.sasl_mechanism_list) if s.uses_sasl else ())
        self.broker.on_fatal = self.request_stop
        if s.voters:
            from ..config.settings import parse_voters

            from .peers import PeerLinks
            broker = self.broker
            self.broker.peers = PeerLinks(s.node_id, parse_voters(s.voters), on_response=broker.on_peer_response,
                                          on_unreachable=broker.on_peer_unreachable,
                                          resolve=lambda node_id: self.node.broker_address(node_id),
                                          credentials=credentials,
                                          tls=(peer_context(s.tls_cert_file, s.tls_key_file, s.tls_ca_file)
                                               if tls is not None else None))
        self._metrics_http = MetricsHttpServer(
            self.metrics.registry, lambda: self._serving,
            post_routes={"/admin/snapshot": self.broker.snapshots.request})
        self.metrics_address = await self._metrics_http.start(*s.metrics_address)
        if self.freezes_heap:  # before the loop-lag heartbeat and the listener start: ~20 ms
            log.info("startup heap frozen", objects=freeze_startup_heap())
        self.broker.start()
        self.metrics.loop_lag.start()
        self._hw_checkpoints = HighWatermarkCheckpointer(self.node, s.data_dir)
        self._hw_checkpoints.start()
        await self._listener.start_serving()
        self._serving = True
        log.info("metrics listening on " + format_host_port(*self.metrics_address))
        # Tests and scripts wait for this exact line; it names the actual (maybe ephemeral) port.
        log.info("kraftd listening on " + format_host_port(*self.kafka_address),
                 node_id=s.node_id, data_dir=s.data_dir, fsync_policy=s.fsync_policy)

    async def _hand_over_leadership(self) -> None:
        """SIGTERM in a cluster: resign every leadership (EndQuorumEpoch names successors) and
        keep serving until other nodes lead them, so clients move with at most a short stall."""
        broker, node = self.broker, self.node
        if broker is None or broker.peers is None or node is None or broker.fatal is not None:
            return
        if not node.resign_all(now_ms()):
            return
        broker.kick()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HANDOVER_WAIT_S
        while node.still_leading() and loop.time() < deadline:
            await asyncio.sleep(0.02)
        log.info("leadership handed over", still_leading=node.still_leading())

    def _new_connection(self) -> KafkaConnection:
        s = self.settings
        return KafkaConnection(self.broker, max_frame_bytes=s.socket_request_max_bytes,
                               idle_timeout_s=s.connections_max_idle_ms / 1000,
                               metrics=self.metrics, tls=s.uses_tls)

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self.start()
            await self._stop.wait()
        finally:
            await self.shutdown()
        return 1 if (self.broker is not None and self.broker.fatal is not None) else 0

    async def shutdown(self) -> None:
        """Stop accepting, answer what is in flight, fsync, close the node."""
        self.metrics.loop_lag.stop()
        log.info("kraftd shutting down")
        await self._hand_over_leadership()
        self._serving = False
        if self._listener is not None:
            self._listener.close()
        broker = self.broker
        if broker is not None:
            for conn in list(broker.connections):
                conn.stop_reading()
            if broker.fatal is None:
                if self.settings.fsync_policy != "never":
                    await broker.flush_logs()  # completes parked acks=-1 produces
                broker.drain_parked()
            deadline = asyncio.get_running_loop().time() + SHUTDOWN_GRACE_S
            while (any(c.pending_count for c in broker.connections)
                   and asyncio.get_running_loop().time() < deadline and broker.fatal is None):
                await asyncio.sleep(0.01)
            await broker.stop()
            if broker.peers is not None:
                broker.peers.close()
            for conn in list(broker.connections):
                conn.close("shutdown")
        if self._metrics_http is not None:
            await self._metrics_http.close()
        if self.node is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.node.close)
            if self._hw_checkpoints is not None:  # after close: every log flushed, so the HWs count in full
                await self._hw_checkpoints.stop()
            self.node = None
        await asyncio.sleep(0)  # let transports run their close callbacks
        log.info("kraftd stopped")


def serve(settings: Settings, node_factory: NodeFactory = open_file_node) -> int:
    """Run the daemon until SIGTERM/SIGINT; returns the process exit code."""

    async def main() -> int:
        server = KraftdServer(settings, node_factory)
        server.freezes_heap = True  # a process of its own (server/heap_freeze.py)
        return await server.run()

    _raise_open_file_limit()
    tune_malloc()
    return uvloop.run(main())


def _raise_open_file_limit() -> None:
    """A broker holds a descriptor per segment (and per mapped segment): use the hard limit."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))
    except (ImportError, ValueError, OSError):
        pass
