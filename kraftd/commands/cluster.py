"""`kraftd cluster reassign`: move partitions between nodes (KIP-455), like Kafka's
`kafka-reassign-partitions`, with its JSON plan (rebalance and decommission:
kraftd/commands/cluster_balance.py).

    kraftd cluster reassign --bootstrap-server HOST:PORT --plan plan.json [--verify | --cancel]

The plan is kafka-reassign-partitions' format:
`{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}, ...]}`
(`log_dirs`, if present, is ignored: a node has one data dir). Without a flag, the command prints
the partitions' current replicas as a plan (save it to roll back) and sends
AlterPartitionReassignments; the moves then happen in the background, each partition's Raft
group adding the new replicas once they have caught up and removing the old ones after.
`--verify` reports each partition's state (exit 0 once every move is complete, 3 while any is
still in progress, 1 if a partition neither moves nor has the plan's replicas, as after a cancel), `--cancel` cancels the moves in progress (each goes back to its original
replicas). Any node will do as a bootstrap server: it forwards the request to the controller.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from .admin_calls import AdminCallError, call_until_done, servers_of

IN_PROGRESS = 3


def register(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="move partitions between nodes: reassign, rebalance, decommission",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    r = sub.add_parser("reassign", help="execute, verify or cancel a reassignment plan")
    r.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    r.add_argument("--plan", required=True, metavar="FILE", help="kafka-reassign-partitions' JSON")
    what = r.add_mutually_exclusive_group()
    what.add_argument("--verify", action="store_true", help="report progress (exit 3 while moves are under way)")
    what.add_argument("--cancel", action="store_true", help="cancel the plan's moves in progress")
    r.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="per request (default 60)")
    r.set_defaults(run=run_reassign)
    # rebalance and decommission build on this module's calls: loaded by name (a cycle otherwise).
    importlib.import_module("kraftd.commands.cluster_balance").register(sub)


class PlanError(Exception):
    pass


def read_plan(path: str) -> dict:
    """{(topic, partition): target replicas} of a kafka-reassign-partitions JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise PlanError(f"{path}: {e}") from None
    plan: dict = {}
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise PlanError(f"{path}: no \"partitions\" list")
    for entry in entries:
        try:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise PlanError(f"{path}: an entry needs topic, partition and replicas: {entry}") from None
        if key in plan:
            raise PlanError(f"{path}: {key[0]}-{key[1]} is named twice")
        plan[key] = replicas
    return plan


def plan_json(assignment: dict) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]})


def current_replicas(servers: list[str], topics, timeout: float) -> dict:
    """{(topic, partition): replicas} as a server's Metadata says."""
    from kraftd.client import WireClient
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    last = None
    for server in servers:
        try:
            client = WireClient(server, client_id="kraftd-cluster", timeout=timeout)
        except OSError as e:
            last = f"{server}: {e.strerror or e}"
            continue
        try:
            response = client.request(api.METADATA, 12, m.MetadataRequest(
                topics=None if topics is None else [m.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        finally:
            client.close()
        return {(t.name, p.partition_index): list(p.replica_nodes)
                for t in response.topics if not t.error_code for p in t.partitions}
    raise AdminCallError(f"cannot connect to {last}")


def alter(servers: list[str], moves: dict, timeout: float) -> dict:
    """Send AlterPartitionReassignments ({(topic, partition): target or None to cancel});
    {(topic, partition): (error name, message)} for each partition that failed."""
    from kraftd.protocol import api
    from kraftd.protocol import messages as m
    from kraftd.protocol.errors import ErrorCode

    R = m.AlterPartitionReassignmentsRequest
    by_topic: dict = {}
    for (topic, index), target in sorted(moves.items()):
        by_topic.setdefault(topic, []).append(R.ReassignablePartition(partition_index=index, replicas=target))
    request = R(timeout_ms=int(timeout * 1000), topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                       for t, ps in by_topic.items()])
    response = call_until_done(servers, api.ALTER_PARTITION_REASSIGNMENTS, request, timeout,
                               client_id="kraftd-cluster")
    return {(t.name, p.partition_index): (ErrorCode(p.error_code).name, p.error_message)
            for t in response.responses for p in t.partitions if p.error_code}


def ongoing(servers: list[str], keys, timeout: float) -> dict:
    """{(topic, partition): (replicas, adding, removing)} of the moves in progress among `keys`
    (None: all)."""
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    L = m.ListPartitionReassignmentsRequest
    topics = None
    if keys is not None:
        by_topic: dict = {}
        for topic, index in sorted(keys):
            by_topic.setdefault(topic, []).append(index)
        topics = [L.ListPartitionReassignmentsTopics(name=t, partition_indexes=ix) for t, ix in by_topic.items()]
    response = call_until_done(servers, api.LIST_PARTITION_REASSIGNMENTS, L(timeout_ms=int(timeout * 1000),
                               topics=topics), timeout, client_id="kraftd-cluster")
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in response.topics for p in t.partitions}


def run_reassign(args: argparse.Namespace) -> int:
    try:
        plan = read_plan(args.plan)
        servers = servers_of(args.bootstrap_server)
        if args.verify:
            return _verify(servers, plan, args.timeout)
        if args.cancel:
            failed = alter(servers, {key: None for key in plan}, args.timeout)
            for (t, p), (name, message) in sorted(failed.items()):
                if name != "NO_REASSIGNMENT_IN_PROGRESS":
                    print(f"{t}-{p}: {name}" + (f": {message}" if message else ""), file=sys.stderr)
            cancelled = [key for key in plan if key not in failed]
            print(f"Cancelled the moves of {len(cancelled)} partition(s); "
                  f"{sum(1 for n, _ in failed.values() if n == 'NO_REASSIGNMENT_IN_PROGRESS')} were not moving.")
            return 1 if any(n != "NO_REASSIGNMENT_IN_PROGRESS" for n, _ in failed.values()) else 0
        current = current_replicas(servers, sorted({t for t, _ in plan}), args.timeout)
        missing = sorted(key for key in plan if key not in current)
        if missing:
            print("kraftd cluster reassign: unknown partitions: " + ", ".join(f"{t}-{p}" for t, p in missing),
                  file=sys.stderr)
            return 1
        print("Current partition replica assignment (save it to roll back with --plan):\n")
        print(plan_json({key: current[key] for key in plan}) + "\n")
        failed = alter(servers, plan, args.timeout)
    except (PlanError, AdminCallError) as e:
        print(f"kraftd cluster reassign: {e}", file=sys.stderr)
        return 1
    for (t, p), (name, message) in sorted(failed.items()):
        print(f"{t}-{p}: {name}" + (f": {message}" if message else ""), file=sys.stderr)
    print(f"Started moving {len(plan) - len(failed)} partition(s)."
          + (f" {len(failed)} refused." if failed else ""))
    return 1 if failed else 0


def _verify(servers: list[str], plan: dict, timeout: float) -> int:
    moving = ongoing(servers, list(plan), timeout)
    current = current_replicas(servers, sorted({t for t, _ in plan}), timeout)
    pending = off_plan = 0
    for key, target in sorted(plan.items()):
        name = f"{key[0]}-{key[1]}"
        if key in moving:
            replicas, adding, removing = moving[key]
            print(f"Reassignment of partition {name} is still in progress (adding {adding}, removing {removing}).")
            pending += 1
        elif current.get(key) == target:
            print(f"Reassignment of partition {name} is completed.")
        else:
            print(f"Partition {name} is not moving, and its replicas are {current.get(key)}, not {target}.")
            off_plan += 1
    return 1 if off_plan else IN_PROGRESS if pending else 0
