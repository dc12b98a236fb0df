"""Prometheus metrics on a private registry, served by a tiny asyncio HTTP endpoint.

Other modules add metrics in one of two ways:
  * server code: register on `ServerMetrics.registry` (passed around, never the global default);
  * the core (no prometheus import in quorum/): `node.stats` (quorum/node_stats.py, typed by
    server/node_api.py's NodeStatsApi). `metrics_values() -> dict[str, int | float]`: each key
    is exposed at scrape time as `kraftd_<key>` (a counter when the key ends in `_total`, else a
    gauge). Per-partition offsets come from `partition_offsets()`, cluster state from
    `cluster_stats()`, Raft latencies from `drain_raft_latencies()`.
"""
from __future__ import annotations

import asyncio
import http
import json
import urllib.parse
from typing import Callable, Iterable

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import GCCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from .loop_metrics import (LabelledCounter, LabelledHistogram, LoopCounter, LoopHistogram,
                           LoopMetricsCollector)
from .heap_freeze import FrozenHeapCollector
from .loop_lag import LoopLagMonitor
from .metrics_text import RowFamily, SeriesLabels, label_text, render
from .node_api import NodeApi, NodeStatsApi

log = structlog.get_logger("kraftd.metrics")

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
PARTITION_GAUGES = ("log_start_offset", "log_end_offset", "high_watermark")
PARTITION_LABELS = ("topic", "partition")


SNAPSHOT_MS_BUCKETS = (10, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000)
# Raft election and commit latencies: 1 ms (a commit on a quiet LAN) to 10 s (an election
# that needed several timeouts).
RAFT_MS_BUCKETS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000)
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable")
# cluster_stats() key -> help; each is exposed as the gauge kraftd_<key>.
CLUSTER_GAUGES = {
    "metadata_leader_id": "Node id of the metadata quorum's leader (-1: none)",
    "metadata_epoch": "Epoch of the metadata quorum",
    "leader_partitions": "Data partitions this node leads",
    "under_replicated_partitions": "Partitions this node leads whose ISR is smaller than their replica set",
    "offline_partitions": "Partitions without a live leader (counted by the metadata leader, 0 elsewhere)",
}


