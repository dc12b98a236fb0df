"""The single-node broker core, sans-IO: driven by handle()/poll()/on_flushed() with `now_ms`.

Storage is injected (a log opener, a topic catalog, state stores), so the same core runs on
files under the asyncio server and on memory logs under a deterministic simulation.
"""
from __future__ import annotations

import logging
import secrets
from pathlib import Path

from .fetch_sessions import FetchSessionCache
from .fetch_sessions.contexts import partition_key_int
from .handlers import HANDLERS
from .handlers.context import HandlerContext
from .leadership import Leadership
from .node_config import NodeConfig
from .outcomes import Completion, Outcome
from .partition import Partition, PartitionKey
from .producer_ids import ProducerIdAllocator
from .purgatory import Purgatory
from .snapshots.partition_snapshots import PartitionSnapshots, SnapshotJob
from .topic_config import TopicConfig
from .topics import Topic, TopicRegistry

log = logging.getLogger(__name__)


class Node:
    def __init__(self, config: NodeConfig, *, catalog, quorum_store, producer_id_store, open_log,
                 open_snapshot_store=None, new_session_id=None, clock=None) -> None:
        self.config = config
        self._catalog = catalog
        self._leadership = Leadership(quorum_store, config.node_id)
        self._purgatory = Purgatory()
        self._dirty: dict[PartitionKey, Partition] = {}
        self._completions: list[Completion] = []
        self._next_retention_ms = 0
        self._now_ms = 0  # the time of the call being handled (topics created mid-request need it)
        self._open_snapshot_store = open_snapshot_store
        self._clock = clock  # a monotonic seconds clock, only to report how long loading took
        self.snapshots: dict[PartitionKey, PartitionSnapshots] = {}
        self._snapshot_jobs_due: set[PartitionKey] = set()
        self.topics = TopicRegistry(config, catalog, open_log, self._make_partition)
        producer_ids = ProducerIdAllocator(producer_id_store)
        # Session ids come from a CSPRNG (KIP-227: unguessable); simulations inject a seeded source.
        self.fetch_sessions = FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.min_incremental_fetch_session_eviction_ms,
            new_session_id or _random_session_id)
        self._ctx = HandlerContext(
            config=config, cluster_id=catalog.cluster_id(), topics=self.topics, purgatory=self._purgatory,
            allocate_producer_id=producer_ids.allocate, create_topic=self._create_topic,
            fetch_sessions=self.fetch_sessions,
        )

    @classmethod
    def open(cls, config: NodeConfig, now_ms: int, clock=None) -> "Node":
        """File-backed node: recover every log, then lead at a new epoch. Blocking."""
        from kraftd.storage import FileLog, QuorumStateStore, TopicCatalog
        from kraftd.storage.snapshots import SnapshotStore

        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)

        def open_log(topic: str, index: int, topic_config: TopicConfig):
            return FileLog(data_dir / f"{topic}-{index}", segment_bytes=topic_config.segment_bytes,
                           index_interval_bytes=config.index_interval_bytes)

        node = cls(config, catalog=TopicCatalog(data_dir), quorum_store=QuorumStateStore(data_dir / "quorum-state"),
                   producer_id_store=QuorumStateStore(data_dir / "producer-id-block"), open_log=open_log,
                   open_snapshot_store=lambda topic, index: SnapshotStore(data_dir / f"{topic}-{index}"),
                   clock=clock)
        node.start(now_ms)
        return node

    @property
    def leader_epoch(self) -> int:
        return self._leadership.epoch

    @property
    def cluster_id(self) -> str:
        return self._ctx.cluster_id

    def start(self, now_ms: int) -> None:
        """Recover topics, persist epoch+1, and give every partition the new epoch's start."""
        self._now_ms = now_ms
        epoch = self._leadership.become_leader()
        self._ctx.leader_epoch = epoch
        self.topics.load()
        for partition in self.topics.partitions():
            # Durable before serving: a restarted node's HW includes the new epoch's start.
            self._begin_epoch(partition, now_ms)
        log.info("leading at epoch %d with %d topics", epoch, len(self.topics))

    def _make_partition(self, topic, index, topic_id, partition_log, config, topic_num: int) -> Partition:
        partition = Partition(topic=topic, index=index, topic_id=topic_id, log=partition_log, config=config,
                              leader_epoch=self._leadership.epoch, leader_id=self.config.node_id,
                              hw_follows_flush=self.config.fsync_policy != "never",
                              journal=self.fetch_sessions.journal,
                              session_key=partition_key_int(topic_num, index))
        if config.is_snapshot_policy:
            self._attach_snapshots(partition)
        # Whatever survived recovery is on disk now; on a single node it is committed.
        partition.high_watermark = partition_log.log_end_offset
        return partition

    def _attach_snapshots(self, partition: Partition) -> None:
        """Startup invariants, then the state from the latest snapshot (the tail comes later)."""
        snapshots = PartitionSnapshots(partition, self._open_snapshot_store(partition.topic, partition.index))
        started = self._clock() if self._clock else None
        for name in snapshots.recover():
            log.info("removed leftover snapshot file %s", name)
        snapshots.load()
        snapshots.machine.catch_up(partition.log, partition.log.log_end_offset)
        if started is not None:
            snapshots.load_ms = (self._clock() - started) * 1000.0
        partition.snapshots = snapshots
        self.snapshots[partition.key] = snapshots

    def _begin_epoch(self, partition: Partition, now_ms: int, *, durable: bool = True) -> None:
        """Give the epoch its start offset (a LeaderChange batch). At startup (in a thread,
        before serving) it is fsynced at once; a topic created while serving leaves that to the
        group commit, so CreateTopics costs no fsync on the event loop."""
        partition.log.append_as_leader(self._leadership.leader_change_batch(now_ms), self._leadership.epoch,
                                       now_ms=now_ms)
        if durable:
            partition.log.flush()
            partition.after_flush(partition.log.log_end_offset)
        else:
            self._dirty[partition.key] = partition
        partition.after_append()

    def _create_topic(self, name: str, partitions: int, configs: dict) -> Topic:
        topic = self.topics.create(name, partitions, configs)
        for partition in topic.partitions:
            self._begin_epoch(partition, self._now_ms, durable=False)
        return topic

    # -- driving the core ------------------------------------------------------------------

    def handle(self, header, request, now_ms: int, peer: str) -> Outcome:
        self._now_ms = now_ms
        handler = HANDLERS[header.request_api_key]
        outcome = handler(self._ctx, header, request, now_ms, peer)
        self._after_handling(now_ms)
        return outcome

    def _after_handling(self, now_ms: int) -> None:
        ctx = self._ctx
        if ctx.appended:
            self._dirty.update(ctx.appended)
            ctx.appended.clear()
        if ctx.hw_changed:
            self._hw_moved(ctx.hw_changed, now_ms)
            ctx.hw_changed.clear()

    def _hw_moved(self, keys, now_ms: int) -> None:
        self._completions += self._purgatory.notify(keys, now_ms)
        for key in keys:
            snapshots = self.snapshots.get(key)
            if snapshots is not None:
                snapshots.catch_up()
                if snapshots.due():
                    self._snapshot_jobs_due.add(key)

    # -- snapshots (KIP-630): the shell runs job.run() in a worker thread ------------------

    def snapshot_jobs(self) -> list[SnapshotJob]:
        if not self._snapshot_jobs_due:  # the shell asks after every batch of requests
            return []
        jobs = []
        for key in sorted(self._snapshot_jobs_due):
            snapshots = self.snapshots.get(key)
            if snapshots is not None and snapshots.due():
                jobs.append(snapshots.start_job())
        self._snapshot_jobs_due.clear()
        return jobs

    def on_snapshot_done(self, job: SnapshotJob, now_ms: int, error: BaseException | None = None) -> None:
        self._now_ms = now_ms
        snapshots = self.snapshots.get(job.key)
        if snapshots is None:
            return
        snapshots.finish(job, error)
        if error is not None:
            log.error("snapshot %s of %s-%s failed: %s", job.snapshot_id, *job.key, error)
        elif snapshots.due():
            self._snapshot_jobs_due.add(job.key)

    def request_snapshot(self, topic: str, index: int) -> bool:
        """`kraftd snapshot create`: snapshot now if anything is newer than the latest one."""
        snapshots = self.snapshots.get((topic, index))
        if snapshots is None:
            return False
        snapshots.requested = True
        self._snapshot_jobs_due.add((topic, index))
        return True

    def snapshot_stats(self) -> list[dict]:
        out = []
        for (topic, index), snapshots in self.snapshots.items():
            latest = snapshots.latest
            out.append({"topic": topic, "partition": index, "lag": snapshots.lag(),
                        "size_bytes": snapshots.store.size(latest) if latest else 0,
                        "latest": latest, "load_ms": snapshots.load_ms})
        return out

    def poll(self, now_ms: int) -> list[Completion]:
        self._now_ms = now_ms
        if now_ms >= self._next_retention_ms:
            self._apply_retention(now_ms)
            self._next_retention_ms = now_ms + self.config.retention_check_interval_ms
        done = self._completions + self._purgatory.expire(now_ms)
        self._completions = []
        return done

    def drain(self, now_ms: int) -> list[Completion]:
        """Shutting down: answer every parked request now with what it would get at expiry."""
        self._now_ms = now_ms
        done = self._completions + self._purgatory.expire_all(now_ms)
        self._completions = []
        return done

    def next_deadline_ms(self) -> int | None:
        deadline = self._purgatory.next_deadline_ms()
        return self._next_retention_ms if deadline is None else min(deadline, self._next_retention_ms)

    def logs_to_flush(self) -> list:
        if self.config.fsync_policy == "never":
            return []
        for key in [k for k, p in self._dirty.items() if not p.needs_flush()]:
            del self._dirty[key]
        return [(p.key, p.log) for p in self._dirty.values()]

    def on_flushed(self, key: PartitionKey, flushed_offset: int, now_ms: int) -> list[Completion]:
        partition = self.topics.partition(*key)
        if partition is not None and partition.after_flush(flushed_offset):
            self._hw_moved([key], now_ms)
        done, self._completions = self._completions, []
        return done

    def _apply_retention(self, now_ms: int) -> None:
        for partition in self.topics.partitions():
            cfg = partition.config
            if cfg.cleanup_policy != "delete" or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
                continue
            partition.log.apply_retention(now_ms, cfg.retention_ms, cfg.retention_bytes,
                                          max_offset=partition.high_watermark)
            partition.after_log_start_moved()

    def fetch_session_stats(self) -> dict:
        cache = self.fetch_sessions
        return {"sessions": len(cache), "partitions_cached": cache.partitions_cached, "evictions": cache.evictions}

    def metrics_snapshot(self) -> list[dict]:
        return [
            {"topic": p.topic, "partition": p.index, "log_start_offset": p.log_start_offset,
             "log_end_offset": p.log_end_offset, "high_watermark": p.high_watermark}
            for p in self.topics.partitions()
        ]

    def close(self) -> None:
        for partition in self.topics.partitions():
            partition.log.flush()
            partition.log.close()


def _random_session_id() -> int:
    return secrets.randbelow(0x7FFFFFFF) + 1
