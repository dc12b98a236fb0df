"""A small stand-in for quorum's Node, implementing the interface the shell drives.

ApiVersions -> real generated response; Fetch -> parked until max_wait_ms (timer);
Produce acks=0 -> NoResponse, acks=1 -> Respond, acks=-1 -> parked until its offset is fsynced.
Every produce appends one "record" to one fake log, whose flush() is slow (a thread sleep) so
the group commit is observable.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from kraftd.protocol import messages as m
from kraftd.protocol.api import API_BY_KEY
from kraftd.quorum.outcomes import Completion, NoResponse, Park, Respond
from kraftd.quorum.raft.persist_gate import Outbox

LOG_KEY = ("t", 0)


class FakePlan:
    def __init__(self, target: int, fds: list[int]) -> None:
        self.target = target
        self.fds = fds


class FakeLog:
    discarded = False  # (storage/log_base.py: its topic was deleted)

    def __init__(self, flush_delay_s: float = 0.02) -> None:
        self.log_end_offset = 0
        self.flushed_offset = 0
        self.flush_calls = 0
        self.flush_delay_s = flush_delay_s
        self.fail = False
        self.small = False  # what flush_is_small answers
        self.flush_threads: list[int] = []
        self.aio_fd: int | None = None  # set: begin_flush plans an fsync of this fd
        self.end_flush_threads: list[int] = []
        self._lock = threading.Lock()

    def flush_is_small(self, max_bytes: int) -> bool:
        return self.small

    def begin_flush(self):
        if self.aio_fd is None:
            return None
        with self._lock:
            return FakePlan(self.log_end_offset, [self.aio_fd])

    def end_flush(self, plan) -> int:
        self.end_flush_threads.append(threading.get_ident())
        self.flushed_offset = max(self.flushed_offset, plan.target)
        return self.flushed_offset

    def abort_flush(self, plan) -> None:
        pass

    def append(self) -> int:
        with self._lock:
            self.log_end_offset += 1
            return self.log_end_offset - 1

    def flush(self) -> int:
        with self._lock:
            target = self.log_end_offset  # covers everything appended before the flush started
        self.flush_calls += 1
        self.flush_threads.append(threading.get_ident())
        time.sleep(self.flush_delay_s)
        if self.fail:
            raise OSError(5, "Input/output error")
        self.flushed_offset = target
        return target


class FakeSnapshotJob:
    def __init__(self, key, fail: bool) -> None:
        self.key, self.snapshot_id, self.fail = key, (10, 1), fail
        self.thread = None

    def run(self) -> None:
        self.thread = threading.current_thread().name
        time.sleep(0.05)
        if self.fail:
            raise OSError(28, "No space left on device")


class FakeStats:
    """node.stats: each figure from the fake node's method of that name (tests override them)."""

    def __init__(self, node: "FakeNode") -> None:
        self._node = node

    def __getattr__(self, name: str):
        if name in ("metrics_values", "partition_offsets", "cluster_stats", "drain_raft_latencies",
                    "group_stats", "fetch_session_stats", "snapshot_stats"):
            return getattr(self._node, name)
        raise AttributeError(name)


class FakeSnapshots:
    def __init__(self, node: "FakeNode") -> None:
        self._node = node

    def jobs(self) -> list:
        return self._node.snapshot_jobs()

    def request(self, topic: str, index: int) -> bool:
        return self._node.request_snapshot(topic, index)


class FakeTopics:
    def partitions(self) -> list:
        return []  # (no high-watermark checkpoint for the fake log)


