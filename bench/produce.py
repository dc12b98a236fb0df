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
from bench.clients import _run_child
from bench.common import median, ratio, rotated, settle, table, verdict
from bench.servers import HOST, KraftdServer, ServerStartError, TansuServer, install_signal_handlers

NAME = "produce"
TARGETS = {"1": 1.5, "all": 1.2}  # kraftd / Tansu, issue 27
VALUE_SIZE = 1024


def produce_worker(bootstrap: str, topic: str, records: int, acks: str, batch: int, time_box: float) -> dict:
    """One pass in a child process: `records` 1 KiB values, handed to librdkafka `batch` at a
    time with produce_batch (batch 1: one produce() call each), then flush()."""
    import resource

    from confluent_kafka import Producer

    failed = [0]

    def on_err(err, _msg):  # delivery.report.only.error: called for failures only
        if err is not None:
            failed[0] += 1

    p = Producer({
        "bootstrap.servers": bootstrap, "acks": -1 if acks == "all" else int(acks), "linger.ms": 5,
        "enable.idempotence": False, "compression.type": "none",
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True, "client.id": "kraftd-bench-produce",
    })
    value = wire.record_value(VALUE_SIZE)
    messages = [{"value": value}] * batch
    n = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + time_box
    while n < records and time.monotonic() < deadline:
        try:
            if batch == 1:
                p.produce(topic, value, partition=0, on_delivery=on_err)
                n += 1
            else:
                k = min(batch, records - n)
                queued = p.produce_batch(topic, messages[:k] if k < batch else messages, partition=0,
                                         on_delivery=on_err)
                n += queued
                if queued < k:
                    p.poll(0.01)
        except BufferError:
            p.poll(0.01)
            continue
        if n % 5000 < batch:
            p.poll(0)
    left = p.flush(60)
    secs = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    acked = n - failed[0] - left
    return dict(records=acked, bytes=acked * VALUE_SIZE, seconds=secs, errors=failed[0] + left,
                complete=acked >= records, client_cpu_s=usage.ru_utime + usage.ru_stime)


def one_pass(server, acks: str, records: int, topic: str, time_box: float, batch: int) -> dict:
    with wire.Conn(HOST, server.port) as c:
        c.create_topic(topic)
    try:
        cpu0 = server.cpu_seconds()
        argv = [sys.executable, "-m", "bench.produce", "--worker", server.bootstrap, topic, str(records),
                acks, str(batch), str(time_box)]
        rc, out, err = _run_child(argv, time_box + 90)
        if rc != 0:
            raise RuntimeError(f"producer exited {rc}: {err.strip()[-400:]}")
        res = json.loads(out.strip().splitlines()[-1])
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
        before: str | None = None, batch: int = 1000) -> dict:
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
                    res = one_pass(server, acks, records, f"bench-produce-{acks}-{rnd}", time_box, batch)
                    runs.setdefault(f"{acks}/{name}", []).append(res)
                    log(f"acks={acks:3s} {name:6s} round {rnd + 1}/{rounds}: {res['mb_s']:7.1f} MB/s, "
                        f"server {res['cpu_s']:.2f} CPU s ({res['cpu_s_per_mb'] * 1000:.2f} ms/MB), "
                        f"client {res['client_cpu_s']:.2f} CPU s"
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
    return dict(name=NAME, mib=mib, rounds=rounds, batch=batch, runs=runs, medians=medians, ratios=ratios,
                verdict={f"acks={a} kraftd/tansu >= {TARGETS[a]}": verdict(ratios[a], TARGETS[a])
                         for a in acks_levels})


def report(res: dict) -> str:
    rows = []
    for key, m in sorted(res["medians"].items()):
        acks, name = key.split("/")
        rows.append([f"acks={acks}", name, f"{m['mb_s']:.1f}", f"{m['cpu_ms_per_mb']:.2f}"])
    out = [f"(x) produce, {res['mib']} MiB of 1 KiB records, {res['batch']} per produce_batch call, "
           f"median of {res['rounds']} rounds",
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
    ap.add_argument("--batch", type=int, default=1000,
                    help="records per produce_batch call (1: one produce() call per record)")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        bootstrap, topic, records, acks, batch, time_box = args.worker
        print(json.dumps(produce_worker(bootstrap, topic, int(records), acks, int(batch), float(time_box))))
        return 0
    install_signal_handlers()
    t0 = time.monotonic()
    res = run(args.mib, args.rounds, args.acks.split(","), args.time_box,
              lambda msg: print(f"[{time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True),
              before=args.before, batch=args.batch)
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
