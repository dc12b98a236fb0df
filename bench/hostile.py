"""Hostile clients against one node: memory must level off and /metrics must stay fast.

    .venv/bin/python -m bench.hostile                 # 10 minutes (issue 21, item 4)
    .venv/bin/python -m bench.hostile --minutes 3     # shorter
    .venv/bin/python -m bench.hostile --attach 127.0.0.1:9092 --metrics-port 9464 --pid PID

One `kraftd serve` process (default settings but for the topic caps, temporary data dir, log
level warning) is started, unless `--attach` names a running one. The mutated frames create
topics, as the caps allow; lower caps (`BENCH_CAPS`: 300 topics auto-created, 1,000 partitions)
are reached in the first minutes, so that what grows after them shows; `--server-defaults`
keeps the server's. For `--minutes` three kinds of client run at
once, each in its own process, all on 127.0.0.1:

- **mutated frames**: valid requests of every API and version (kraftd's own encoder, a few
  with real content: produce batches, fetches, topic names, group ids) are mutated (bytes
  flipped, inserted, deleted, duplicated, hostile int16/int32 values written over fields,
  truncation, two frames spliced) and sent pipelined, most with a correct size prefix and
  some with a bogus one. A connection is used until the server closes it or for 64 frames.
- **connection churn**: `--connections` (default 10,000) connections spread over the run,
  opened in waves of up to 200 held at once and then dropped: some closed at once, some
  after an ApiVersions or Metadata (answer read or not), some in the middle of a frame, some
  reset (SO_LINGER 0), some after parking an acks=-1 produce with a 10-minute timeout or a
  30-second long-poll fetch.
- **fetch-session churn**: full fetches (v12, session id 0, epoch 0) that open a new session
  each, on the bench topic and on unknown topics (1 to 60 partitions, one in 20 asking for
  3,000), a few followed by one incremental fetch, all abandoned (a few closed with epoch
  -1); every 50 sessions the connection and the client id change.

Every `--sample-s` (30) seconds: the server's RSS (/proc/PID/status VmRSS) and the time a
GET /metrics takes. At the end a table and a verdict: RSS levels off when it grew less than
5 % (or 8 MiB, whichever is larger) over the last third of the run, and every scrape must
answer within 1 s. Exit status 1 otherwise. The samples go to bench/out/hostile-<time>.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import socket
import struct
import sys
import time
import urllib.request
import uuid
from pathlib import Path

HOST = "127.0.0.1"
TOPIC = "hostile-data"
SCRAPE_LIMIT_S = 1.0
# Topics the mutated Metadata, Produce and CreateTopics frames create are within the caps, not a
# leak; lower caps are reached in the first minutes, so that what grows after them shows.
BENCH_CAPS = {"KRAFTD_AUTO_CREATE_TOPICS_MAX": "300", "KRAFTD_MAX_PARTITIONS": "1000"}
LEVEL_PCT = 5.0
LEVEL_MIB = 8.0
HOSTILE_INTS = [0, -1, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 2**31 - 1, -2**31, 2**30, 3000]


# -- frames ------------------------------------------------------------------------------------
def _encode(api_key: int, version: int, request, correlation_id: int = 1, client_id: str | None = "hostile") -> bytes:
    from kraftd.protocol import messages as m
    from kraftd.protocol.framing import encode_request, frame_bytes
    header = m.RequestHeader(request_api_key=api_key, request_api_version=version,
                             correlation_id=correlation_id, client_id=client_id)
    parts: list = []
    encode_request(header, request, parts)
    return frame_bytes(parts)


def _batch(n: int, producer_id: int = -1, compression: int = 0) -> bytes:
    from kraftd.protocol.records import build_batch
    kwargs = {"producer_id": producer_id, "producer_epoch": 0, "base_sequence": 0} if producer_id >= 0 else {}
    return build_batch([(b"k%d" % i, b"v" * (i + 1), [], 1_700_000_000_000 + i) for i in range(n)],
                       compression=compression, **kwargs)


def _requests() -> dict[int, list]:
    from kraftd.protocol import messages as m
    P, F = m.ProduceRequest, m.FetchRequest
    t = TOPIC
    return {
        0: [P(acks=a, timeout_ms=1000, topic_data=[P.TopicProduceData(name=t, partition_data=[
            P.PartitionProduceData(index=0, records=_batch(3, compression=c))])]) for a, c in [(-1, 0), (1, 1), (0, 0)]]
           + [P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="auto-t", partition_data=[
               P.PartitionProduceData(index=0, records=_batch(1))])])],
        1: [F(replica_id=-1, max_wait_ms=20, min_bytes=1, max_bytes=65536, session_id=0, session_epoch=e,
              topics=[F.FetchTopic(topic=name, topic_id=uuid.UUID(int=0), partitions=[F.FetchPartition(
                  partition=i, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1,
                  log_start_offset=-1, partition_max_bytes=65536) for i in range(n)])])
            for e, name, n in [(0, t, 1), (-1, t, 1), (0, "unknown-x", 8)]],
        3: [m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=True) for name in (t, "auto-m", "auto-n")]
           + [m.MetadataRequest(topics=None)],
        10: [m.FindCoordinatorRequest(key="group-a", key_type=0, coordinator_keys=["group-a"])],
        11: [m.JoinGroupRequest(group_id="group-a", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                member_id="", group_instance_id=None, protocol_type="consumer", protocols=[
                                    m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\0\1")])],
        19: [m.CreateTopicsRequest(timeout_ms=1000, topics=[m.CreateTopicsRequest.CreatableTopic(
            name="created-c", num_partitions=1, replication_factor=1, assignments=[], configs=[])])],
        22: [m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                     producer_id=-1, producer_epoch=-1)],
    }


def build_corpus() -> list[bytes]:
    """One or more valid frames per API and version (a request this version cannot carry is
    replaced by the message's defaults)."""
    from kraftd.protocol.api import API_BY_KEY
    out = []
    reqs = _requests()
    for key, spec in sorted(API_BY_KEY.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            for req in reqs.get(key, [spec.request_cls()]):
                try:
                    out.append(_encode(key, version, req, correlation_id=len(out) + 1))
                except Exception:  # noqa: BLE001 - a field this version cannot carry
                    try:
                        out.append(_encode(key, version, spec.request_cls(), correlation_id=len(out) + 1))
                    except Exception:  # noqa: BLE001
                        pass
    return out


def mutate(frame: bytes, corpus: list[bytes], rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(8)
        n = len(body)
        if op == 0 and n:                                      # flip bytes
            for _ in range(rng.randint(1, 8)):
                body[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1:                                          # insert random bytes
            at = rng.randint(0, n)
            body[at:at] = rng.randbytes(rng.randint(1, 32))
        elif op == 2 and n > 8:                                # delete a range (keep most headers)
            at = rng.randrange(n)
            del body[at:at + rng.randint(1, 16)]
        elif op == 3 and n > 4:                                # truncate
            del body[rng.randrange(4, n):]
        elif op == 4 and n > 4:                                # duplicate a chunk
            at = rng.randrange(n)
            chunk = body[at:at + rng.randint(1, 64)]
            body[at:at] = chunk
        elif op == 5 and n > 12:                               # a hostile int32 over a field
            at = rng.randrange(8, n - 3)
            body[at:at + 4] = struct.pack(">i", rng.choice(HOSTILE_INTS[:-1]) if rng.random() < .7
                                          else rng.randint(-2**31, 2**31 - 1))
        elif op == 6 and n > 10:                               # a hostile int16 (lengths, versions)
            at = rng.randrange(0, n - 1)
            body[at:at + 2] = struct.pack(">H", rng.choice(HOSTILE_INTS) & 0xFFFF)
        elif op == 7:                                          # splice another frame's tail
            other = rng.choice(corpus)[4:]
            at = rng.randint(0, n)
            body[at:] = other[rng.randrange(len(other)):]
    if rng.random() < 0.06:                                    # a bogus size prefix
        size = rng.choice((-1, -2**31, 2**31 - 1, len(body) + rng.randint(1, 100), 200 << 20,
                           max(0, len(body) - rng.randint(1, 8))))
    else:
        size = len(body)
    return struct.pack(">i", size) + bytes(body)


# -- workers -------------------------------------------------------------------------------------
def _connect(port: int, timeout: float = 5.0) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def _drain(sock: socket.socket) -> bool:
    """Read what is there without waiting; False once the server closed the connection."""
    try:
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return False
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False


def mutation_worker(port: int, deadline: float, seed: int, results) -> None:
    rng = random.Random(seed)
    corpus = build_corpus()
    frames = connections = 0
    while time.monotonic() < deadline:
        try:
            sock = _connect(port)
        except OSError:
            time.sleep(0.05)
            continue
        connections += 1
        sock.setblocking(False)
        alive = True
        sent = 0
        while alive and sent < 64 and time.monotonic() < deadline:
            n = rng.randint(1, 8)
            batch = b"".join(mutate(rng.choice(corpus), corpus, rng) for _ in range(n))
            try:
                sock.send(batch)  # partial sends are fine: garbage either way
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                break
            sent += n
            frames += n
            alive = _drain(sock)
        if rng.random() < 0.5:
            _reset(sock)
        else:
            sock.close()
    results.put(("mutation", {"connections": connections, "frames": frames}))


def _recv_frame(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)
    size, = struct.unpack(">i", exact(4))
    return exact(size)


def churn_worker(port: int, deadline: float, total: int, seed: int, results) -> None:
    from kraftd.protocol import messages as m
    P, F = m.ProduceRequest, m.FetchRequest
    rng = random.Random(seed)
    api_versions = _encode(18, 3, m.ApiVersionsRequest(client_software_name="churn", client_software_version="1"))
    metadata = _encode(3, 9, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                               allow_auto_topic_creation=False))
    parked_produce = _encode(0, 9, P(acks=-1, timeout_ms=600_000, topic_data=[P.TopicProduceData(
        name=TOPIC, partition_data=[P.PartitionProduceData(index=0, records=_batch(2))])]))
    long_poll = _encode(1, 12, F(replica_id=-1, max_wait_ms=30_000, min_bytes=1 << 30, max_bytes=1 << 20,
                                 session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                                     topic=TOPIC, topic_id=uuid.UUID(int=0), partitions=[F.FetchPartition(
                                         partition=0, fetch_offset=1 << 40, current_leader_epoch=-1,
                                         last_fetched_epoch=-1, log_start_offset=-1,
                                         partition_max_bytes=1 << 20)])]))
    start = time.monotonic()
    span = max(1.0, deadline - start - 5)
    opened = refused = 0
    kinds: dict[str, int] = {}
    while opened < total and time.monotonic() < deadline:
        wave = min(rng.randint(20, 200), total - opened)
        held = []
        for _ in range(wave):
            try:
                held.append(_connect(port))
            except OSError:
                refused += 1
            opened += 1
        for sock in held:
            kind = rng.choice(("close", "api_versions", "metadata", "half_frame", "reset", "produce", "long_poll"))
            kinds[kind] = kinds.get(kind, 0) + 1
            try:
                if kind == "api_versions":
                    sock.sendall(api_versions)
                elif kind == "metadata":
                    sock.sendall(metadata)
                    if rng.random() < 0.5:
                        _recv_frame(sock)
                elif kind == "half_frame":
                    sock.sendall(api_versions[:rng.randint(1, len(api_versions) - 1)])
                elif kind == "produce":
                    sock.sendall(parked_produce)
                elif kind == "long_poll":
                    sock.sendall(long_poll)
            except OSError:
                pass
        time.sleep(0.05)
        for sock in held:
            if rng.random() < 0.3:
                _reset(sock)
            else:
                sock.close()
        # Spread the connections evenly over the run.
        ahead = start + span * opened / total - time.monotonic()
        if ahead > 0:
            time.sleep(min(ahead, max(0.0, deadline - time.monotonic())))
    results.put(("churn", {"connections": opened, "connect_failures": refused, "kinds": kinds}))


def session_worker(port: int, deadline: float, seed: int, results) -> None:
    from kraftd.protocol import messages as m
    from kraftd.protocol.framing import decode_response
    F = m.FetchRequest
    rng = random.Random(seed)
    created = refused = incrementals = closes = errors = 0
    client = 0
    while time.monotonic() < deadline:
        client += 1
        try:
            sock = _connect(port)
        except OSError:
            time.sleep(0.05)
            continue
        client_id = f"sessions-{client}"
        try:
            for i in range(50):
                if time.monotonic() >= deadline:
                    break
                topics = [F.FetchTopic(topic=TOPIC, topic_id=uuid.UUID(int=0), partitions=[F.FetchPartition(
                    partition=0, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=1024)])]
                count = 3000 if rng.random() < 0.05 else rng.randint(1, 60)
                topics.append(F.FetchTopic(topic=f"nosuch-{rng.getrandbits(40):x}", topic_id=uuid.UUID(int=0),
                                           partitions=[F.FetchPartition(
                                               partition=p, fetch_offset=0, current_leader_epoch=-1,
                                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=64)
                                               for p in range(count)]))
                req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=65536, session_id=0,
                        session_epoch=0, topics=topics)
                sock.sendall(_encode(1, 12, req, correlation_id=i + 1, client_id=client_id))
                _, resp = decode_response(memoryview(_recv_frame(sock)), 1, 12)
                if resp.session_id == 0:
                    refused += 1
                    continue
                created += 1
                r = rng.random()
                if r < 0.1:
                    incremental = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=65536,
                                    session_id=resp.session_id, session_epoch=1, topics=[])
                    sock.sendall(_encode(1, 12, incremental, correlation_id=i + 1, client_id=client_id))
                    _recv_frame(sock)
                    incrementals += 1
                elif r < 0.15:
                    close = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=65536,
                              session_id=resp.session_id, session_epoch=-1, topics=[])
                    sock.sendall(_encode(1, 12, close, correlation_id=i + 1, client_id=client_id))
                    _recv_frame(sock)
                    closes += 1
        except (OSError, ConnectionError, ValueError):
            errors += 1
        finally:
            sock.close()
    results.put(("sessions", {"created": created, "sessionless": refused, "incremental": incrementals,
                              "closed": closes, "connection_errors": errors}))