class FakeNode:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.log = FakeLog()
        self.handled: list[tuple[int, int]] = []
        self.peers: set[str] = set()
        self._next_token = 0
        self._fetches: dict[int, int] = {}  # token -> deadline
        self._produces: dict[int, int] = {}  # token -> offset to be durable
        self._ready: list[Completion] = []
        self.closed = False
        self.poll_calls = 0
        self._snapshots_due: list = []
        self.snapshots_done: list = []
        self.snapshot_fail = False
        self.refusals: dict[str, int] = {}
        self.stats = FakeStats(self)
        self.snapshots = FakeSnapshots(self)
        self.topics = FakeTopics()

    @classmethod
    def open(cls, config: dict, now_ms: int) -> "FakeNode":
        return cls(config)

    # -- the interface -----------------------------------------------------------------------
    def handle(self, header, request, now_ms: int, peer: str):
        self.handled.append((header.request_api_key, header.request_api_version))
        self.peers.add(peer)
        key = header.request_api_key
        if key == 18:
            return Respond(api_versions_response())
        if key == 1:
            if request.max_wait_ms <= 0:
                return Respond(m.FetchResponse())
            token = self._token()
            self._fetches[token] = now_ms + request.max_wait_ms
            return Park(token)
        if key == 0:
            offset = self.log.append()
            if request.acks == 0:
                return NoResponse()
            if request.acks == 1 or self.config.get("fsync_policy") == "never":
                return Respond(m.ProduceResponse())
            token = self._token()
            self._produces[token] = offset
            return Park(token)
        raise AssertionError(f"fake node got api {key}")

    def poll(self, now_ms: int) -> list[Completion]:
        self.poll_calls += 1
        done, self._ready = self._ready, []
        for token, deadline in list(self._fetches.items()):
            if deadline <= now_ms:
                del self._fetches[token]
                done.append(Completion(token, m.FetchResponse(error_code=0, session_id=7)))
        return done

    def next_deadline_ms(self) -> int | None:
        return min(self._fetches.values(), default=None)

    def logs_to_flush(self) -> list:
        if self.log.flushed_offset < self.log.log_end_offset:
            return [(LOG_KEY, self.log)]
        return []

    def on_flushed(self, key, flushed_offset: int, now_ms: int) -> list[Completion]:
        assert key == LOG_KEY
        done = [Completion(t, m.ProduceResponse()) for t, off in self._produces.items()
                if off < flushed_offset]
        for c in done:
            del self._produces[c.token]
        return done

    def partition_offsets(self) -> list[dict]:
        return [{"topic": "t", "partition": 0, "log_start_offset": 0,
                 "log_end_offset": self.log.log_end_offset,
                 "high_watermark": self.log.flushed_offset}]

    def metrics_values(self) -> dict:
        return {"fake_gauge": 3, "fake_events_total": 1}

    def fetch_session_stats(self) -> dict:
        return {"sessions": 2, "partitions_cached": 10, "evictions": 4}

    def cluster_stats(self) -> dict:
        return {"metadata_leader_id": -1, "metadata_epoch": -1, "leader_partitions": 1,
                "under_replicated_partitions": 0, "offline_partitions": 0,
                "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 0, "is_leader": True}]}

    def drain_raft_latencies(self) -> tuple[list[float], list[float]]:
        return [], []

    def group_stats(self) -> dict | None:
        return None

    # -- snapshots: "kv"-0 is the only snapshot-policy partition ---------------------------
    def request_snapshot(self, topic: str, index: int) -> bool:
        if (topic, index) != ("kv", 0):
            return False
        self._snapshots_due.append(FakeSnapshotJob(("kv", index), self.snapshot_fail))
        return True

    def snapshot_jobs(self) -> list:
        due, self._snapshots_due = self._snapshots_due, []
        return due

    def on_snapshot_done(self, job, now_ms: int, error=None) -> None:
        self.snapshots_done.append((job, error))

    def jobs(self) -> list:
        return self.snapshot_jobs()

    def on_job_done(self, job, now_ms: int, error=None) -> None:
        self.on_snapshot_done(job, now_ms, error)

    def snapshot_stats(self) -> list[dict]:
        return [{"topic": "kv", "partition": 0, "lag": 5, "size_bytes": 100,
                 "latest": None, "load_ms": 12.0}]

    # -- the rest of the shell's interface (server/node_api.py): a single node, no peers ------
    def take_outbox(self, now_ms: int) -> Outbox:
        return Outbox()

    def write_election_states(self, states: dict) -> None:
        raise AssertionError("the fake node persists no election state")

    def on_persisted(self) -> None:
        pass

    def on_response(self, source: int, correlation_id: int, response, now_ms: int) -> None:
        raise AssertionError("the fake node sends no requests")

    def on_unreachable(self, node_id: int, now_ms: int) -> None:
        pass

    def cancel_parked(self, tokens, now_ms: int) -> int:
        dropped = 0
        for token in tokens:
            dropped += self._fetches.pop(token, None) is not None
            dropped += self._produces.pop(token, None) is not None
        return dropped

    def drain(self, now_ms: int) -> list[Completion]:
        return []  # parked fetches stay parked (shutdown's grace period is what tests see)

    def resign_all(self, now_ms: int) -> int:
        return 0

    def still_leading(self) -> int:
        return 0

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        return None

    def scram_credential(self, user: str, mechanism: int):
        return None  # no users: only nodes log in

    def close(self) -> None:
        self.closed = True
        data_dir = self.config.get("data_dir")
        if data_dir:  # lets a subprocess test see that close() ran
            Path(data_dir).mkdir(parents=True, exist_ok=True)
            (Path(data_dir) / "fake-node-closed").write_text(json.dumps(
                {"produced": self.log.log_end_offset, "flushed": self.log.flushed_offset}))

    def _token(self) -> int:
        self._next_token += 1
        return self._next_token


def api_versions_response() -> m.ApiVersionsResponse:
    return m.ApiVersionsResponse(error_code=0, api_keys=[
        m.ApiVersionsResponse.ApiVersion(api_key=s.key, min_version=s.min_version,
                                         max_version=s.max_version)
        for s in sorted(API_BY_KEY.values(), key=lambda s: s.key)])
