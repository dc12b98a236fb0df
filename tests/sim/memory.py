"""Memory and descriptors over many simulation seeds in one process (issue 22):
`python -m tests.sim.memory --seeds 300` prints RSS and open descriptors every 50 seeds and
the growth per seed. A leak in the core (gc.freeze() in snapshot loading used to leak ~1.5 MB
and ~0.6 descriptors per seed) shows here as steady growth."""
from __future__ import annotations

import argparse
import gc
import os
import sys

from .run import run_seed


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def measure(seeds: int, start: int = 0, every: int = 50, out=sys.stdout) -> list[tuple[int, int, int]]:
    """(seeds run, RSS KiB, descriptors) after a warm-up seed and every `every` seeds."""
    samples = []
    for i, seed in enumerate(range(start, start + seeds + 1)):
        result = run_seed(seed)
        if not result.ok:
            raise AssertionError(f"seed {seed}: {result.error}")
        if i % every == 0:
            gc.collect()
            samples.append((i, rss_kib(), open_descriptors()))
            print(f"{i:>5} seeds  RSS {samples[-1][1] / 1024:7.1f} MiB  descriptors {samples[-1][2]}", file=out,
                  flush=True)
    return samples


def growth_per_seed_kib(samples) -> float:
    """RSS growth per seed from the first sample after the warm-up seed to the last."""
    (n0, rss0, _), (n1, rss1, _) = samples[0], samples[-1]
    return (rss1 - rss0) / max(1, n1 - n0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--start", type=int, default=0)
    args = parser.parse_args(argv)
    samples = measure(args.seeds, args.start)
    per_seed = growth_per_seed_kib(samples)
    fds = {s[2] for s in samples}
    print(f"RSS growth {per_seed:.1f} KiB per seed; descriptors {min(fds)}..{max(fds)}")
    return 0 if per_seed < 100 / 1.024 and max(fds) - min(fds) <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
