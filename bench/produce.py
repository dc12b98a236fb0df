"""(x) Single-node produce: kraftd against Tansu, acks=1 and acks=all (issue 27).

confluent-kafka (librdkafka) produces `--mib` MiB of 1 KiB records (linger.ms=5, no
idempotence, no compression, one partition) into a fresh topic on each system; every pass runs
in a child process (bench/clients.py's worker) and ends when every record is acknowledged.
Systems alternate (the order rotates every round) and each figure is the median of the rounds.
Besides MB/s (record values), each pass reads the server's own CPU time (/proc) and reports CPU
seconds per produced MB.

kraftd runs with its default settings (fsync_policy "acks_all": an acks=all produce is answered
once its data is fsynced; acks=1 is answered after the write). Tansu 0.6 runs with its memory
storage engine, which has no fsync, so acks=all costs it nothing extra.

Run: ``.venv/bin/python -m bench.produce [--mib 256] [--rounds 3] [--acks 1,all] [--before EXE]``
(``--before`` adds another build's ``kraftd`` executable, e.g. from a venv of an older commit)
(~2 min at the defaults; ratios are measured in the same run, so a busy machine slows both).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from bench import wire
from bench.clients import confluent_pass
from bench.common import median, ratio, rotated, settle, table, verdict
from bench.servers import HOST, KraftdServer, ServerStartError, TansuServer, install_signal_handlers

NAME = "produce"
TARGETS = {"1": 1.5, "all": 1.2}  # kraftd / Tansu, issue 27
VALUE_SIZE = 1024


def one_pass(server, acks: str, records: int, topic: str, time_box: float) -> dict:
    with wire.Conn(HOST, server.port) as c:
        c.create_topic(topic)
    try:
        cpu0 = server.cpu_seconds()
        res = confluent_pass(f"confluent-produce-acks{acks}", server.bootstrap, topic, records,
                             VALUE_SIZE, time_box)
        cpu = server.cpu_seconds() - cpu0
    finally:
        with wire.Conn(HOST, server.port) as c:
            c.delete_topic(topic)
    mb = res["bytes"] / 1e6
    res.update(mb_s=mb / res["seconds"], cpu_s=cpu, cpu_s_per_mb=cpu / mb if mb else None)
    return res


class EarlierKraftd(KraftdServer):
    """Another build of kraftd (``--before PATH/TO/kraftd``), measured in the same run."""

    name = "before"

    def __init__(self, exe: str) -> None:
        super().__init__()
        self.exe = exe

    def executable(self) -> list[str]:
        return [self.exe]


def run(mib: int, rounds: int, acks_levels: list[str], time_box: float, log,
        before: str | None = None) -> dict:
    records = mib * (1 << 20) // VALUE_SIZE
    servers = []
    makers = [(KraftdServer.name, KraftdServer), (TansuServer.name, TansuServer)]
    if before:
        makers.append((EarlierKraftd.name, lambda: EarlierKraftd(before)))
    for name, make in makers:
        try:
            servers.append((name, make().start()))
        except ServerStartError as exc:
            log(f"{name} did not start: {exc}")
    runs: dict[str, list[dict]] = {}
    try:
        for acks in acks_levels:
            for rnd in range(rounds):
                for name, server in rotated(servers, rnd):
                    settle([s for _, s in servers])
                    res = one_pass(server, acks, records, f"bench-produce-{acks}-{rnd}", time_box)
                    runs.setdefault(f"{acks}/{name}", []).append(res)
                    log(f"acks={acks:3s} {name:6s} round {rnd + 1}/{rounds}: {res['mb_s']:7.1f} MB/s, "
                        f"server {res['cpu_s']:.2f} CPU s ({res['cpu_s_per_mb'] * 1000:.2f} ms/MB)"
                        + ("" if res["complete"] else "  INCOMPLETE"))
    finally:
        for _, server in servers:
            server.stop()
    medians = {key: dict(mb_s=median([r["mb_s"] for r in rs]),
                         cpu_ms_per_mb=median([r["cpu_s_per_mb"] * 1000 for r in rs]))
               for key, rs in runs.items()}
    ratios = {acks: ratio(medians.get(f"{acks}/kraftd", {}).get("mb_s"),
                          medians.get(f"{acks}/tansu", {}).get("mb_s")) for acks in acks_levels}
    if before:
        ratios.update({f"{acks} kraftd/before": ratio(medians.get(f"{acks}/kraftd", {}).get("mb_s"),
                                                      medians.get(f"{acks}/before", {}).get("mb_s"))
                       for acks in acks_levels})
    return dict(name=NAME, mib=mib, rounds=rounds, runs=runs, medians=medians, ratios=ratios,
                verdict={f"acks={a} kraftd/tansu >= {TARGETS[a]}": verdict(ratios[a], TARGETS[a])
                         for a in acks_levels})


def report(res: dict) -> str:
    rows = []
    for key, m in sorted(res["medians"].items()):
        acks, name = key.split("/")
        rows.append([f"acks={acks}", name, f"{m['mb_s']:.1f}", f"{m['cpu_ms_per_mb']:.2f}"])
    out = [f"(x) produce, {res['mib']} MiB of 1 KiB records, median of {res['rounds']} rounds",
           table(["acks", "system", "MB/s", "server CPU ms/MB"], rows)]
    for key, r in res["ratios"].items():
        acks, _, what = key.partition(" ")
        out.append(f"acks={acks}: {what or 'kraftd/tansu'} " + (f"{r:.2f}x" if r is not None else "no ratio"))
    out += [f"{k}: {v}" for k, v in res["verdict"].items()]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--acks", default="1,all")
    ap.add_argument("--time-box", type=float, default=120.0)
    ap.add_argument("--before", metavar="KRAFTD", help="another build's kraftd executable, measured too")
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args()
    install_signal_handlers()
    t0 = time.monotonic()
    res = run(args.mib, args.rounds, args.acks.split(","), args.time_box,
              lambda msg: print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True),
              before=args.before)
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
