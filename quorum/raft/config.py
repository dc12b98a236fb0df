"""Raft timing (Kafka's quorum.* settings) and the test-only bug switches."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000        # quorum.election.timeout.ms (+ up to as much jitter)
    fetch_timeout_ms: int = 2000           # quorum.fetch.timeout.ms: a follower's patience
    election_backoff_max_ms: int = 1000    # quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000         # quorum.request.timeout.ms
    retry_backoff_ms: int = 100            # between resends of unanswered RPCs
    fetch_max_wait_ms: int = 500           # a follower's long poll
    fetch_max_bytes: int = 8 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    snapshot_chunk_bytes: int = 1024 * 1024
    # A leader whose node refuses connections (or resets them) this long, with no answer since,
    # is gone: its followers stand without waiting out the fetch timeout. Pre-vote keeps a
    # follower that merely lost its own link from disrupting a leader the others still reach.
    unreachable_grace_ms: int = 300

    @property
    def check_quorum_ms(self) -> int:
        """A leader that hears from no majority for this long resigns (1.5 × fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2


@dataclass(frozen=True, slots=True)
class BugSwitches:
    """Faults planted on purpose so tests can show the simulation finds them. Never set in
    production: `Replication` only takes them from a test."""

    count_unflushed_offset: bool = False   # the leader counts its unflushed log end toward the HW
    vote_not_persisted: bool = False       # a vote is answered without being made durable
    skip_log_check_in_vote: bool = False   # votes are granted whatever the candidate's log
    # Raft's "Figure 8": a leader moves its HW before the first offset of its own epoch is on a
    # majority, so entries of an earlier epoch count as committed by replica count alone.
    hw_before_epoch_start: bool = False
    # A codec bug: Fetch answers lose DivergingEpoch on the wire (kraftd.protocol.planted);
    # invisible while messages are passed as objects.
    codec_drops_diverging_epoch: bool = False
    # Log recovery keeps a torn last batch whose CRC fails (kraftd.storage.file_log).
    recovery_keeps_torn_batch: bool = False
    # The log cleaner cleans past the high watermark: records a truncation may still remove
    # (quorum/compaction.py) decide which committed records it drops.
    cleaner_passes_high_watermark: bool = False
    # The cleaner drops a key's latest record too (an off-by-one: kraftd.storage.cleaner).
    cleaner_drops_latest_value: bool = False
    # KIP-853: a leader takes a second voter change while the first is uncommitted (two
    # changes at once: the old and new sets' majorities need not overlap).
    two_voter_changes_at_once: bool = False
    # KIP-853: a new voter is added (and counts for the HW) before it has caught up.
    voter_counted_before_caught_up: bool = False

    def any(self) -> bool:
        return any(getattr(self, name) for name in self.__dataclass_fields__)
