"""The file-backed node: the data dir prepared (lock, markers), every store and log on files, the
core's randomness from the OS. Blocking: the server opens the node before it serves."""
from __future__ import annotations

import random
import secrets
import time
from pathlib import Path

from ..config.settings import parse_voters
from ..quorum.node import Node
from ..quorum.node_config import NodeConfig
from ..quorum.node_wiring import NodeRuntime, NodeStartup, NodeStorage
from ..quorum.raft.config import RaftConfig
from ..quorum.topic_config import TopicConfig
from ..storage import FileLog, QuorumStateStore, TopicCatalog
from ..storage.background_writes import background_writes
from ..storage.forced_recovery import clear_forced_recovery
from ..storage.rejoin_marker import clear_rejoin_marker
from ..storage.snapshots import SnapshotStore
from .clocks import wall_ms
from .data_dir_startup import prepare_data_dir
from .election_state_file import FileElectionStore


def node_config_from_settings(values: dict) -> NodeConfig:
    """NodeConfig from a Settings dict (`Settings.to_node_config()`), ignoring keys the core does not use."""
    names = set(NodeConfig.__dataclass_fields__)
    values = {k: v for k, v in values.items() if k in names}
    if isinstance(values.get("voters"), str):
        values["voters"] = parse_voters(values["voters"])
    return NodeConfig(**values)


def raft_config_from_settings(values: dict) -> RaftConfig:
    """The `quorum_*_ms` settings (Kafka's controller.quorum.*); RaftConfig's defaults otherwise."""
    names = {"election_timeout_ms", "fetch_timeout_ms", "election_backoff_max_ms", "request_timeout_ms",
             "retry_backoff_ms"}
    return RaftConfig(**{name: values[f"quorum_{name}"] for name in names if f"quorum_{name}" in values})


def secure_runtime(clock=None, raft_config: RaftConfig | None = None, wall_clock=None) -> NodeRuntime:
    """Randomness from the OS; fetch session ids from a CSPRNG (KIP-227: unguessable)."""
    return NodeRuntime(rng=random.Random(secrets.randbits(64)),
                       new_session_id=lambda: secrets.randbelow(0x7FFFFFFF) + 1, clock=clock,
                       raft_config=raft_config or RaftConfig(), wall_clock=wall_clock)


def open_node_on_files(config: NodeConfig, now_ms: int, clock=None, raft_config: RaftConfig | None = None,
                       wall_clock=None, open_logs_off_loop: bool = False) -> Node:
    """Recover every log, then elect (a single voter leads at a new epoch). `now_ms` is the timer
    clock's time; `wall_clock` (ms since the epoch, default: timers' time) stamps (server/clocks.py).
    `open_logs_off_loop`: a new topic's logs are opened by a job (quorum/log_opening.py), as the
    server does; tests that drive the node by hand may open them inline."""
    data_dir = Path(config.data_dir)
    startup = prepare_data_dir(config, wall_clock() if wall_clock is not None else now_ms)

    def open_log(topic: str, index: int, topic_config: TopicConfig):
        return FileLog(data_dir / f"{topic}-{index}", segment_bytes=topic_config.segment_bytes,
                       index_interval_bytes=config.index_interval_bytes, segment_ms=topic_config.segment_ms,
                       compacted=topic_config.is_compacted)

    storage = NodeStorage(catalog=TopicCatalog(data_dir), election_store=FileElectionStore(data_dir / "quorum-state"),
                          producer_id_store=QuorumStateStore(data_dir / "producer-id-block"), open_log=open_log,
                          open_snapshot_store=lambda topic, index: SnapshotStore(data_dir / f"{topic}-{index}"),
                          opens_logs_off_loop=open_logs_off_loop, directory_id=startup.meta.directory_id)
    node = Node(config, storage, secure_runtime(clock, raft_config, wall_clock), NodeStartup(
        rejoining=startup.rejoining, forced=startup.forced,
        on_rejoin_complete=lambda: clear_rejoin_marker(data_dir),
        on_forced_done=lambda: clear_forced_recovery(data_dir), on_close=lambda: _closed(startup)))
    try:
        node.start(now_ms)
        node.settle_startup(now_ms)
    except BaseException:
        startup.lock.release()
        raise
    return node


def _closed(startup) -> None:
    """After the node closed: what storage still had queued is written, then the data dir is free."""
    try:
        background_writes().barrier()
    finally:
        startup.lock.release()


def open_file_node(settings_values: dict, now_ms: int) -> Node:
    """The server's node factory: `now_ms` from server/clocks.py's timer clock, timestamps from
    its wall clock. `clock` only measures how long loading snapshots took
    (kraftd_load_snapshot_latency_ms)."""
    return open_node_on_files(node_config_from_settings(settings_values), now_ms, clock=time.monotonic,
                              raft_config=raft_config_from_settings(settings_values), wall_clock=wall_ms,
                              open_logs_off_loop=True)
