"""`kraftd` command line: one small module per subcommand under kraftd/commands/.

To add a subcommand, create kraftd/commands/<name>.py with `register(subparsers)` (add its
parser and `set_defaults(run=...)`) and list the module in COMMANDS. Heavy imports belong
inside the run function so `kraftd --help` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from kraftd import __version__

COMMANDS = ["serve", "dump-log", "snapshot", "quorum", "cluster", "verify", "pipeline"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraftd", description="A Kafka-wire-protocol daemon.")
    parser.add_argument("--version", action="version", version=f"kraftd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"kraftd.commands.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
