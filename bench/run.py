"""kraftd benchmark harness: ``.venv/bin/python -m bench.run`` (or ``python bench/run.py``).

Starts the systems (kraftd, Tansu; the C ceiling is started by the raw-consume bench), runs
each bench module in ``BENCHES`` (each is ``bench/<name>.py`` with ``run(ctx) -> dict`` and
``report(result) -> str``), prints one table per bench with medians, ratios and target
verdicts, and writes the full results to ``bench/out/``.  See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

from bench import servers  # noqa: E402
from bench.common import Context  # noqa: E402

# Bench modules, in run order.  Add a bench: create bench/<name>.py with NAME, run(ctx) and
# report(result), and list it here.
BENCHES = ["raw_consume", "clients", "small_requests", "fetch_sessions", "snapshots", "raft_round", "cluster", "rejoin", "move",
           "pipeline"]
ALL_SYSTEMS = ["kraftd", "tansu", "ceiling"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS),
                   help="comma list of kraftd,tansu,ceiling (default: all)")
    p.add_argument("--benches", default=",".join(BENCHES),
                   help=f"comma list of benches (default: {','.join(BENCHES)})")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 64 MiB, 2 repeats, short windows (< 2 min)")
    p.add_argument("--data-mib", type=int, default=None,
                   help="dataset size in MiB of 1 KiB records (default 1024; --quick 64)")
    p.add_argument("--repeats", type=int, default=None,
                   help="measured repetitions per system, interleaved (default 3; --quick 2)")
    p.add_argument("--fetch-version", type=int, default=None,
                   help="force the Fetch version (default: highest common with the server)")
    p.add_argument("--batch-records", type=int, default=16,
                   help="records per produced batch for the dataset (default 16 ~ 16 KiB)")
    p.add_argument("--duration", type=float, default=None,
                   help="small-request measuring window in seconds (default 5; --quick 2)")
    p.add_argument("--raw-time-box", type=float, default=None,
                   help="max seconds per raw-consume pass (default 10; --quick 5)")
    p.add_argument("--raw-repeats", type=int, default=None,
                   help="raw-consume repetitions (default 5; --quick 3): passes are cheap "
                        "except on Tansu, where they are time-boxed")
    p.add_argument("--raw-min-seconds", type=float, default=None,
                   help="a raw-consume pass sweeps the dataset again until it has run this "
                        "long (default 2; --quick 0): one 1 GiB sweep is ~0.2-0.5 s, too "
                        "short to average out this machine's noise")
    p.add_argument("--client-time-box", type=float, default=None,
                   help="max seconds per real-client pass (default 20; --quick 10)")
    p.add_argument("--small-topic", choices=["small", "data"], default="small",
                   help="small-request target: a 16-record topic (default) or the dataset")
    p.add_argument("--snapshot-keys", type=int, default=None,
                   help="keys in the snapshots bench's state (default 1,000,000)")
    p.add_argument("--session-blocks", type=int, default=None,
                   help="fetch_sessions blocks of 10 full + 100 incremental rounds "
                        "(default 5; --quick 2 blocks of 5 + 50)")
    p.add_argument("--kraftd-arg", action="append", default=[],
                   help="extra argument for `kraftd serve` (repeatable)")
    p.add_argument("--start-timeout", type=float, default=30.0,
                   help="seconds to wait for a server to accept connections")
    p.add_argument("--out", default=None, help="JSON result path (default bench/out/...)")
    return p.parse_args(argv)


def _git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, cwd=str(servers.REPO)).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    servers.install_signal_handlers()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in ALL_SYSTEMS]
    if bad:
        print(f"unknown system(s): {bad}; choose from {ALL_SYSTEMS}", file=sys.stderr)
        return 2
    benches = [b.strip() for b in args.benches.split(",") if b.strip()]
    q = args.quick
    ctx = Context(
        systems=systems, servers={}, skipped={},
        data_mib=args.data_mib or (64 if q else 1024),
        repeats=args.repeats or (2 if q else 3),
        quick=q, fetch_version=args.fetch_version, batch_records=args.batch_records,
        duration_s=args.duration or (2.0 if q else 5.0),
    )
    ctx.options["raw_time_box"] = args.raw_time_box or (5.0 if q else 10.0)
    ctx.options["raw_repeats"] = args.raw_repeats or (3 if q else 5)
    ctx.options["raw_min_seconds"] = (args.raw_min_seconds if args.raw_min_seconds is not None
                                      else (0.0 if q else 2.0))
    ctx.options["raw_warmup_s"] = 1.0 if q else 3.0
    ctx.options["client_time_box"] = args.client_time_box or (10.0 if q else 20.0)
    ctx.options["warmup_s"] = 0.5 if q else 1.0
    ctx.options["small_topic"] = args.small_topic
    # benches that start their own kraftd (fetch_sessions, snapshots) use these too
    ctx.options["kraftd_args"] = list(args.kraftd_arg)
    ctx.options["start_timeout"] = args.start_timeout
    ctx.options["snapshot_keys"] = args.snapshot_keys
    ctx.options["fs_blocks"] = args.session_blocks
    ctx.log(f"kraftd bench: systems={systems} benches={benches} data={ctx.data_mib} MiB "
            f"repeats={ctx.repeats}")
    results: dict = dict(
        started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), git=_git_rev(),
        host=dict(cpus=os.cpu_count(), platform=platform.platform(),
                  python=platform.python_version(), loadavg=os.getloadavg()),
        config=dict(systems=systems, benches=benches, data_mib=ctx.data_mib,
                    repeats=ctx.repeats, quick=q, fetch_version=args.fetch_version,
                    batch_records=ctx.batch_records, duration_s=ctx.duration_s,
                    **ctx.options),
        skipped=ctx.skipped, systems={}, benches={})
    reports: list[str] = []
    try:
        for name in systems:
            if name == "ceiling":
                continue
            srv = servers.KraftdServer(args.kraftd_arg) if name == "kraftd" \
                else servers.TansuServer()
            ctx.log(f"starting {name} ...")
            try:
                srv.start(timeout=args.start_timeout)
            except Exception as e:  # noqa: BLE001 - any failure means "skip this system"
                reason = str(e)
                ctx.skipped[name] = reason
                ctx.log(f"SKIPPING {name}: it failed to start:\n{reason}")
                continue
            ctx.servers[name] = srv
            ctx.log(f"  {name} up on {srv.bootstrap} (pid {srv.proc.pid})")
            results["systems"][name] = dict(port=srv.port, api_versions=srv.info.get(
                "api_versions"))
        for bname in benches:
            mod = importlib.import_module(f"bench.{bname}")
            ctx.log(f"=== {bname} ===")
            t0 = time.monotonic()
            try:
                res = mod.run(ctx)
            except Exception as e:  # noqa: BLE001 - report and go on with the next bench
                import traceback
                traceback.print_exc()
                res = dict(name=bname, error=f"{type(e).__name__}: {e}")
            res["elapsed_s"] = time.monotonic() - t0
            results["benches"][bname] = res
            rep = mod.report(res)
            reports.append(rep)
            print("\n" + rep + "\n", flush=True)
        for name, srv in ctx.servers.items():
            results["systems"][name]["rss_mib_end"] = srv.rss_mib()
            results["systems"][name]["alive_end"] = srv.alive()
            if not srv.alive():
                ctx.log(f"WARNING: {name} died during the run; log tail:\n{srv.log_tail()}")
    finally:
        for srv in list(ctx.servers.values()):
            srv.stop()
    results["elapsed_s"] = time.monotonic() - ctx.t0

    print("=" * 100)
    print(f"SUMMARY  (git {results['git']}, {ctx.data_mib} MiB of 1 KiB records, medians of "
          f"{ctx.repeats} interleaved runs, MB = 10^6 bytes, total {results['elapsed_s']:.0f}s)")
    for name, reason in ctx.skipped.items():
        print(f"  {name}: SKIPPED (failed to start: {reason.splitlines()[0]})")
    print()
    for rep in reports:
        print(rep)
        print()
    out = Path(args.out) if args.out else servers.BENCH_DIR / "out" / \
        f"results-{time.strftime('%Y%m%d-%H%M%S')}{'-quick' if q else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    latest = servers.BENCH_DIR / "out" / "latest.json"
    if out.resolve() != latest.resolve():
        latest.write_text(out.read_text())
    print(f"results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
