"""Fault rates drawn per seed (swarm testing, as in TigerBeetle's VOPR): some seeds lose many
messages, some partition often, some crash nodes, most mix a little of everything."""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class FaultRates:
    drop: float               # per message
    duplicate: float          # per message
    min_delay_ms: int
    max_delay_ms: int         # uniform delays: messages reorder
    partition_every_ms: int   # mean time between partition changes (0: never)
    one_way_share: float      # share of partitions that cut one direction only
    crash_every_ms: int       # mean time between crashes (0: never)
    down_ms: int              # how long a crashed node stays down
    disk_loss: bool           # some crashes (up to DISK_LOSSES_MAX) lose the node's whole disk
    fsync_ms: int             # flush and persist latency
    crash_after_vote: float   # chance a node crashes right after granting a vote (buggify)
    # Crashes at protocol moments (name -> chance each time the moment comes), next to the
    # random ones: where Raft bugs hide (a new leader before its LeaderChange reaches anyone...).
    moments: tuple = ()
    pause_every_ms: int = 0   # mean time between process pauses (longer than an election timeout)
    clock_drift: float = 0.0  # per node, its clock runs at 1 ± up to this much
    late_share: float = 0.0   # share of messages delayed past the request timeout (late answers)
    # Realistic sizes: snapshot chunks and fetch limits of a few KB (multi-chunk downloads,
    # fetch answers cut short), against snapshots of ~6 KB. 0: the defaults (1 MiB and more).
    chunk_bytes: int = 0
    file_logs: bool = False   # the production FileLog on tmpfs: torn tails, recovery at restart
    fsync_failure: float = 0.0  # chance a flush fails (the node stops, as the server does)

    @classmethod
    def draw(cls, rng: random.Random) -> "FaultRates":
        def maybe(p, value, off):
            return value if rng.random() < p else off
        max_delay = rng.choice([2, 5, 20, 60])
        return cls(
            drop=maybe(0.6, rng.choice([0.01, 0.05, 0.15]), 0.0),
            duplicate=maybe(0.4, rng.choice([0.01, 0.05]), 0.0),
            min_delay_ms=1, max_delay_ms=max_delay,
            partition_every_ms=maybe(0.6, rng.choice([1500, 4000, 8000]), 0),
            one_way_share=rng.choice([0.0, 0.3, 0.6]),
            # Some seeds crash often and come back at once: the windows between a decision and
            # its fsync are where a missing persist shows.
            crash_every_ms=maybe(0.6, rng.choice([400, 2000, 5000, 10000]), 0),
            down_ms=rng.choice([20, 200, 1500, 5000]),
            disk_loss=rng.random() < 0.25,
            fsync_ms=rng.choice([0, 1, 5]),
            crash_after_vote=maybe(0.3, 0.5, 0.0),
            moments=tuple((name, rng.choice([0.05, 0.2, 0.5])) for name in MOMENTS if rng.random() < 0.5),
            pause_every_ms=maybe(0.4, rng.choice([1500, 4000]), 0),
            clock_drift=maybe(0.5, rng.choice([0.01, 0.05, 0.1]), 0.0),
            late_share=maybe(0.4, rng.choice([0.01, 0.05]), 0.0),
            chunk_bytes=maybe(0.5, rng.choice([700, 1500, 4000]), 0),
            file_logs=rng.random() < 0.4,
            fsync_failure=maybe(0.3, rng.choice([0.002, 0.01]), 0.0),
        )


# The protocol moments a node may crash at (tests/sim/cluster.py, Simulation._moment).
MOMENTS = (
    "new-leader",          # elected, before its first sends (its LeaderChange) leave
    "appended-unflushed",  # a follower appended what it fetched and has not flushed it
    "persist-pending",     # an election state is being written (a vote, a new epoch)
    "hw-advanced",         # a leader just moved its high watermark
)
MOMENT_CRASHES_MAX = 8     # per run, so that the cluster still has time to make progress
DISK_LOSSES_MAX = 3        # per run; a new one only once every earlier rejoin completed