class ServerMetrics:
    """The shell's instruments. Children are cached: `labels()` is too slow per request."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # Updated on every request: lock-free loop-thread instruments (see loop_metrics.py).
        self.requests = LabelledCounter("kraftd_requests", "Requests received", ("api", "version"))
        self.request_latency = LabelledHistogram(
            "kraftd_request_latency_seconds", "Time from request decoded to response written",
            ("api",), LATENCY_BUCKETS)
        self.loop_lag = LoopLagMonitor()  # started by the server once its loop runs
        r.register(self.loop_lag)
        r.register(FrozenHeapCollector())
        GCCollector(registry=r)  # python_gc_*: collections per generation, objects collected
        self.bytes_in = LoopCounter()
        self.bytes_out = LoopCounter()
        r.register(LoopMetricsCollector(
            {"kraftd_bytes_in": ("Bytes read from Kafka clients", self.bytes_in),
             "kraftd_bytes_out": ("Bytes written to Kafka clients", self.bytes_out)},
            [self.requests, self.request_latency]))
        self.errors = Counter("kraftd_errors", "Responses with a top-level error code",
                              ["api", "code"], registry=r)
        # A gauge may not share a counter's base name, hence _open.
        self.connections_open = Gauge("kraftd_connections_open", "Open client connections",
                                      registry=r)
        self.connections = Counter("kraftd_connections", "Client connections accepted",
                                   registry=r)
        self.disconnects = Counter("kraftd_disconnects", "Connections closed by kraftd",
                                   ["reason"], registry=r)
        self.auth_failures = Counter("kraftd_authentication_failures", "SASL exchanges refused (wrong "
                                     "credentials, a node with another cluster secret, or a failed or "
                                     "out-of-order step), by mechanism ('other': none we offer)",
                                     ["mechanism"], registry=r)
        self.snapshots_written = Counter("kraftd_snapshots_written", "Snapshot files written",
                                         registry=r)
        self.snapshot_failures = Counter("kraftd_snapshot_failures", "Snapshot jobs that failed",
                                         registry=r)
        self.log_flushes = Counter("kraftd_log_flushes", "Logs fsynced by the group commit, by way: aio "
                                   "(kernel AIO), loop (on the event loop), pool (fsync threads)", ["way"],
                                   registry=r)
        # KIP-630's GenSnapshotLatencyMs and LoadSnapshotLatencyMs (Kafka never exported them).
        self.gen_snapshot_latency = Histogram("kraftd_gen_snapshot_latency_ms",
                                              "Time to generate one snapshot (ms)", ["topic", "partition"],
                                              buckets=SNAPSHOT_MS_BUCKETS, registry=r)
        self.load_snapshot_latency = Histogram("kraftd_load_snapshot_latency_ms",
                                               "Time to load a partition's state from its latest snapshot "
                                               "and the log after it (ms)", ["topic", "partition"],
                                               buckets=SNAPSHOT_MS_BUCKETS, registry=r)
        # Caps (issue 21, item 4): what each refused, the shell's (connections) and the core's
        # (node.refusals), as one family kraftd_refused_total{what}.
        self.refused: dict[str, int] = {}
        self._get_node: Callable[[], NodeApi | None] = lambda: None
        r.register(RefusedCollector(self))
        self.parked_cancelled = Counter("kraftd_parked_cancelled", "Parked produces, fetches and forwarded "
                                        "requests dropped because their client's connection closed", registry=r)
        self._req_children: dict[tuple[str, int], LoopCounter] = {}
        self._lat_children: dict[str, LoopHistogram] = {}

    def refuse(self, what: str) -> None:
        self.refused[what] = self.refused.get(what, 0) + 1

    def request_counter(self, api: str, version: int) -> LoopCounter:
        key = (api, version)
        child = self._req_children.get(key)
        if child is None:
            child = self._req_children[key] = self.requests.child(api, str(version))
        return child

    def latency(self, api: str) -> LoopHistogram:
        child = self._lat_children.get(api)
        if child is None:
            child = self._lat_children[api] = self.request_latency.child(api)
        return child

    def observe_snapshot_loads(self, node: NodeApi) -> None:
        """Record how long each snapshot-policy partition took to load at startup."""
        for p in node.stats.snapshot_stats():
            if p.get("load_ms") is not None:
                self.load_snapshot_latency.labels(str(p["topic"]), str(p["partition"])).observe(p["load_ms"])

    def watch_node(self, get_node: Callable[[], NodeApi | None]) -> None:
        """Expose the node's per-partition offsets and extra values at scrape time."""
        self._get_node = get_node
        self.registry.register(NodeCollector(get_node))


# Every cap's label, exported from the start (at 0) so dashboards and alerts find the series.
REFUSED_WHAT = {
    "connections": "max_connections",
    "connections_per_ip": "max_connections_per_ip",
    "fetch_session_partitions": "max_incremental_fetch_session_partitions",
    "auto_create_rate": "auto_create_topics_rate / auto_create_topics_burst",
    "auto_create_total": "auto_create_topics_max",
    "partitions": "max_partitions",
    "groups": "max_groups",
    "group_members": "group_max_size",
    "request_timeout": "request_timeout_cap_ms (a parked request's timeout cut down)",
}


