"""`kraftd snapshot list|inspect|verify|create`: look at KIP-630 snapshot files offline, or ask a
running server to take one.

    kraftd snapshot list --data-dir D [TOPIC-PARTITION]   snapshots (and leftovers) per partition
    kraftd snapshot inspect PATH [--records N]            id, size, batches, records, timestamp, keys
    kraftd snapshot verify PATH…                          CRCs, header, footer; exit 1 if any is bad
    kraftd snapshot create [--server URL] TOPIC PARTITION POST /admin/snapshot on the metrics listener
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from .dump_log import field_size, printable

DEFAULT_SERVER = "http://127.0.0.1:9464"


def register(subparsers) -> None:
    p = subparsers.add_parser("snapshot", help="list, inspect, verify or request KIP-630 snapshots",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)

    ls = sub.add_parser("list", help="snapshots per partition directory of a data dir")
    ls.add_argument("--data-dir", required=True, metavar="DIR")
    ls.add_argument("partition", nargs="?", metavar="TOPIC-PARTITION", help="only this partition (e.g. config-0)")
    ls.set_defaults(run=run_list)

    inspect = sub.add_parser("inspect", help="describe one snapshot file")
    inspect.add_argument("path", metavar="PATH")
    inspect.add_argument("--records", type=int, default=0, metavar="N", help="also print the first N keys")
    inspect.set_defaults(run=run_inspect)

    verify = sub.add_parser("verify", help="validate snapshot files (or every snapshot in a directory)")
    verify.add_argument("paths", nargs="+", metavar="PATH")
    verify.set_defaults(run=run_verify)

    create = sub.add_parser("create", help="ask a running server to snapshot a partition now")
    create.add_argument("--server", default=DEFAULT_SERVER, metavar="URL",
                        help=f"the server's metrics listener (default {DEFAULT_SERVER})")
    create.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS")
    create.add_argument("topic")
    create.add_argument("partition", type=int)
    create.set_defaults(run=run_create)


# -- list ------------------------------------------------------------------------------------
def run_list(args: argparse.Namespace) -> int:
    from kraftd.storage.snapshots import PART_SUFFIX, DELETED_SUFFIX, parse_snapshot_filename

    if not os.path.isdir(args.data_dir):
        print(f"kraftd snapshot list: {args.data_dir}: not a directory", file=sys.stderr)
        return 2
    if args.partition is not None:
        names = [args.partition]
        if not os.path.isdir(os.path.join(args.data_dir, args.partition)):
            print(f"kraftd snapshot list: no partition directory {args.partition} in {args.data_dir}",
                  file=sys.stderr)
            return 1
    else:
        names = sorted(n for n in os.listdir(args.data_dir) if os.path.isdir(os.path.join(args.data_dir, n)))
    out = sys.stdout
    out.write(f"{'PARTITION':<30} {'END_OFFSET':>12} {'EPOCH':>6} {'SIZE':>12}  FILE\n")
    for name in names:
        directory = os.path.join(args.data_dir, name)
        for file in sorted(os.listdir(directory)):
            sid = parse_snapshot_filename(file)
            if sid is not None:
                size = os.path.getsize(os.path.join(directory, file))
                out.write(f"{name:<30} {sid.end_offset:>12} {sid.epoch:>6} {size:>12}  {file}\n")
            elif file.endswith(PART_SUFFIX) or file.endswith(DELETED_SUFFIX):
                # Left by a crash; the server removes them at startup.
                size = os.path.getsize(os.path.join(directory, file))
                out.write(f"{name:<30} {'-':>12} {'-':>6} {size:>12}  {file} (leftover)\n")
    return 0


# -- inspect ---------------------------------------------------------------------------------
def run_inspect(args: argparse.Namespace) -> int:
    from kraftd.storage.snapshots import CorruptSnapshotError, SnapshotReader

    try:
        reader = SnapshotReader.open(args.path)
    except (CorruptSnapshotError, OSError) as exc:
        print(f"kraftd snapshot inspect: {exc}", file=sys.stderr)
        return 1
    info = reader.info()
    sid = info.snapshot_id
    out = sys.stdout
    out.write(f"path: {args.path}\n")
    out.write(f"snapshot_id: end_offset={sid.end_offset} epoch={sid.epoch}\n" if sid else
              "snapshot_id: unknown (not a <end_offset>-<epoch>.checkpoint name)\n")
    out.write(f"size: {info.size}\nbatches: {info.batches}\nrecords: {info.records}\n"
              f"last_contained_log_timestamp: {info.last_contained_log_timestamp}\n")
    if args.records > 0:
        out.write(f"first {args.records} keys:\n")
        for n, (key, value) in enumerate(reader.items()):
            if n >= args.records:
                break
            out.write(f"  {printable(key)} (value {field_size(value)} bytes)\n")
    return 0


# -- verify ----------------------------------------------------------------------------------
def run_verify(args: argparse.Namespace) -> int:
    from kraftd.storage.snapshots import SUFFIX, CorruptSnapshotError, verify_snapshot

    paths = []
    for path in args.paths:
        if os.path.isdir(path):
            paths += [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(SUFFIX)]
        else:
            paths.append(path)
    status = 0
    for path in paths:
        try:
            info = verify_snapshot(path)
        except (CorruptSnapshotError, OSError) as exc:
            print(f"BAD {path}: {exc}")
            status = 1
        else:
            print(f"OK  {path}: {info.records} records in {info.batches} batches, {info.size} bytes")
    return status


# -- create ----------------------------------------------------------------------------------
def run_create(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode({"topic": args.topic, "partition": args.partition})
    url = f"{args.server.rstrip('/')}/admin/snapshot?{query}"
    request = urllib.request.Request(url, method="POST", data=b"")
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        print(f"kraftd snapshot create: cannot reach {args.server}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 2
    if status == 404:
        print(f"kraftd snapshot create: {args.topic}-{args.partition} is not a snapshot-policy partition "
              f"on {args.server}", file=sys.stderr)
        return 1
    if status not in (200, 202):
        print(f"kraftd snapshot create: HTTP {status}: {body.decode(errors='replace').strip()}", file=sys.stderr)
        return 1
    try:
        answer = json.loads(body or b"{}")
    except ValueError:
        answer = {}
    if not answer.get("requested", False):
        print(f"kraftd snapshot create: the server did not accept the request: {body.decode(errors='replace')}",
              file=sys.stderr)
        return 1
    print(f"snapshot of {args.topic}-{args.partition} requested")
    return 0