# -- measuring -----------------------------------------------------------------------------------
def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


_WATCHED = {
    "connections_open": re.compile(rb"^kraftd_connections_open (\S+)$", re.M),
    "connections_total": re.compile(rb"^kraftd_connections_total (\S+)$", re.M),
    "fetch_sessions": re.compile(rb"^kraftd_num_incremental_fetch_sessions (\S+)$", re.M),
    "partitions_cached": re.compile(rb"^kraftd_num_incremental_fetch_partitions_cached (\S+)$", re.M),
    "partitions": re.compile(rb'^kraftd_log_end_offset\{', re.M),
    "groups": re.compile(rb'^kraftd_groups\{state="[^"]+"\} (\S+)$', re.M),
    "producer_states": re.compile(rb"^kraftd_producer_states (\S+)$", re.M),
    "parked": re.compile(rb"^kraftd_parked_requests (\S+)$", re.M),
}
_REFUSED = re.compile(rb'^kraftd_refused_total\{what="([^"]+)"\} (\S+)$', re.M)
_PARKED_CANCELLED = re.compile(rb"^kraftd_parked_cancelled_total (\S+)$", re.M)


def scrape(metrics_port: int) -> tuple[float, dict]:
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(f"http://{HOST}:{metrics_port}/metrics", timeout=30) as r:
            body = r.read()
    except OSError as e:
        return time.perf_counter() - t0, {"error": repr(e)}
    took = time.perf_counter() - t0
    out: dict = {"bytes": len(body)}
    for name, rx in _WATCHED.items():
        if name == "partitions":
            out[name] = len(rx.findall(body))
        elif name == "groups":
            out[name] = sum(float(v) for v in rx.findall(body))
        else:
            found = rx.search(body)
            out[name] = float(found.group(1)) if found else None
    out["refused"] = {k.decode(): float(v) for k, v in _REFUSED.findall(body)}
    found = _PARKED_CANCELLED.search(body)
    out["parked_cancelled"] = float(found.group(1)) if found else None
    return took, out