class RefusedCollector(Collector):
    def __init__(self, metrics: ServerMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable:
        return []

    def collect(self) -> Iterable:
        counts = dict.fromkeys(REFUSED_WHAT, 0)
        for what, n in self._metrics.refused.items():
            counts[what] = counts.get(what, 0) + n
        node = self._metrics._get_node()
        for what, n in (node.refusals if node is not None else {}).items():
            counts[what] = counts.get(what, 0) + n
        fam = CounterMetricFamily("kraftd_refused", "What the caps refused, by cap (" + ", ".join(
            f"{k}: {v}" for k, v in REFUSED_WHAT.items()) + ")", labels=["what"])
        for what, n in sorted(counts.items()):
            fam.add_metric([what], n)
        yield fam


class NodeCollector(Collector):
    def __init__(self, get_node: Callable[[], NodeApi | None]) -> None:
        self._get_node = get_node
        # The node hands over latency samples once (drain); the histograms keep the running
        # counts. Scrapes run on the loop thread, so the lock-free LoopHistogram is exact.
        self.raft_election_ms = LoopHistogram(RAFT_MS_BUCKETS)
        self.raft_commit_ms = LoopHistogram(RAFT_MS_BUCKETS)
        self.coordinator_load_ms = LoopHistogram(SNAPSHOT_MS_BUCKETS)
        self._labels = _PartitionLabels()

    def describe(self) -> Iterable:
        return []  # dynamic: don't call collect() at registration (the node may not exist yet)

    def collect(self) -> Iterable:
        node = self._get_node()
        if node is None:
            return
        stats = node.stats
        labels_of = self._labels = _PartitionLabels(self._labels.made)
        offsets = stats.partition_offsets()
        labels = [labels_of(p["topic"], p["partition"]) for p in offsets]
        for name in PARTITION_GAUGES:
            yield RowFamily(f"kraftd_{name}", f"Partition {name}",
                            [(series, p[name]) for series, p in zip(labels, offsets) if name in p])
        yield from _snapshot_families(stats, labels_of)
        yield from _fetch_session_families(stats)
        yield from self._cluster_families(stats, labels_of)
        yield from self._group_families(stats)
        for key, value in stats.metrics_values().items():
            if key.endswith("_total"):
                yield CounterMetricFamily(f"kraftd_{key[:-6]}", key, value=value)
            else:
                yield GaugeMetricFamily(f"kraftd_{key}", key, value=value)

    def _cluster_families(self, stats: NodeStatsApi, labels_of: _PartitionLabels) -> Iterable:
        s = stats.cluster_stats()
        for key, doc in CLUSTER_GAUGES.items():
            yield GaugeMetricFamily(f"kraftd_{key}", doc, value=s[key])
        yield RowFamily("kraftd_leader_epoch", "Leader epoch of the partition as this node knows it",
                        [(labels_of(p["topic"], p["partition"]), p["leader_epoch"]) for p in s["partitions"]])
        elections, commits = stats.drain_raft_latencies()
        for value in elections:
            self.raft_election_ms.observe(value)
        for value in commits:
            self.raft_commit_ms.observe(value)
        # Exported even before the first sample, so dashboards find the series on every node.
        for name, doc, hist in (
                ("kraftd_raft_election_latency_ms", "Raft election latency: an election starting "
                 "to a leader being known (ms)", self.raft_election_ms),
                ("kraftd_raft_commit_latency_ms", "Raft commit latency: a leader's append to the "
                 "high watermark passing it (ms)", self.raft_commit_ms)):
            fam = HistogramMetricFamily(name, doc)
            fam.add_metric([], hist.cumulative(), hist.sum)
            yield fam


    def _group_families(self, stats: NodeStatsApi) -> Iterable:
        s = stats.group_stats()
        if s is None:
            s = {"groups": {}, "members": 0, "rebalances_total": 0, "offset_commits_total": 0, "load_times_ms": []}
        groups = GaugeMetricFamily("kraftd_groups", "Consumer groups this node coordinates, by state",
                                   labels=["state"])
        for state in GROUP_STATES:
            groups.add_metric([state], s["groups"].get(state, 0))
        yield groups
        yield GaugeMetricFamily("kraftd_group_members", "Members of the groups this node coordinates",
                                value=s["members"])
        yield CounterMetricFamily("kraftd_group_rebalances", "Rebalances started (a group entering "
                                  "PreparingRebalance)", value=s["rebalances_total"])
        yield CounterMetricFamily("kraftd_offset_commits", "Committed offsets written (one per partition)",
                                  value=s["offset_commits_total"])
        for value in s["load_times_ms"]:
            self.coordinator_load_ms.observe(value)
        fam = HistogramMetricFamily("kraftd_coordinator_load_time_ms", "Loading a __consumer_offsets "
                                    "partition's groups and offsets on becoming its leader (ms)")
        fam.add_metric([], self.coordinator_load_ms.cumulative(), self.coordinator_load_ms.sum)
        yield fam


class _PartitionLabels:
    """{topic, partition} label sets, one per partition, shared by a scrape's families and kept
    for the next scrape (only those of partitions the scrape met)."""

    def __init__(self, kept: dict[tuple[str, int], SeriesLabels] | None = None) -> None:
        self._kept = kept or {}
        self.made: dict[tuple[str, int], SeriesLabels] = {}

    def __call__(self, topic: str, partition: int) -> SeriesLabels:
        key = (topic, partition)
        labels = self.made.get(key)
        if labels is None:
            labels = self._kept.get(key)
            if labels is None:
                labels = SeriesLabels(PARTITION_LABELS, (topic, str(partition)),
                                      f'{{topic="{label_text(topic)}",partition="{partition}"}}')
            self.made[key] = labels
        return labels


def _snapshot_families(stats: NodeStatsApi, labels_of: _PartitionLabels) -> Iterable:
    lag = RowFamily("kraftd_snapshot_lag", "Offsets between the latest snapshot and the HW")
    size = RowFamily("kraftd_snapshot_size_bytes", "Size of the latest snapshot")
    end = RowFamily("kraftd_snapshot_end_offset", "End offset of the latest snapshot")
    for p in stats.snapshot_stats():
        labels = labels_of(p["topic"], p["partition"])
        lag.add(labels, p["lag"])
        size.add(labels, p["size_bytes"])
        if p.get("latest") is not None:
            end.add(labels, p["latest"].end_offset)
    yield from (lag, size, end)


def _fetch_session_families(stats: NodeStatsApi) -> Iterable:
    s = stats.fetch_session_stats()
    # KIP-227's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and
    # IncrementalFetchSessionEvictionsPerSec (a counter here: rates are Prometheus' job).
    yield GaugeMetricFamily("kraftd_num_incremental_fetch_sessions", "Cached incremental fetch sessions",
                            value=s["sessions"])
    yield GaugeMetricFamily("kraftd_num_incremental_fetch_partitions_cached",
                            "Partitions held by all incremental fetch sessions", value=s["partitions_cached"])
    yield CounterMetricFamily("kraftd_incremental_fetch_session_evictions",
                              "Fetch sessions evicted (a client closing its own session is not an eviction)",
                              value=s["evictions"])


class MetricsHttpServer:
    """GET /metrics and GET /healthz. One request per connection; runs on the event loop
    (the scrape reads the node, which is only safe from the loop thread)."""

    MAX_HEAD = 16 * 1024
    READ_TIMEOUT_S = 10.0

    def __init__(self, registry: CollectorRegistry, is_healthy: Callable[[], bool],
                 post_routes: dict[str, Callable[[dict], tuple[int, dict]]] | None = None) -> None:
        self._registry = registry
        self._is_healthy = is_healthy
        # path -> handler(query params) -> (status, JSON body); admin actions such as
        # POST /admin/snapshot. The listener is loopback by default: keep it that way.
        self._post_routes = post_routes or {}
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port,
                                                  limit=self.MAX_HEAD)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.READ_TIMEOUT_S)
            method, path = _request_line(head)
            status, ctype, body = self._route(method, path)
            writer.write(b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n" % (status, ctype, len(body)))
            if method != b"HEAD":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                ConnectionError, ValueError):
            pass  # a broken scraper is not our problem
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()

    def _route(self, method: bytes, target: bytes) -> tuple[bytes, bytes, bytes]:
        text = b"text/plain; charset=utf-8"
        path, _, query = target.partition(b"?")
        if method == b"POST" and path.decode("latin-1") in self._post_routes:
            params = dict(urllib.parse.parse_qsl(query.decode("latin-1")))
            status, payload = self._post_routes[path.decode("latin-1")](params)
            reason = http.HTTPStatus(status).phrase
            return (f"{status} {reason}".encode(), b"application/json",
                    json.dumps(payload).encode() + b"\n")
        if method not in (b"GET", b"HEAD"):
            return b"405 Method Not Allowed", text, b"method not allowed\n"
        if path == b"/metrics":
            return b"200 OK", CONTENT_TYPE_LATEST.encode(), render(self._registry)
        if path == b"/healthz":
            if self._is_healthy():
                return b"200 OK", text, b"ok\n"
            return b"503 Service Unavailable", text, b"not serving\n"
        return b"404 Not Found", text, b"not found\n"


def _request_line(head: bytes) -> tuple[bytes, bytes]:
    parts = head.split(b"\r\n", 1)[0].split(b" ")
    if len(parts) != 3:
        raise ValueError("bad request line")
    return parts[0], parts[1]
