"""`kraftd quorum add-voter` and `kraftd quorum remove-voter`: change the metadata quorum's voters
online (KIP-853), like Kafka's `kafka-metadata-quorum add-controller` / `remove-controller`.

    kraftd quorum add-voter --bootstrap-server HOST:PORT --node-id N
    kraftd quorum remove-voter --bootstrap-server HOST:PORT --node-id N [--directory-id ID]

add-voter reads the node's directory id from DescribeQuorum (the node must be running and
fetching the metadata log: an observer) and its listener from Metadata (its registration),
then sends AddRaftVoter. remove-voter reads the voter's directory id from DescribeQuorum unless
`--directory-id` names it (a voter whose disk was replaced runs on a new directory: its old one
is the voter). Either request may go to any node: it is forwarded to the controller. The leader
takes one change at a time and a new voter only once it has caught up; until then the answer is
REQUEST_TIMED_OUT, and the command asks again until `--timeout` has passed.
"""
from __future__ import annotations

import argparse
import sys

from ..storage.meta_properties import uuid_from_kafka, uuid_to_kafka
from .admin_calls import AdminCallError, call_until_done, servers_of
from .quorum import METADATA_PARTITION, DescribeError, _route, describe


def register(sub) -> None:
    for name, helptext in (("add-voter", "add a node (running, as an observer) to the metadata quorum's voters"),
                           ("remove-voter", "remove a voter from the metadata quorum")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
        p.add_argument("--node-id", type=int, required=True, metavar="N")
        if name == "remove-voter":
            p.add_argument("--directory-id", default=None, metavar="ID",
                           help="the voter's directory id (default: the one DescribeQuorum reports)")
        p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                       help="how long to keep asking while the leader cannot take the change yet (default 60)")
        p.set_defaults(run=run_add if name == "add-voter" else run_remove)


class VoterChangeError(AdminCallError):
    pass


def add_voter(bootstrap: str, node_id: int, *, timeout: float = 60.0) -> str:
    """Add `node_id`; returns its directory id (Kafka's text form)."""
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    servers = servers_of(bootstrap)
    description = describe(bootstrap, *METADATA_PARTITION, timeout=min(timeout, 30.0))
    if any(v.replica_id == node_id for v in description.voters):
        raise VoterChangeError(f"node {node_id} is a voter already")
    observer = next((o for o in description.observers if o.replica_id == node_id), None)
    if observer is None or not observer.directory_id:
        raise VoterChangeError(f"node {node_id} is not fetching the metadata log (it is not among the observers "
                               "DescribeQuorum reports): start it first, and let it catch up")
    route = _route(servers, *METADATA_PARTITION, min(timeout, 30.0))
    address = route.brokers.get(node_id)
    if address is None:
        raise VoterChangeError(f"node {node_id} has not registered: its listener is unknown")
    host, _, port = address.rpartition(":")
    request = m.AddRaftVoterRequest(
        cluster_id=description.cluster_id, timeout_ms=int(min(timeout, 30.0) * 1000), voter_id=node_id,
        voter_directory_id=uuid_from_kafka(observer.directory_id),
        listeners=[m.AddRaftVoterRequest.Listener(name="PLAINTEXT", host=host, port=int(port))])
    _send_until_done(servers, api.ADD_RAFT_VOTER, request, timeout)
    return observer.directory_id


def remove_voter(bootstrap: str, node_id: int, directory_id: str | None = None, *, timeout: float = 60.0) -> str:
    from kraftd.protocol import api
    from kraftd.protocol import messages as m

    servers = servers_of(bootstrap)
    description = describe(bootstrap, *METADATA_PARTITION, timeout=min(timeout, 30.0))
    if directory_id is None:
        voter = next((v for v in description.voters if v.replica_id == node_id), None)
        if voter is None:
            raise VoterChangeError(f"node {node_id} is not a voter")
        if not voter.directory_id:
            raise VoterChangeError(f"the directory id of voter {node_id} is not known yet: give --directory-id")
        directory_id = voter.directory_id
    request = m.RemoveRaftVoterRequest(cluster_id=description.cluster_id, voter_id=node_id,
                                       voter_directory_id=uuid_from_kafka(directory_id))
    _send_until_done(servers, api.REMOVE_RAFT_VOTER, request, timeout)
    return directory_id


def _send_until_done(servers: list[str], api_key: int, request, timeout: float) -> None:
    try:
        call_until_done(servers, api_key, request, timeout, client_id="kraftd-quorum-voters")
    except AdminCallError as e:
        raise VoterChangeError(str(e)) from None


def run_add(args: argparse.Namespace) -> int:
    try:
        directory = add_voter(args.bootstrap_server, args.node_id, timeout=args.timeout)
    except (VoterChangeError, DescribeError) as e:
        print(f"kraftd quorum add-voter: {e}", file=sys.stderr)
        return 1
    print(f"node {args.node_id} (directory {directory}) is a voter")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    try:
        if args.directory_id is not None:
            uuid_to_kafka(uuid_from_kafka(args.directory_id))  # (a usage error, not a server's)
        directory = remove_voter(args.bootstrap_server, args.node_id, args.directory_id, timeout=args.timeout)
    except ValueError as e:
        print(f"kraftd quorum remove-voter: --directory-id: {e}", file=sys.stderr)
        return 2
    except (VoterChangeError, DescribeError) as e:
        print(f"kraftd quorum remove-voter: {e}", file=sys.stderr)
        return 1
    print(f"node {args.node_id} (directory {directory}) is no longer a voter")
    return 0