def level_verdict(samples: list[dict], elapsed_s: float) -> tuple[bool, str]:
    """RSS levelled off: over the last third of the run it grew by less than LEVEL_PCT % (or
    LEVEL_MIB, whichever is larger) of the RSS at the start of that third."""
    points = [(s["t"], s["rss_mib"]) for s in samples if s.get("rss_mib") is not None]
    if len(points) < 3:
        return False, "too few samples"
    cut = elapsed_s * 2 / 3
    before = [r for t, r in points if t <= cut]
    after = [r for t, r in points if t >= cut]
    base = before[-1]
    growth = max(after) - base
    allowed = max(base * LEVEL_PCT / 100, LEVEL_MIB)
    return growth < allowed, (f"last third: {base:.1f} -> max {max(after):.1f} MiB "
                              f"(+{growth:.1f}, allowed +{allowed:.1f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--connections", type=int, default=10_000, help="churned connections in total")
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--mutators", type=int, default=1, help="mutated-frame client processes")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--attach", metavar="HOST:PORT", help="use a running server instead of starting one")
    ap.add_argument("--metrics-port", type=int, help="with --attach")
    ap.add_argument("--pid", type=int, help="with --attach: the process whose RSS is sampled")
    ap.add_argument("--kraftd-arg", action="append", default=[], help="extra `kraftd serve` argument")
    ap.add_argument("--server-defaults", action="store_true",
                    help=f"do not lower the topic caps ({', '.join(f'{k}={v}' for k, v in BENCH_CAPS.items())})")
    ap.add_argument("--out", help="JSON results (default bench/out/hostile-<time>.json)")
    args = ap.parse_args(argv)

    server = None
    if args.attach:
        port = int(args.attach.rpartition(":")[2])
        metrics_port, pid = args.metrics_port, args.pid
    else:
        from bench.servers import KraftdServer, install_signal_handlers
        install_signal_handlers()
        if not args.server_defaults:
            for name, value in BENCH_CAPS.items():
                os.environ.setdefault(name, value)  # (the environment passes through to kraftd)
        server = KraftdServer(["--log-level", "warning", *args.kraftd_arg]).start()
        port, metrics_port, pid = server.port, server.metrics_port, server.proc.pid
    log = lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        from bench import wire
        with wire.Conn(HOST, port, timeout=30) as c:
            try:
                c.create_topic(TOPIC, 1)
            except Exception as e:  # noqa: BLE001 - exists already (attached server)
                log(f"create {TOPIC}: {e}")
        log(f"kraftd pid {pid}, port {port}, metrics {metrics_port}; {args.minutes:g} min of hostile clients")
        start = time.monotonic()
        deadline = start + args.minutes * 60
        ctx = mp.get_context("fork")
        results = ctx.Queue()
        procs = [ctx.Process(target=mutation_worker, args=(port, deadline, args.seed + i, results), daemon=True)
                 for i in range(args.mutators)]
        procs.append(ctx.Process(target=churn_worker, args=(port, deadline, args.connections, args.seed + 100,
                                                            results), daemon=True))
        procs.append(ctx.Process(target=session_worker, args=(port, deadline, args.seed + 200, results), daemon=True))
        samples: list[dict] = []

        def sample() -> None:
            took, seen = scrape(metrics_port)
            row = {"t": round(time.monotonic() - start, 1), "rss_mib": rss_mib(pid), "scrape_s": round(took, 3),
                   **seen}
            samples.append(row)
            log(f"t={row['t']:6.1f}s rss={row['rss_mib'] or 0:7.1f} MiB scrape={took * 1000:7.1f} ms "
                f"open={seen.get('connections_open')} accepted={seen.get('connections_total')} "
                f"sessions={seen.get('fetch_sessions')} cached={seen.get('partitions_cached')} "
                f"partitions={seen.get('partitions')} groups={seen.get('groups')} parked={seen.get('parked')} "
                f"producers={seen.get('producer_states')} "
                f"refused={ {k: v for k, v in (seen.get('refused') or {}).items() if v} }")

        sample()
        for p in procs:
            p.start()
        next_at = start + args.sample_s
        while time.monotonic() < deadline:
            time.sleep(max(0.0, min(next_at, deadline) - time.monotonic()))
            if time.monotonic() >= next_at - 0.01:
                sample()
                next_at += args.sample_s
            if server is not None and not server.alive():
                log("the server died")
                break
        workers = {}
        for _ in procs:
            try:
                kind, info = results.get(timeout=60)
                workers[kind] = info
            except Exception:  # noqa: BLE001
                break
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        elapsed = time.monotonic() - start
        sample()
        time.sleep(5)
        after = time.monotonic()
        sample()  # after the load: nothing running
        samples[-1]["after_load"] = True
        alive = server is None or server.alive()
    finally:
        if server is not None:
            server.stop()

    levelled, why = level_verdict([s for s in samples if not s.get("after_load")], elapsed)
    slow = [s for s in samples if s.get("scrape_s") is None or s["scrape_s"] >= SCRAPE_LIMIT_S or "error" in s]
    caps = "" if args.attach or args.server_defaults else " with " + ", ".join(
        f"{k}={os.environ.get(k)}" for k in BENCH_CAPS)
    print(f"\nhostile clients, {args.minutes:g} min, one node{caps}; workers: {json.dumps(workers)}")
    print(f"{'t (s)':>7} {'RSS (MiB)':>10} {'scrape (ms)':>12} {'open':>6} {'accepted':>9} {'sessions':>9} "
          f"{'cached':>7} {'partitions':>11} {'groups':>7} {'parked':>7}")
    for s in samples:
        print(f"{s['t']:>7} {s['rss_mib'] or 0:>10.1f} {s['scrape_s'] * 1000:>12.1f} {_n(s.get('connections_open')):>6} "
              f"{_n(s.get('connections_total')):>9} {_n(s.get('fetch_sessions')):>9} "
              f"{_n(s.get('partitions_cached')):>7} {_n(s.get('partitions')):>11} {_n(s.get('groups')):>7} "
              f"{_n(s.get('parked')):>7}" + ("  (after the load)" if s.get("after_load") else ""))
    print(f"refused: {samples[-1].get('refused')}; parked cancelled: {samples[-1].get('parked_cancelled')}")
    ok = levelled and not slow and alive
    print(f"RSS levels off: {'yes' if levelled else 'NO'} ({why}); every scrape < {SCRAPE_LIMIT_S:g} s: "
          f"{'yes' if not slow else 'NO'} (max {max(s['scrape_s'] for s in samples) * 1000:.0f} ms); "
          f"server alive: {'yes' if alive else 'NO'} -> {'PASS' if ok else 'FAIL'}")
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "out" / \
        f"hostile-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"minutes": args.minutes, "connections": args.connections, "workers": workers,
                               "caps": caps.removeprefix(" with "),
                               "samples": samples, "levelled": levelled, "level_detail": why,
                               "slow_scrapes": len(slow), "alive": alive, "pass": ok,
                               "after_s": round(after - start, 1)}, indent=1))
    print(f"results: {out}")
    return 0 if ok else 1


def _n(v) -> str:
    return "-" if v is None else f"{v:.0f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    sys.exit(main())
