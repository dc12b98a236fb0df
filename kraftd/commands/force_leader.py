"""`kraftd quorum force-leader`: unclean recovery after a majority of the voters is lost for good.

    kraftd quorum force-leader --data-dir DIR --voters SPEC [--node-id N] [--epoch-bump K]

Run on a *stopped* survivor (refused while a live process holds DIR). SPEC is the --voters value
every node is started with from now on: the survivors, maybe plus fresh nodes. The command

- makes SPEC the metadata quorum's voters in DIR's catalog, and drops the lost nodes (former
  voters not in SPEC) from every hosted partition's voters;
- clears every group's leader and vote and raises its epoch by K (default 1000): the lost nodes
  may have gone through epochs this node never saw, and clients that read from them must see
  the new leader's epoch as newer (KIP-320);
- writes `forced-recovery.json`, so the next `kraftd serve --voters SPEC` has its controller
  write the same shrinking to the metadata log, and logs what the recovery may discard.

What this node has becomes the committed log of every group it leads; what only the lost nodes
had is gone, and a lost node that comes back sets its data aside instead of merging it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kraftd.quorum.metadata.names import METADATA_TOPIC

PROG = "kraftd quorum force-leader"
DEFAULT_EPOCH_BUMP = 1000


def register(quorum_subparsers) -> None:
    p = quorum_subparsers.add_parser(
        "force-leader", help="unclean recovery: make a stopped survivor lead with what it has",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", required=True, help="the stopped survivor's data dir")
    p.add_argument("--voters", required=True, metavar="SPEC",
                   help="the voters from now on, as for `kraftd serve --voters` (survivors, maybe fresh nodes)")
    p.add_argument("--node-id", type=int, default=None,
                   help="this survivor's id (default: the one former voter listed in SPEC)")
    p.add_argument("--epoch-bump", type=int, default=DEFAULT_EPOCH_BUMP, metavar="K",
                   help=f"raise every group's epoch by K (default {DEFAULT_EPOCH_BUMP})")
    p.set_defaults(run=run)


def run(args) -> int:
    from kraftd.config.settings import parse_voters
    from kraftd.storage.data_dir_lock import DataDirInUse, DataDirLock

    data_dir = Path(args.data_dir)
    try:
        new_voters = tuple(sorted(parse_voters(args.voters)))
    except ValueError as e:
        return _fail(f"--voters: {e}")
    if args.epoch_bump < 1:
        return _fail("--epoch-bump must be at least 1")
    if not (data_dir / "topics.json").is_file():
        return _fail(f"{data_dir} holds no kraftd catalog (topics.json)")
    try:
        with DataDirLock(data_dir):
            return _force(data_dir, new_voters, args.node_id, args.epoch_bump)
    except DataDirInUse as e:
        return _fail(f"refusing to rewrite a live data dir: {e}; stop that process first")


def _force(data_dir: Path, new_voters: tuple, node_id: int | None, bump: int) -> int:
    from kraftd.quorum.raft.election_state import ElectionState
    from kraftd.server.election_state_file import FileElectionStore
    from kraftd.storage import FileLog, TopicCatalog
    from kraftd.storage.forced_recovery import ForcedRecovery, read_forced_recovery, write_forced_recovery
    from kraftd.storage.replication_offset_checkpoint import read_replication_offsets

    catalog = TopicCatalog(data_dir)
    metadata = catalog.get(METADATA_TOPIC)
    if metadata is None or not metadata.assignments:
        return _fail(f"{data_dir} is not a cluster node's data dir (no {METADATA_TOPIC} voters)")
    old_voters = tuple(sorted(metadata.assignments[0]))
    pending = read_forced_recovery(data_dir)
    if pending is not None:  # run again before the node started: lost stays what it was
        old_voters = tuple(sorted(set(old_voters) | set(pending.lost)))
    if node_id is None:
        mine = [v for v in new_voters if v in old_voters]
        if len(mine) != 1:
            return _fail(f"cannot tell which node this is (former voters in SPEC: {mine}); pass --node-id")
        node_id = mine[0]
    if node_id not in new_voters:
        return _fail(f"node {node_id} is not in SPEC {list(new_voters)}: a survivor must stay a voter")
    lost = tuple(v for v in old_voters if v not in new_voters)
    if not lost and tuple(new_voters) == old_voters:
        return _fail(f"SPEC {list(new_voters)} is the current voter set: nothing was lost")

    store = FileElectionStore(data_dir / "quorum-state")
    states = store.load()
    try:
        hws = read_replication_offsets(data_dir / "replication-offset-checkpoint")
    except (FileNotFoundError, ValueError):
        hws = {}
    _say(f"FORCED RECOVERY of node {node_id} in {data_dir}: voters {list(old_voters)} -> {list(new_voters)}, "
         f"lost for good: {list(lost)}")
    _say("Records only the lost nodes had are gone. Records this node holds above the last known "
         "high watermark become committed. A lost node that comes back sets its data aside.")
    changed: dict = {}
    top_epoch = 0
    for info in catalog.all():
        assignments = info.assignments or tuple((node_id,) for _ in range(info.partitions))
        if info.name == METADATA_TOPIC:
            shrunk = (new_voters,)
        else:
            shrunk = tuple(tuple(r for r in a if r not in lost) for a in assignments)
        for index, (before, after) in enumerate(zip(assignments, shrunk)):
            if node_id not in before:
                continue
            log = FileLog(data_dir / f"{info.name}-{index}")
            try:
                end, last_epoch = log.log_end_offset, log.epoch_cache.latest_epoch or 0
                if info.name == METADATA_TOPIC:
                    _record_voters(log, new_voters, last_epoch)
            finally:
                log.close()
            state = states.get((info.name, index), ElectionState())
            epoch = max(state.epoch, last_epoch) + bump
            top_epoch = max(top_epoch, epoch)
            changed[(info.name, index)] = ElectionState(epoch)
            hw = hws.get((info.name, index))
            _say(f"  {info.name}-{index}: voters {list(before)} -> {list(after)}; log end {end} "
                 f"(last epoch {last_epoch}), last known HW {hw if hw is not None else 'unknown'}; "
                 f"next epoch above {epoch}"
                 + (f"; may lose up to {end - hw} records above that HW if another survivor's log wins"
                    if hw is not None and end > hw and len(after) > 1 else ""))
        if shrunk != tuple(assignments) and info.assignments:
            catalog.set_assignments(info.name, shrunk)
    catalog.flush()
    store.write(changed)
    write_forced_recovery(data_dir, ForcedRecovery(new_voters, lost, top_epoch))
    _say(f"done: start every node with --voters {','.join(map(str, new_voters))} (the same SPEC)")
    print(json.dumps({"node_id": node_id, "voters": list(new_voters), "lost": list(lost),
                      "groups": len(changed), "epoch": top_epoch}))
    return 0


def _record_voters(log, new_voters: tuple, epoch: int) -> None:
    """The metadata log's voters are its newest VotersRecord once the quorum recorded them
    (KIP-853): SPEC goes into the log as one, or the survivor would count the lost voters still.
    Each voter keeps the directory and listener the old set held (a new one: any directory, as a
    configured voter). Its bytes depend on SPEC and the old set only (timestamp 0), so survivors
    that held the same set write the same batch."""
    from kraftd.quorum.raft.voter_set import Voter, VoterSet, voters_batch

    latest = log.voter_sets.latest()
    if latest is None:
        return  # the configured voters still: the catalog's SPEC is the set
    old = VoterSet.from_value(latest[1])
    voters = VoterSet(tuple(old.get(v) or Voter(v) for v in new_voters))
    if voters == old:
        return
    log.append_as_leader(voters_batch(voters, epoch, 0, with_version=False), epoch, now_ms=0)
    log.flush()
    _say(f"  {METADATA_TOPIC}: VotersRecord {list(voters.ids)} appended at offset {log.log_end_offset - 1}")


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr)


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2
