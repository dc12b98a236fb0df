"""What a `Node` is given besides its `NodeConfig`: where it keeps things, how this start came
about, and the sources of time, randomness and ids. The file-backed shell builds these in
server/node_files.py; the simulation and the tests build memory-backed ones."""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from .raft.config import BugSwitches, RaftConfig
from .raft.election_state import ElectionState, GroupKey
from .topic_config import TopicConfig


class ElectionStore(Protocol):
    """Every group's epoch, leader and vote; `write` is durable when it returns (a None
    state: the group was deleted, forget it)."""

    def load(self) -> dict[GroupKey, ElectionState]: ...

    def write(self, changed: dict[GroupKey, ElectionState]) -> None: ...


@dataclass(slots=True)
class NodeStorage:
    catalog: Any                    # the topic catalog (storage.TopicCatalog, or a memory one)
    election_store: ElectionStore
    producer_id_store: Any          # the producer-id block file (storage.QuorumStateStore)
    open_log: Callable[[str, int, TopicConfig], Any]
    open_snapshot_store: Callable[[str, int], Any] | None = None
    # Opening a new log does file I/O: do it in a job off the loop (quorum/log_opening.py).
    # Opening at startup stays inline (the node is not serving yet).
    opens_logs_off_loop: bool = False
    # The data dir's directory id (storage/meta_properties.py); None: a memory node, whose id is
    # derived from its node id (stable across its restarts: see `directory_id_of`).
    directory_id: Any = None


def directory_id_of(storage: NodeStorage, node_id: int):
    """The directory id the node's storage has, or a memory node's stand-in for one."""
    if storage.directory_id is not None:
        return storage.directory_id
    return uuid.UUID(int=(1 << 64) + node_id)


@dataclass(slots=True)
class NodeStartup:
    """A node restarted on a data dir that replaced a lost one is `rejoining`; a forced
    recovery (`kraftd quorum force-leader`) names the nodes it gave up as `forced.lost`. The
    callbacks let the shell clear its markers and release the data dir."""
    rejoining: bool = False
    forced: Any = None
    on_rejoin_complete: Callable[[], None] | None = None
    on_forced_done: Callable[[], None] | None = None
    on_close: Callable[[], None] | None = None


@dataclass(slots=True)
class NodeRuntime:
    """Randomness, ids and tuning that a shell or a test chooses. The server seeds `rng` from the
    OS and draws fetch session ids from a CSPRNG (KIP-227: unguessable); a simulation seeds both,
    and `new_session_id` left out draws from `rng`."""
    rng: random.Random
    new_session_id: Callable[[], int] | None = None
    clock: Callable[[], float] | None = None  # monotonic seconds, only to report load times
    # ms since the Unix epoch, for timestamps only (quorum/wall_clock.py); timers use now_ms
    wall_clock: Callable[[], int] | None = None
    raft_config: RaftConfig = field(default_factory=RaftConfig)
    bugs: BugSwitches | None = None
    cluster_id: str | None = None
