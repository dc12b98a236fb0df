"""kraftd serve: run the broker until SIGTERM/SIGINT."""
from __future__ import annotations

import argparse
import sys

# CLI flag -> Settings field. Flags beat KRAFTD_* env vars, which beat the --config file.
FLAGS = {
    "--node-id": ("node_id", int),
    "--listen": ("listen", str),
    "--advertised-listener": ("advertised_listener", str),
    "--data-dir": ("data_dir", str),
    "--metrics-listen": ("metrics_listen", str),
    "--log-format": ("log_format", str),
    "--log-level": ("log_level", str),
    "--fsync-policy": ("fsync_policy", str),
    "--voters": ("voters", str),
    # No --cluster-secret: a command line is visible to every user of the machine.
    "--cluster-secret-file": ("cluster_secret_file", str),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the broker",
                       description="Run the broker. Settings: flags > KRAFTD_* env > --config file.")
    p.add_argument("--config", metavar="FILE", help="TOML settings file (see config/example.toml)")
    for flag, (field, kind) in FLAGS.items():
        metavar = "HOST:PORT" if kind is str and "listen" in flag else field.upper()
        p.add_argument(flag, dest=field, type=kind, default=None, metavar=metavar)
    p.add_argument("--rejoin", dest="rejoin", action="store_true", default=None,
                   help="this empty data dir replaces a voter's lost one: vote only once caught up")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kraftd.config.settings import ConfigError, Settings

    try:
        flags = {f: getattr(args, f) for f, _ in FLAGS.values()}
        flags["rejoin"] = args.rejoin
        settings = Settings.load(args.config, **flags)
    except ConfigError as e:
        print(f"kraftd: {e}", file=sys.stderr)
        return 2
    return serve_with(settings)


def serve_with(settings, node_factory=None) -> int:
    """Configure logging and run; node_factory=None opens the real file-backed node."""
    import structlog

    from kraftd.server.app import serve
    from kraftd.server.node_files import open_file_node
    from kraftd.server.logging import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    try:
        return serve(settings, node_factory or open_file_node)
    except KeyboardInterrupt:
        return 0
    except Exception as e:
        structlog.get_logger("kraftd").exception("kraftd failed", error=repr(e))
        return 1
