"""`kraftd verify --data-dir DIR [DIR...]`: audit stopped nodes' data dirs offline.

Checks every segment (CRCs, offsets, records), index, leader-epoch checkpoint and snapshot
file of each dir and, given several nodes' dirs, compares the replicas of each partition below
the high watermark their `replication-offset-checkpoint` files record. One line per finding or
note (file, partition, offset, byte position), then a summary. Exit status 0 when there is no
finding (notes allowed), 1 when there is any, 2 when a DIR is not a directory.
See kraftd/storage/data_dir_audit.py for what is checked and what is only a note.
"""
from __future__ import annotations

import argparse
import os
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser("verify", help="audit data dirs: segments, indexes, epoch checkpoints, snapshots, "
                                             "and replicas below the high watermark",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("--data-dir", nargs="+", required=True, metavar="DIR", dest="data_dirs",
                   help="one node's data dir, or several nodes' dirs to compare their replicas")
    p.add_argument("--headers-only", action="store_true",
                   help="check batch framing and CRCs only, without decoding every record (faster)")
    p.add_argument("--no-notes", action="store_true", help="print findings only, not notes")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kraftd.storage.data_dir_audit import FINDING, audit_data_dirs

    missing = [d for d in args.data_dirs if not os.path.isdir(d)]
    if missing:
        print(f"kraftd verify: not a directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    result = audit_data_dirs(args.data_dirs, check_record_contents=not args.headers_only)
    try:
        for finding in result.findings:
            if finding.severity == FINDING or not args.no_notes:
                print(finding)
        print(result.summary())
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return 1 if result.failed else 0
