"""When and what the log cleaner cleans (Kafka's LogCleanerManager); the pass itself runs off
the loop (storage/cleaner.py), handed to the shell as a job like a snapshot.

Every `log_cleaner_backoff_ms`, when no pass is running, each compacted partition here reports
its cleanable range: sealed segments below its high watermark, up to the first holding a record
newer than min.compaction.lag.ms. Leaders and followers alike: each replica compacts its own
copy, as on Kafka. Of those whose dirty ratio (dirty bytes over the range's bytes) is above
min.cleanable.dirty.ratio, or whose first dirty segment began longer than max.compaction.lag.ms
ago (its first batch's timestamp), the dirtiest is cleaned; one pass at a time (Kafka's
log.cleaner.threads=1).
"""
from __future__ import annotations

import logging

from .node_config import NodeConfig
from .topics import TopicRegistry
from .wall_clock import WallClock

log = logging.getLogger(__name__)


class CleaningJob:
    """One pass over one partition's log: `run()` on the shell's cleaner thread."""

    cleaner_job = True

    def __init__(self, partition, plan) -> None:
        self.key = partition.key
        self.log = partition.log
        self.plan = plan

    def run(self, executor=None) -> None:
        """`executor`: a process pool the pass runs in (the shell's; tests run it in place)."""
        self.plan.run(executor)


class LogCompaction:
    def __init__(self, config: NodeConfig, topics: TopicRegistry, wall: WallClock, bugs=None) -> None:
        self._config = config
        # (a test-only planted bug: BugSwitches.cleaner_passes_high_watermark)
        self._past_hw = bool(bugs and bugs.cleaner_passes_high_watermark)
        self._topics = topics
        self._wall = wall
        self._next_check_ms = 0
        self._running: CleaningJob | None = None
        self._due: list[CleaningJob] = []
        # kraftd_log_cleaner_* (quorum/node_stats.py)
        self.max_dirty_percent = 0.0
        self.last_run_ms: int | None = None  # the node's time when the latest pass ended
        self.passes = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.records_removed = 0
        self.failures = 0

    def poll(self, now_ms: int) -> None:
        if self.last_run_ms is None:
            self.last_run_ms = now_ms  # (as Kafka: the time since the last run counts from startup)
        if not self._config.log_cleaner_enable or now_ms < self._next_check_ms:
            return
        self._next_check_ms = now_ms + self._config.log_cleaner_backoff_ms
        wall = self._wall.at(now_ms)
        best = None
        max_ratio = 0.0
        if not self._topics.compacted_topics:
            self.max_dirty_percent = 0.0
            return
        for topic in self._topics:
            if not topic.config.is_compacted:
                continue
            for partition in topic.partitions:
                if partition is None:
                    continue
                cfg = partition.config
                limit = partition.log.log_end_offset if self._past_hw else partition.high_watermark
                range_ = partition.log.cleanable(max_offset=limit, now_ms=wall,
                                                 min_lag_ms=cfg.min_compaction_lag_ms)
                if range_ is None:
                    continue
                ratio = range_.dirty_ratio
                max_ratio = max(max_ratio, ratio)
                overdue = (range_.first_dirty_timestamp >= 0
                           and wall - range_.first_dirty_timestamp > cfg.max_compaction_lag_ms)
                if (ratio > cfg.min_cleanable_dirty_ratio or overdue) and (best is None or ratio > best[0]):
                    best = (ratio, partition, range_)
        self.max_dirty_percent = 100.0 * max_ratio
        if best is not None and self._running is None:
            _, partition, range_ = best
            cfg, config = partition.config, self._config
            plan = partition.log.plan_cleaning(
                range_, now_ms=wall, delete_retention_ms=cfg.delete_retention_ms,
                max_keys=config.log_cleaner_dedupe_max_keys,
                io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second)
            self._running = job = CleaningJob(partition, plan)
            self._due.append(job)

    def deadlines(self) -> list[int]:
        """The next check, while there are compacted topics (none: no wake-ups for it)."""
        return [self._next_check_ms] if self._topics.compacted_topics and self._config.log_cleaner_enable else []

    def jobs(self) -> list[CleaningJob]:
        due, self._due = self._due, []
        return due

    def on_done(self, job: CleaningJob, now_ms: int, error: BaseException | None) -> None:
        self._running = None
        self.last_run_ms = now_ms
        plan = job.plan
        if error is not None:
            self.failures += 1
            plan.discard()
            log.warning("cleaning %s-%s failed: %r", *job.key, error)
            return
        if not job.log.commit_cleaning(plan):
            log.info("cleaning %s-%s discarded: the log changed while it ran", *job.key)
            return
        stats = plan.stats
        self.passes += 1
        self.bytes_read += stats.bytes_read
        self.bytes_written += stats.bytes_written
        self.records_removed += stats.records_dropped
        log.info("cleaned %s-%s up to offset %d: %d bytes read, %d written, %d records removed "
                 "(%d tombstones), %d keys, %.3f s", *job.key, plan.end_offset, stats.bytes_read,
                 stats.bytes_written, stats.records_dropped, stats.tombstones_dropped, stats.keys, stats.seconds)
        self._next_check_ms = now_ms  # more may be due (a map that filled, another dirty log)

    def stats(self, now_ms: int) -> dict:
        return {"log_cleaner_max_dirty_percent": self.max_dirty_percent,
                "log_cleaner_time_since_last_run_ms": max(0, now_ms - (self.last_run_ms or now_ms)),
                "log_cleaner_passes_total": self.passes,
                "log_cleaner_bytes_read_total": self.bytes_read,
                "log_cleaner_bytes_written_total": self.bytes_written,
                "log_cleaner_records_removed_total": self.records_removed,
                "log_cleaner_failures_total": self.failures}
