"""Shared bench plumbing: the run context, statistics and table formatting."""

from __future__ import annotations

import statistics
import urllib.request
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.servers import Server


@dataclass
class Context:
    systems: list[str]                       # requested order, e.g. ["kraftd", "tansu"]
    servers: dict[str, Server]               # the ones that started
    skipped: dict[str, str]                  # system -> reason it is not measured
    data_mib: int = 1024
    repeats: int = 3
    quick: bool = False
    fetch_version: int | None = None
    batch_records: int = 16
    value_size: int = 1024
    duration_s: float = 5.0                  # small-request bench window
    t0: float = field(default_factory=time.monotonic)
    options: dict[str, Any] = field(default_factory=dict)

    def log(self, msg: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def kafka_servers(self) -> list[tuple[str, Server]]:
        return [(n, self.servers[n]) for n in self.systems if n in self.servers]


def settle(servers: list[Server], *, busy_below: float = 0.05, window_s: float = 0.2,
           max_wait_s: float = 15.0) -> float:
    """Wait until none of `servers` uses more than `busy_below` of a core over `window_s`
    (e.g. Tansu still assembling fetches a time-boxed client gave up on), so one system's
    leftovers are not billed to the next one measured. Returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_wait_s:
        before = [s.cpu_seconds() for s in servers]
        time.sleep(window_s)
        after = [s.cpu_seconds() for s in servers]
        if all(a is None or b is None or (a - b) / window_s <= busy_below
               for a, b in zip(after, before)):
            break
    return time.monotonic() - t0


def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "MET" if value >= target else "NOT MET"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    def line(cells: list[str]) -> str:
        return "  ".join(str(c).rjust(w) if i else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def rotated(items: list[Any], k: int) -> list[Any]:
    """Interleave order between repeats so no system always runs first/last."""
    if not items:
        return items
    k %= len(items)
    return items[k:] + items[:k]


def scrape_metrics(host: str, port: int) -> dict[str, float]:
    """A server's Prometheus samples, keyed by the raw sample name (labels included)."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def wait_for(what: str, check, timeout: float, interval: float = 0.05):
    """Poll `check()` until it returns something truthy (an OSError counts as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def run_standalone(name: str, parser, measure_with, report) -> int:
    """A bench module's `main`: parse `parser` (it needs no --out: added here), run
    `measure_with(args, log)` with a log of elapsed seconds on stderr, print `report(result)`,
    and write the result to --out (default bench/out/<name>-<time>.json)."""
    import json
    import sys
    import time
    from pathlib import Path

    parser.add_argument("--out", help=f"JSON result path (default bench/out/{name}-<time>.json)")
    args = parser.parse_args()
    t0 = time.monotonic()

    def log(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    res = measure_with(args, log)
    print(report(res))
    out = Path(args.out) if args.out else Path(__file__).parent / "out" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, default=str))
    return 0
