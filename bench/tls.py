"""(w) TLS against plaintext: the same confluent-kafka (librdkafka) producer and consumer, 1 KiB
records, against two kraftd processes on this machine, one with `security_protocol = "SSL"`
(test certificates, EC P-256) and one plaintext. Passes alternate between the two; the table
gives the medians (MB/s of record values) and the TLS/plaintext ratio measured in this run.

- produce: acks=1 into a fresh one-partition topic until `--mib` MiB are acknowledged;
- consume: that topic from offset 0 to its end (assign, no group).

Target (issue 24): TLS consume at least 0.5x plaintext consume. A plaintext fetch answer leaves
through sendfile (page cache to socket, no copy); on TLS every byte is copied, encrypted and
written, so the gap is that of sendfile against encryption.

Run: ``.venv/bin/python -m bench.tls [--mib 256] [--repeats 3]`` on an idle machine.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

NAME = "tls"
TARGET_CONSUME = 0.5
VALUE = b"x" * 1024


def _produce(bootstrap: str, security: dict, topic: str, mib: int) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, **security})
    records = mib * 1024
    acked = 0

    def done(err, _msg):
        nonlocal acked
        if err is None:
            acked += 1

    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, VALUE, partition=0, on_delivery=done)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0, "records left unacknowledged"
    seconds = time.perf_counter() - t0
    assert acked == records, (acked, records)
    return records * len(VALUE) / seconds / 1e6


def _consume(bootstrap: str, security: dict, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", **security})
    n = nbytes = 0
    t0 = time.perf_counter()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 120
        while n < records and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None:
                    n += 1
                    nbytes += len(m.value())
        seconds = time.perf_counter() - t0
    finally:
        c.close()
    assert n >= records, f"consumed {n} of {records}"
    return nbytes / seconds / 1e6


def run(mib: int, repeats: int) -> dict:
    from tests.support.certs import ClientSecurity, make_certs
    from tests.support.kraftd_process import KraftdProcess

    work = Path(tempfile.mkdtemp(prefix="kraftd-bench-tls-"))
    certs = make_certs(work / "certs")
    env = {"KRAFTD_FSYNC_POLICY": "never"}  # the network path is measured, not the disk
    servers = {"plaintext": (KraftdProcess(work / "plain", env=env).start(), {}),
               "tls": (KraftdProcess(work / "tls", env={**env, **certs.server_env()}).start(),
                       ClientSecurity.of(certs).confluent())}
    results: dict = {name: {"produce": [], "consume": []} for name in servers}
    try:
        for r in range(repeats):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for name in order:
                server, security = servers[name]
                topic = f"bench-{r}"
                results[name]["produce"].append(_produce(server.bootstrap, security, topic, mib))
                results[name]["consume"].append(_consume(server.bootstrap, security, topic, mib * 1024))
                print(f"  pass {r + 1} {name:<9} produce {results[name]['produce'][-1]:7.1f} MB/s"
                      f"  consume {results[name]['consume'][-1]:7.1f} MB/s", flush=True)
    finally:
        for server, _ in servers.values():
            server.kill()
    return results


def report(results: dict) -> str:
    lines = [f"{'':<10}{'produce MB/s':>14}{'consume MB/s':>14}"]
    medians = {name: {k: statistics.median(v) for k, v in by.items()} for name, by in results.items()}
    for name, m in medians.items():
        lines.append(f"{name:<10}{m['produce']:>14.1f}{m['consume']:>14.1f}")
    ratio = {k: medians["tls"][k] / medians["plaintext"][k] for k in ("produce", "consume")}
    lines.append(f"{'TLS/plain':<10}{ratio['produce']:>13.2f}x{ratio['consume']:>13.2f}x")
    verdict = "met" if ratio["consume"] >= TARGET_CONSUME else "NOT met"
    lines.append(f"target: TLS consume >= {TARGET_CONSUME}x plaintext: {verdict}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="MiB produced (and consumed) per pass")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(report(run(args.mib, args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
