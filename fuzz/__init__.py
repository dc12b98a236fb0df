"""Coverage-guided fuzz targets (atheris): `make fuzz`, bench/README.md (u). Not installed."""
from __future__ import annotations

import os
import sys

SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def refuse_seeds_as_output(argv: list[str]) -> None:
    """libFuzzer writes new inputs to the first corpus directory it is given: that must be a
    scratch one (build/fuzz/<target>), not the committed seeds."""
    dirs = [a for a in argv[1:] if not a.startswith("-")]
    if dirs and os.path.isdir(dirs[0]) and os.path.realpath(dirs[0]).startswith(os.path.realpath(SEEDS)):
        sys.exit(f"{dirs[0]}: the first corpus directory receives new inputs; put a scratch one first, "
                 f"e.g. build/fuzz/<target> {dirs[0]}")
