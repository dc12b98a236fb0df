"""`kraftd serve` with the fake Node: same CLI flags, same process lifecycle (for SIGTERM tests).

Run as a script: python tests/server/fake_serve.py --listen 127.0.0.1:0 --data-dir DIR ...
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kraftd.commands import serve  # noqa: E402
from kraftd.config.settings import ConfigError, Settings  # noqa: E402
from server_fake_node import FakeNode  # noqa: E402


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve.register(sub)
    args = parser.parse_args(["serve", *sys.argv[1:]])
    try:
        settings = Settings.load(args.config, **{f: getattr(args, f) for f, _ in serve.FLAGS.values()})
    except ConfigError as e:
        print(f"kraftd: {e}", file=sys.stderr)
        return 2
    return serve.serve_with(settings, FakeNode.open)


if __name__ == "__main__":
    sys.exit(main())
