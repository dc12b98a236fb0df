"""`kraftd cluster rebalance` and `kraftd cluster decommission`: even replicas and preferred
leaders over the live nodes, or move everything off one node before it is retired.

    kraftd cluster rebalance --bootstrap-server HOST:PORT [--dry-run] [--no-wait]
    kraftd cluster decommission --bootstrap-server HOST:PORT --node-id N [--no-wait]

rebalance plans with kraftd/commands/balance_plan.py over the brokers Metadata lists (the live
ones), prints every move and the replicas and leaders per node before and after, and (unless
`--dry-run`) starts the moves with AlterPartitionReassignments, then waits until they are done
(`--no-wait`: it returns at once; `kraftd cluster reassign --verify` follows them).

decommission plans the same way without node N, waits until no partition has a replica on N,
then, if N is a metadata voter, removes it from the voters; when that would leave fewer than
three voters and a live broker is not a voter, that broker is added first. It ends by saying
that N can be stopped; once stopped (and fenced, after broker_session_timeout_ms), Metadata no
longer lists it. Both refuse to start while moves are in progress.
"""
from __future__ import annotations

import argparse
import sys
import time

from .admin_calls import AdminCallError, servers_of
from .balance_plan import moves, plan, spread
from .cluster import alter, ongoing

POLL_S = 1.0


def register(sub) -> None:
    r = sub.add_parser("rebalance", help="even replicas and preferred leaders over the live nodes")
    r.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    r.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    r.add_argument("--no-wait", action="store_true", help="start the moves and return")
    r.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for the moves (default 600)")
    r.set_defaults(run=run_rebalance)
    d = sub.add_parser("decommission", help="move every replica off a node and take it out of the voters")
    d.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    d.add_argument("--node-id", type=int, required=True, metavar="N")
    d.add_argument("--no-wait", action="store_true", help="start the moves and return")
    d.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long to wait for the moves and the voter change (default 600)")
    d.set_defaults(run=run_decommission)


class BalanceError(Exception):
    pass


def cluster_state(servers: list[str], timeout: float) -> tuple[list[int], dict]:
    """(live broker ids, {(topic, partition): replicas}) from Metadata (every topic)."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    last = "no server"
    for server in servers:
        try:
            client = WireClient(server, client_id="kraftd-cluster", timeout=min(timeout, 30.0))
        except OSError as e:
            last = f"{server}: {e.strerror or e}"
            continue
        try:
            response = client.request(api.METADATA, 12, m.MetadataRequest(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        finally:
            client.close()
        assignment = {(t.name, p.partition_index): list(p.replica_nodes)
                      for t in response.topics if not t.error_code for p in t.partitions}
        return sorted(b.node_id for b in response.brokers), assignment
    raise AdminCallError(f"cannot connect to {last}")


def _start(servers: list[str], nodes, timeout: float, *, dry_run: bool, out=sys.stdout) -> dict:
    """Plan over `nodes`, print it, and (unless `dry_run`) start the moves; returns them."""
    if ongoing(servers, None, min(timeout, 60.0)):
        raise BalanceError("moves are in progress: wait for them (kraftd cluster reassign --verify) or cancel them")
    brokers, assignment = cluster_state(servers, timeout)
    target = plan(assignment, nodes)
    todo = moves(assignment, target)
    for (topic, index), replicas in sorted(todo.items()):
        print(f"{topic}-{index}: {assignment[(topic, index)]} -> {replicas}", file=out)
    shown = sorted(set(brokers) | {r for rs in assignment.values() for r in rs})
    for title, a in (("before", assignment), ("after", target)):
        replicas, leaders = spread(a, shown)
        print(f"{title}: replicas per node {dict(sorted(replicas.items()))}, "
              f"preferred leaders per node {dict(sorted(leaders.items()))}", file=out)
    if dry_run or not todo:
        print(f"{len(todo)} partition(s) to move" + (" (dry run: nothing changed)" if dry_run else ""), file=out)
        return todo
    failed = alter(servers, todo, min(timeout, 60.0))
    if failed:
        raise BalanceError("refused: " + "; ".join(f"{t}-{p}: {n}" for (t, p), (n, _) in sorted(failed.items())))
    print(f"started moving {len(todo)} partition(s)", file=out)
    return todo


def _wait_moves(servers: list[str], timeout: float, done=None, out=sys.stdout) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while True:
        left = ongoing(servers, None, 30.0)
        if not left and (done is None or done()):
            return
        if len(left) != last:
            print(f"{len(left)} partition(s) still moving" + (f": {_moves_text(left)}" if len(left) <= 8 else ""),
                  file=out)
            last = len(left)
        if time.monotonic() >= deadline:
            raise BalanceError(f"moves still in progress after {timeout:g} s: {_moves_text(left)}" if left else
                               f"moves done but the replicas still not where they should be after {timeout:g} s")
        time.sleep(POLL_S)


def _moves_text(moves: dict) -> str:
    return "; ".join(f"{t}-{p} replicas {r} adding {a} removing {d}" for (t, p), (r, a, d) in sorted(moves.items()))


def run_rebalance(args: argparse.Namespace) -> int:
    try:
        servers = servers_of(args.bootstrap_server)
        brokers, _ = cluster_state(servers, args.timeout)
        todo = _start(servers, brokers, args.timeout, dry_run=args.dry_run)
        if todo and not args.dry_run and not args.no_wait:
            _wait_moves(servers, args.timeout)
            print("rebalanced")
    except (BalanceError, AdminCallError) as e:
        print(f"kraftd cluster rebalance: {e}", file=sys.stderr)
        return 1
    return 0


def run_decommission(args: argparse.Namespace) -> int:
    node = args.node_id
    try:
        servers = servers_of(args.bootstrap_server)
        brokers, assignment = cluster_state(servers, args.timeout)
        if node not in brokers and not any(node in rs for rs in assignment.values()):
            raise BalanceError(f"node {node} is neither a live broker nor holds replicas")
        others = [b for b in brokers if b != node]
        if not others:
            raise BalanceError("no other live node to move the replicas to")
        _start(servers, others, args.timeout, dry_run=False)
        if args.no_wait:
            return 0

        def nothing_left() -> bool:
            _, now = cluster_state(servers, 30.0)
            return not any(node in rs for rs in now.values())

        _wait_moves(servers, args.timeout, nothing_left)
        print(f"node {node} holds no replicas")
        _leave_voters(servers, node, others, args.timeout)
    except (BalanceError, AdminCallError) as e:
        print(f"kraftd cluster decommission: {e}", file=sys.stderr)
        return 1
    print(f"node {node} can be stopped")
    return 0


def _leave_voters(servers: list[str], node: int, others: list[int], timeout: float) -> None:
    """Take `node` out of the metadata voters, adding a live non-voter first when fewer than
    three voters would remain."""
    from .quorum import METADATA_PARTITION, describe
    from .quorum_voters import add_voter, remove_voter

    bootstrap = ",".join(servers)
    voters = {v.replica_id for v in describe(bootstrap, *METADATA_PARTITION, timeout=min(timeout, 30.0)).voters}
    if node not in voters:
        return
    spare = [b for b in others if b not in voters]
    if len(voters) - 1 < 3 and spare:
        directory = add_voter(bootstrap, spare[0], timeout=timeout)
        print(f"node {spare[0]} (directory {directory}) is a voter")
    directory = remove_voter(bootstrap, node, timeout=timeout)
    print(f"node {node} (directory {directory}) is no longer a voter")
