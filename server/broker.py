"""Drives the sans-IO Node from the event loop: dispatch, parked requests, timers, group commit.

What to persist, send, answer, flush and run next is decided by the shell's step
(shell_step.py, shared with the simulation); this module carries it out: election states on
their own thread, flushes through the LogFlusher, snapshot jobs through the SnapshotJobRunner,
the poll timer on the loop. Everything here runs on the loop thread except what those run in
their pools: `log.flush()` (the storage contract allows flush() concurrently with appends on
the loop), `node.write_election_states()`, `job.run()`.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import structlog

from ..quorum.outcomes import NoResponse, Park, Respond
from ..quorum.peer import Peer

from .clocks import now_ms  # noqa: F401  (app.py imports it from here)
from .connection import CloseConnection, KafkaConnection, ResponseSlot
from .connection_limits import ConnectionLimits
from .log_flusher import LogFlusher
from .logging import LogThrottle
from .metrics import ServerMetrics
from .node_api import NodeApi
from .node_auth import NodeCredentials
from .sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslServerSession
from .shell_step import Failure, ShellStep, StepActions
from .snapshot_jobs import SnapshotJobRunner

log = structlog.get_logger("kraftd.broker")

# Poll the node at least this often even if it reports no deadline (cheap safety net).
POLL_MAX_INTERVAL_S = 0.1
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


@dataclass(frozen=True, slots=True)
class Durability:
    """How appends become durable: the fsync policy, the group commit's interval, and how fsyncs
    run (inline below `fsync_inline_max_bytes` without AIO; `aio` when the kernel's AIO works)."""
    fsync_policy: str = "acks_all"
    flush_interval_ms: int = 100
    fsync_inline_max_bytes: int = 0
    aio: Any = None


class Broker:
    """The Dispatcher behind every KafkaConnection, plus the node's timer and flusher."""

    def __init__(self, node: NodeApi, *, durability: Durability, metrics: ServerMetrics, codec: Any = None,
                 node_credentials: NodeCredentials | None = None, limits: ConnectionLimits | None = None,
                 sasl_mechanisms: tuple = ()) -> None:
        fsync_policy = durability.fsync_policy
        # A SASL_PLAINTEXT/SASL_SSL listener: clients log in with one of these first (server/sasl.py).
        self.sasl_mechanisms = tuple(sasl_mechanisms)
        if codec is None:
            from ..protocol import framing as codec
        self.node = node
        self.metrics = metrics
        self._codec = codec
        self._fsync_policy = fsync_policy
        self.step = ShellStep(node, fsync_policy=fsync_policy, flush_interval_ms=durability.flush_interval_ms,
                              contain=lambda what: log.exception(what))
        self._parked: dict[int, tuple[ResponseSlot, Any]] = {}
        self.connections: set[KafkaConnection] = set()
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._flush_task: asyncio.Task | None = None
        self.flusher = LogFlusher(inline_max_bytes=durability.fsync_inline_max_bytes, aio=durability.aio,
                                  counter=metrics.log_flushes)
        # Election states (a vote, a new epoch) never queue behind log flushes: an election
        # waits for this write before any of its requests or answers leave.
        self._election_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraftd-elections")
        self.snapshots = SnapshotJobRunner(node, metrics, on_done=self._snapshot_done, on_requested=self.kick)
        self._stopping = False
        self.fatal: BaseException | None = None  # set when the broker cannot go on (fsync failed)
        self._peers = None
        self._persist_task: asyncio.Task | None = None
        self._kicked = False
        self.on_fatal = lambda: None
        self._api_names: dict[int, str] = {}
        self.node_credentials = node_credentials  # None: no cluster secret, no node can authenticate
        # max_connections / max_connections_per_ip (None: unbounded, tests' fake setups)
        self.limits = limits
        self._refusal_log = LogThrottle()
        self._auth_failure_log = LogThrottle()

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def peers(self):
        """server.peers.PeerLinks in a cluster, else None."""
        return self._peers

    @peers.setter
    def peers(self, links) -> None:
        self._peers = links
        self.step.clustered = links is not None

    def start(self) -> None:
        self._run(self.step.on_timer(now_ms()))

    @property
    def parked_count(self) -> int:
        return len(self._parked)

    async def stop(self) -> None:
        """Stop the timer, fsync what is left, then leave the outbox to the node."""
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # Not cancelled: a flush running in a thread would race the final one below.
        await self._idle()
        if self._fsync_policy != "never" and self.fatal is None:
            await self.flush_logs()
        await self.snapshots.stop()
        # From here on the node's outbox stays with the node: peers may still answer (or fail)
        # and kick us, but a persist can no longer be scheduled on the pools; Node.close()
        # writes whatever election state is still pending, synchronously.
        self.step.stop()
        await self._idle()
        self.flusher.close()
        self._election_pool.shutdown(wait=False)

    def _running(self) -> list[asyncio.Task]:
        return [t for t in (self._persist_task, self._flush_task) if t is not None and not t.done()]

    async def _idle(self) -> None:
        """Until the persist and the flush running now have finished (their completions may
        start the next ones)."""
        running = self._running()
        if running:
            await asyncio.wait(running)  # (never cancels them)

    # -- Dispatcher interface (called by KafkaConnection) ----------------------------------
    def connection_made(self, conn: KafkaConnection) -> bool:
        if self.limits is not None:
            refused = self.limits.admit(conn.peer_host)
            if refused is not None:
                self.metrics.refuse(refused)
                self._log_refusal(conn, refused)
                return False
        self.connections.add(conn)
        return True

    def _log_refusal(self, conn: KafkaConnection, what: str) -> None:
        refused = self._refusal_log.due()
        if refused:
            limits = self.limits
            log.warning("refused connections", peer=conn.peer, cap=what, refused=refused,
                        open=limits.open, from_this_ip=limits.from_ip(conn.peer_host),
                        max_connections=limits.max_connections, max_connections_per_ip=limits.max_connections_per_ip)

    def connection_lost(self, conn: KafkaConnection) -> None:
        if conn not in self.connections:
            return  # refused at once (connection limits)
        self.connections.discard(conn)
        if self.limits is not None:
            self.limits.release(conn.peer_host)
        if conn.parked:
            # Its parked produces, fetches and forwarded requests are dropped now rather than
            # held to their deadline; other parked requests (group and metadata writes) run to
            # their end in the node and their answers are dropped here.
            tokens, conn.parked = conn.parked, set()
            for token in tokens:
                self._parked.pop(token, None)
            try:
                dropped = self.node.cancel_parked(tokens, now_ms())
            except Exception:
                log.exception("cancelling parked requests failed", peer=conn.peer)
                dropped = 0
            self.metrics.parked_cancelled.inc(dropped)

    def dispatch(self, conn: KafkaConnection, frame: memoryview) -> ResponseSlot | None:
        codec = self._codec
        try:
            header, body = codec.decode_request(frame)
        except Exception as e:  # DecodeError: a peer's malformed bytes; never fatal
            raise CloseConnection(f"malformed request: {e}", "malformed request") from None
        key, version = header.request_api_key, header.request_api_version
        api = self._api_name(key)
        if body is None:
            if key == API_VERSIONS_KEY:
                # KIP-511: answer in v0 format with UNSUPPORTED_VERSION and our ranges, so the
                # client can pick a version it shares with us.
                parts: list = []
                codec.encode_api_versions_fallback(header, parts)
                self.metrics.errors.labels(api, str(UNSUPPORTED_VERSION)).inc()
                return ResponseSlot(conn, api, parts)
            raise CloseConnection(f"unsupported api {key} v{version}", "unsupported api")
        self.metrics.request_counter(api, version).inc()
        if key == SASL_HANDSHAKE or key == SASL_AUTHENTICATE:
            return self._sasl_step(conn, api, header, body)
        if self.sasl_mechanisms and key != API_VERSIONS_KEY and (conn.sasl is None or not conn.sasl.authenticated):
            # Kafka closes a SASL listener's connection on any other request before a login.
            raise CloseConnection(f"{api} before SASL authentication", "unauthenticated request")
        try:
            outcome = self.node.handle(header, body, now_ms(), Peer(conn.peer, conn.node_id, conn.principal))
        except Exception:
            log.exception("request handler failed", api=api, version=version, peer=conn.peer)
            raise CloseConnection("handler error") from None
        if type(outcome) is Respond:
            return self._encoded_slot(conn, api, header, outcome.response)
        if type(outcome) is Park:
            slot = ResponseSlot(conn, api)
            self._parked[outcome.token] = (slot, header)
            conn.parked.add(outcome.token)
            return slot
        if type(outcome) is NoResponse:
            return None
        raise TypeError(f"node.handle returned {outcome!r}")

    def batch_done(self, conn: KafkaConnection) -> None:
        """After the requests of one read: let the node react (e.g. a produce satisfying a
        parked fetch); parked requests wait on the HW, so the step commits at once."""
        self._run(self.step.after_requests(now_ms(), waiting=bool(self._parked)))

    def _sasl_step(self, conn: KafkaConnection, api: str, header, body) -> ResponseSlot:
        """Connection-level: the node never sees SASL, only who the connection proved to be."""
        if conn.sasl is None:
            conn.sasl = SaslServerSession(self.node_credentials, self.node.scram_credential, self.sasl_mechanisms)
        session = conn.sasl
        step = session.handle(header.request_api_key, body, header.request_api_version)
        if step.close_reason:
            refused = self._auth_failure_log.due()  # a hostile client must not flood the log
            event = "node authentication refused" if session.as_node else "authentication refused"
            if refused:
                log.warning(event, peer=conn.peer, reason=step.close_reason, refused=refused)
            else:
                log.debug(event, peer=conn.peer, reason=step.close_reason)
            mechanism = session.mechanism if session.mechanism in session.mechanisms else "other"
            self.metrics.auth_failures.labels(mechanism).inc()
            conn.close_after_answers("sasl failed")
        elif session.authenticated and session.principal != conn.principal:
            conn.principal = session.principal
            if session.node_id is not None:
                log.info("node authenticated", peer=conn.peer, node_id=session.node_id)
            else:
                log.debug("client authenticated", peer=conn.peer, principal=session.principal,
                         mechanism=session.mechanism)
        return self._encoded_slot(conn, api, header, step.response)

    # -- responses -------------------------------------------------------------------------
    def _encoded_slot(self, conn, api: str, header, response) -> ResponseSlot:
        parts: list = []
        self._codec.encode_response(header, response, parts)
        self._count_error(api, response)
        return ResponseSlot(conn, api, parts)

    def _count_error(self, api: str, response) -> None:
        code = getattr(response, "error_code", 0)
        if code:
            self.metrics.errors.labels(api, str(code)).inc()

    def _deliver(self, completions) -> None:
        touched: dict[KafkaConnection, None] = {}
        for c in completions:
            entry = self._parked.pop(c.token, None)
            if entry is None:
                continue
            slot, header = entry
            conn = slot.conn
            conn.parked.discard(c.token)
            if conn.closed:
                continue
            try:
                parts: list = []
                if c.response is not None:
                    self._codec.encode_response(header, c.response, parts)
                    self._count_error(slot.api, c.response)
                slot.parts = parts
            except Exception:
                log.exception("encoding a completed response failed", api=slot.api)
                conn.abort("encode error")
                continue
            touched[conn] = None
        for conn in touched:  # one coalesced write per connection
            try:
                conn.flush()
            except Exception:
                log.exception("write failed", peer=conn.peer)
                conn.abort("write error")

    def _api_name(self, key: int) -> str:
        name = self._api_names.get(key)
        if name is None:
            try:
                from ..protocol.api import API_BY_KEY
                spec = API_BY_KEY.get(key)
                name = spec.name if spec is not None else f"unknown_{key}"
            except ImportError:
                name = str(key)
            self._api_names[key] = name
        return name

    # -- carrying out the step ------------------------------------------------------------
    def _run(self, actions: StepActions) -> None:
        """Do what the step decided, in its order: persist (off the loop, one batch at a time;
        the node holds that step's sends until it is durable), send, answer, start snapshot jobs,
        flush (in the LogFlusher), re-arm the poll timer."""
        if actions.fatal is not None:
            return self._fail(actions.fatal)
        if actions.persist is not None:
            self._persist_task = self._loop.create_task(self._persist(actions.persist))
        if actions.sends:
            if self.peers is not None:
                self.peers.send(actions.sends)
            else:
                log.warning("no peers to send to on a single node", count=len(actions.sends))
        if actions.completions:
            self._deliver(actions.completions)
        if actions.snapshot_jobs:
            self.snapshots.start(actions.snapshot_jobs)
        if actions.flush is not None:
            self._flush_task = self._loop.create_task(self._flush(actions.flush))
        self._arm_timer(actions.wake_at_ms)

    def _fail(self, failure: Failure) -> None:
        # Kafka halts on a failed log flush: the page cache state is unknown, so acknowledging
        # anything further could lie about durability. The same for an election state.
        log.critical(failure.what + "; shutting down", log_key=None if failure.key is None else str(failure.key),
                     error=repr(failure.error))
        self.fatal = failure.error
        self.on_fatal()

    async def _persist(self, states) -> None:
        try:
            await self._loop.run_in_executor(self._election_pool, self.node.write_election_states, states)
        except Exception as e:
            self._persist_task = None
            return self._run(self.step.persist_failed(e))
        self._persist_task = None
        self._run(self.step.persisted(now_ms()))

    async def _flush(self, logs) -> None:
        """The group commit: a flush covers every append made before it started, so requests
        parked while it runs are covered by the next."""
        try:
            results = await self.flusher.flush([lg for _, lg in logs])
        except Exception as e:  # (the flusher reports each log's error: a bug, durability unknown)
            results = [e] * len(logs)
        self._flush_task = None
        try:
            self._run(self.step.flushed(now_ms(), [(key, lg, r) for (key, lg), r in zip(logs, results)]))
        except Exception:  # a bug in the core must not silently end durability
            log.exception("group commit failed")
            self.kick()

    def _snapshot_done(self, job, error: BaseException | None) -> None:
        self._run(self.step.snapshot_done(job, now_ms(), error))

    def pump(self) -> None:
        """Let the node react to what happened and carry out what it wants done now."""
        self._run(self.step.after_event(now_ms()))

    def kick(self) -> None:
        """Something happened outside a client request (a peer's answer, an admin's request):
        let the node react once this loop turn is over."""
        if not self._kicked:
            self._kicked = True
            self._loop.call_soon(self._after_event)

    def _after_event(self) -> None:
        self._kicked = False
        self._run(self.step.after_event(now_ms()))

    def on_peer_response(self, source: int, correlation_id: int, response) -> None:
        try:
            self.node.on_response(source, correlation_id, response, now_ms())
        except Exception:
            log.exception("handling a peer's answer failed", peer=source)
        self.kick()

    def on_peer_unreachable(self, node_id: int) -> None:
        self.node.on_unreachable(node_id, now_ms())
        self.kick()

    # -- the poll timer --------------------------------------------------------------------
    def _arm_timer(self, deadline_ms: int | None) -> None:
        """(Re)arm the single poll timer for the step's next deadline (capped)."""
        if self._stopping:
            return
        delay = POLL_MAX_INTERVAL_S
        if deadline_ms is not None:
            delay = min(delay, max(0.0, (deadline_ms - now_ms()) / 1000))
        at = self._loop.time() + delay
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._run(self.step.on_timer(now_ms()))

    # -- shutdown ----------------------------------------------------------------------------
    def drain_parked(self) -> None:
        """Shutdown: parked fetches are answered now instead of at their deadline."""
        self._deliver(self.node.drain(now_ms()))

    async def flush_logs(self) -> None:
        """Make every append so far durable (shutdown: parked acks=-1 produces complete): the
        election states first, then one flush of every dirty log."""
        while self.fatal is None:
            await self._idle()
            if self._persist_task is not None:
                continue  # a persist's completion started the next batch
            if self._flush_task is None:
                self._run(self.step.after_event(now_ms()))
                if self._persist_task is not None:
                    continue
            await self._idle()  # a flush started once no election state was pending: it covers every append
            return
