"""(f) Raft replication round: what one round of follower replication costs with 10,000
partitions when 10 changed, as a fraction of a full 10,000-partition round; and the
deterministic simulator's speed.

In-process, no server, no sockets: the real sans-IO core (``kraftd.quorum.node.Node``) on
memory storage (``tests/sim/stores.py``), two nodes, one topic of 10,000 partitions with voters
(1, 2). Node 1 gets a short election timeout so it leads every partition; node 2 follows them
all through one Fetch stream in one KIP-227 session (quorum/raft/fetcher.py).

A **round** = (untimed: a Produce of one 100-byte record to each of 10 random partitions on the
leader, and the leader's flush) then, timed:

* ``request``: the follower builds its next Fetch (``FetchStream.build_request``: an
  incremental request names the partitions whose position moved, a full one names all);
* ``leader``: the leader handles it (``Node.handle``: session, reads, response);
* ``apply``: the follower applies the response (``FetchStream.on_response``) and makes the
  appended records durable (``logs_to_flush`` / ``on_flushed``, memory logs).

*incremental* rounds use the follower's established session; *full* rounds send the same
follower's request sessionless (SessionId 0, SessionEpoch -1, all 10,000 partitions), as
replication without KIP-227 would every time. Rounds run in blocks (full and incremental
interleaved, the order alternating per block); each part is timed with ``perf_counter_ns`` and
``process_time_ns``; medians per kind are reported, and the verdict is on CPU (process time) of
leader + apply (the brief's round) — request building is reported alongside.

Target: incremental round <= 5% of a full round.

Simulator: ``tests.sim.run.run_seed`` over a range of seeds (faults, invariants after every
event included): events/s and seeds/s.

Run: ``.venv/bin/python -m bench.raft_round [--quick]`` or as part of ``python -m bench.run
--benches raft_round``.
"""
from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

if __package__ in (None, ""):  # `python bench/raft_round.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "bench"

NAME = "raft_round"
TITLE = ("(f) Raft replication round: 10,000 partitions, 10 changed per round, incremental vs "
         "full (in-process) + simulator speed")
PARTITIONS = 10_000
CHANGED = 10
VALUE_SIZE = 100
TARGET = 0.05
TOPIC = "bench-raft"
TOPIC_ID = uuid.UUID(int=0x5AF7_0001)
CLUSTER_ID = "bench-raft-cluster-0000"
PRODUCE_VERSION = 9


# --------------------------------------------------------------------------------------------
# the two-node cluster


def _node(node_id: int, election_timeout_ms: int, partitions: int):
    from kraftd.quorum.node import Node
    from kraftd.quorum.node_wiring import NodeRuntime
    from kraftd.quorum.node_config import NodeConfig
    from kraftd.quorum.raft.config import RaftConfig
    from tests.sim.stores import Disk

    disk = Disk(CLUSTER_ID)
    ids = iter(range(node_id * 1_000_000 + 1, 1 << 31))
    raft = RaftConfig(election_timeout_ms=election_timeout_ms, fetch_timeout_ms=10**9,
                      request_timeout_ms=10**9, fetch_max_wait_ms=0)
    node = Node(NodeConfig(node_id=node_id, fsync_policy="acks_all", retention_check_interval_ms=10**12),
                disk.storage(),
                NodeRuntime(rng=random.Random(node_id), new_session_id=lambda: next(ids), raft_config=raft,
                            cluster_id=CLUSTER_ID))
    node.start(0)
    node.create_replicated_topic(TOPIC, TOPIC_ID, [(1, 2)] * partitions, {}, 0)
    return node


class Cluster:
    """Node 1 leads everything; node 2 follows through one Fetch stream. Setup is driven by a
    small FIFO pump; the measured rounds call the stream and the leader directly."""

    def __init__(self, partitions: int) -> None:
        from kraftd.protocol import messages as m

        self.m = m
        self.partitions = partitions
        self.nodes = {1: _node(1, 100, partitions), 2: _node(2, 10**8, partitions)}
        self.now = 201
        self.queue: list = []
        self.parked: dict = {1: {}, 2: {}}
        self.correlation = 0
        self._poll(1)                       # node 1's elections: pre-vote, vote, BeginQuorumEpoch
        self._run()
        leader, follower = self.nodes[1], self.nodes[2]
        assert all(g.is_leader for g in leader.replication.groups.values())
        assert all(g.leader_id == 1 for g in follower.replication.groups.values())
        self.stream = follower.replication.streams.by_leader[1]
        for _ in range(4):                  # the full fetch, then incremental ones until idle
            self._poll(2)
            self._run()
        assert self.stream.session_id != 0 and self.stream.session_epoch > 0 and not self.stream.in_flight
        self.header = m.RequestHeader(request_api_key=1, request_api_version=17, correlation_id=0,
                                      client_id="node-2")

    # -- setup pump ------------------------------------------------------------------------
    def _settle(self, node_id: int) -> None:
        node = self.nodes[node_id]
        while True:
            out = node.take_outbox(self.now)
            for send in out.sends:
                self.queue.append((node_id, send.destination, True, send.api_key, send.api_version,
                                   send.correlation_id, send.request))
            for c in out.completions:
                src, key, ver, corr = self.parked[node_id].pop(c.token)
                self.queue.append((node_id, src, False, key, ver, corr, c.response))
            if out.persist:
                node.persist_election_states(out.persist)
                continue
            for key, log in node.logs_to_flush():
                node.on_flushed(key, log.flush(), self.now)
            if not out.sends and not out.completions:
                return

    def _poll(self, node_id: int) -> None:
        for c in self.nodes[node_id].poll(self.now):
            src, key, ver, corr = self.parked[node_id].pop(c.token)
            self.queue.append((node_id, src, False, key, ver, corr, c.response))
        self._settle(node_id)

    def _run(self) -> None:
        from kraftd.quorum.outcomes import Park, Respond
        from kraftd.quorum.peer import Peer

        while self.queue:
            src, dst, is_request, key, ver, corr, body = self.queue.pop(0)
            node = self.nodes[dst]
            if is_request:
                header = self.m.RequestHeader(request_api_key=key, request_api_version=ver, correlation_id=corr,
                                              client_id=f"node-{src}")
                outcome = node.handle(header, body, self.now, Peer(f"node-{src}:1", src))
                if isinstance(outcome, Respond):
                    self.queue.append((dst, src, False, key, ver, corr, outcome.response))
                elif isinstance(outcome, Park):
                    self.parked[dst][outcome.token] = (src, key, ver, corr)
            else:
                node.on_response(src, corr, body, self.now)
            self._settle(dst)

    # -- rounds ------------------------------------------------------------------------------
    def produce(self, rng: random.Random) -> list[int]:
        """acks=1 (untimed): one record to each of CHANGED random partitions, then the leader's flush."""
        from kraftd.protocol.records import build_batch
        from kraftd.quorum.peer import Peer
        m = self.m
        changed = sorted(rng.sample(range(self.partitions), CHANGED))
        value = b"v" * VALUE_SIZE
        request = m.ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[m.ProduceRequest.TopicProduceData(
            name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(
                index=i, records=memoryview(build_batch([(None, value, [], self.now)]))) for i in changed])])
        self.correlation += 1
        header = m.RequestHeader(request_api_key=0, request_api_version=PRODUCE_VERSION,
                                 correlation_id=self.correlation, client_id="producer")
        leader = self.nodes[1]
        outcome = leader.handle(header, request, self.now, Peer("producer:1"))
        assert outcome.response.responses[0].partition_responses[0].error_code == 0
        for key, log in leader.logs_to_flush():
            leader.on_flushed(key, log.flush(), self.now)
        leader.poll(self.now)
        return changed

    def round(self, kind: str) -> dict:
        """One timed round; `kind` "inc" (the session) or "full" (sessionless, every partition)."""
        from kraftd.quorum.raft.fetcher import FetchStream

        follower, leader = self.nodes[2], self.nodes[1]
        rep = follower.replication
        stream = self.stream
        if kind == "full":
            stream = FetchStream(1)
            stream.groups = self.stream.groups
        clock, cpu = time.perf_counter_ns, time.process_time_ns
        self.correlation += 1
        self.header.correlation_id = self.correlation
        w0, c0 = clock(), cpu()
        request = stream.build_request(2, rep.config, rep._topic_ids)
        if kind == "full":
            request.session_id, request.session_epoch = 0, -1
        w1, c1 = clock(), cpu()
        response = leader.handle(self.header, request, self.now, "node-2:1").response
        w2, c2 = clock(), cpu()
        stream.on_response(response, rep._topic_names, self.now, rep.config.retry_backoff_ms, rep)
        for key, log in follower.logs_to_flush():
            follower.on_flushed(key, log.flush(), self.now)
        w3, c3 = clock(), cpu()
        assert response.error_code == 0 and not stream.in_flight
        if kind == "full":
            assert response.session_id == 0
        asked = sum(len(t.partitions) for t in request.topics)
        answered = sum(len(t.partitions) for t in response.responses)
        with_records = sum(1 for t in response.responses for p in t.partitions if len(p.records or b""))
        return dict(request_wall=w1 - w0, leader_wall=w2 - w1, apply_wall=w3 - w2,
                    request_cpu=c1 - c0, leader_cpu=c2 - c1, apply_cpu=c3 - c2,
                    asked=asked, answered=answered, with_records=with_records)


def measure_rounds(partitions: int, blocks: int, full_n: int, inc_n: int, log=print, seed: int = 1) -> dict:
    t0 = time.perf_counter()
    cluster = Cluster(partitions)
    setup_s = time.perf_counter() - t0
    log(f"  raft round: 2 nodes x {partitions:,} partitions set up in {setup_s:.1f} s "
        f"(elected, one session {cluster.stream.session_id})")
    rng = random.Random(seed)
    rounds: dict = {"inc": [], "full": []}
    gc.collect()
    for block in range(blocks):
        order = ["full"] * full_n + ["inc"] * inc_n
        plan: list[str] = []
        # Interleave: spread the full rounds among the incremental ones; alternate who goes first.
        step = max(1, inc_n // max(full_n, 1))
        incs = iter(["inc"] * inc_n)
        for _ in range(full_n):
            plan.append("full")
            plan.extend(x for _, x in zip(range(step), incs))
        plan.extend(incs)
        if block % 2:
            plan.reverse()
        assert sorted(plan) == sorted(order)
        # A round after a full one names the partitions the full round moved: measured as well
        # (that is what steady state looks like), but the first round of a block is a warm-up.
        for i, kind in enumerate(plan):
            cluster.produce(rng)
            gc.collect()
            r = cluster.round(kind)
            if i > 0:
                rounds[kind].append(r)
        inc, full = rounds["inc"], rounds["full"]
        log(f"  block {block + 1}/{blocks}: full round {_med(full, 'leader_cpu', 'apply_cpu') / 1e6:.2f} ms CPU, "
            f"incremental {_med(inc, 'leader_cpu', 'apply_cpu') / 1e6:.3f} ms")
    return dict(partitions=partitions, setup_s=setup_s, blocks=blocks, full_n=full_n, inc_n=inc_n,
                summary=_summary(rounds), counts={k: len(v) for k, v in rounds.items()})


def _med(rounds: list, *keys: str) -> float:
    if not rounds:
        return float("nan")
    return statistics.median(sum(r[k] for k in keys) for r in rounds)


def _summary(rounds: dict) -> dict:
    out = {}
    for kind, rs in rounds.items():
        s = {}
        for part in ("request", "leader", "apply"):
            for unit in ("cpu", "wall"):
                s[f"{part}_{unit}_ms"] = _med(rs, f"{part}_{unit}") / 1e6
        for unit in ("cpu", "wall"):
            s[f"round_{unit}_ms"] = _med(rs, f"leader_{unit}", f"apply_{unit}") / 1e6
            s[f"round_with_request_{unit}_ms"] = _med(rs, f"request_{unit}", f"leader_{unit}", f"apply_{unit}") / 1e6
        for k in ("asked", "answered", "with_records"):
            s[k] = statistics.median(r[k] for r in rs) if rs else None
        out[kind] = s
    inc, full = out["inc"], out["full"]
    out["ratio"] = {k: inc[k] / full[k] if full.get(k) else None
                    for k in ("round_cpu_ms", "round_wall_ms", "round_with_request_cpu_ms",
                              "round_with_request_wall_ms", "request_cpu_ms", "leader_cpu_ms", "apply_cpu_ms")}
    return out


# --------------------------------------------------------------------------------------------
# the simulator


def measure_sim(seeds: int, start: int = 0, log=print) -> dict:
    from tests.sim.run import run_seed

    wall0, cpu0 = time.perf_counter(), time.process_time()
    events = failures = 0
    per_seed = []
    for seed in range(start, start + seeds):
        t = time.perf_counter()
        result = run_seed(seed)
        per_seed.append(time.perf_counter() - t)
        events += result.events
        failures += 0 if result.ok else 1
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    log(f"  simulator: {seeds} seeds, {events:,} events in {wall:.2f} s ({failures} failed)")
    return dict(seeds=seeds, start=start, events=events, failures=failures, wall_s=wall, cpu_s=cpu,
                events_per_s=events / wall, seeds_per_s=seeds / wall, events_per_cpu_s=events / cpu,
                seed_s_median=statistics.median(per_seed), seed_s_max=max(per_seed))


# --------------------------------------------------------------------------------------------
# bench.run hooks


def _options(ctx) -> dict:
    quick = getattr(ctx, "quick", False)
    return dict(blocks=2 if quick else 5, full_n=3 if quick else 5, inc_n=30 if quick else 50,
                seeds=5 if quick else 20)


def run(ctx) -> dict:
    opts = _options(ctx)
    res: dict = dict(name=NAME, target=TARGET, errors={}, options=opts)
    try:
        res["rounds"] = measure_rounds(PARTITIONS, opts["blocks"], opts["full_n"], opts["inc_n"], log=ctx.log)
    except Exception as e:  # noqa: BLE001
        res["errors"]["rounds"] = f"{type(e).__name__}: {e}"
        ctx.log(f"  raft rounds failed: {res['errors']['rounds']}")
    try:
        res["sim"] = measure_sim(opts["seeds"], log=ctx.log)
    except Exception as e:  # noqa: BLE001
        res["errors"]["sim"] = f"{type(e).__name__}: {e}"
        ctx.log(f"  simulator failed: {res['errors']['sim']}")
    ratio = res.get("rounds", {}).get("summary", {}).get("ratio", {}).get("round_cpu_ms")
    res["ratio"] = ratio
    res["verdict"] = "n/a" if ratio is None else ("MET" if ratio <= TARGET else "NOT MET")
    return res


def report(res: dict) -> str:
    from bench.common import fmt, table

    out = [TITLE]
    r = res.get("rounds")
    if r:
        s = r["summary"]
        inc, full, ratio = s["inc"], s["full"], s["ratio"]

        def row(label, key, digits=3):
            rk = ratio.get(key)
            return [label, fmt(full[key], digits), fmt(inc[key], digits), "-" if rk is None else f"{rk:.2%}"]

        rows = [
            row("leader handles the Fetch (CPU ms)", "leader_cpu_ms"),
            row("follower applies the answer (CPU ms)", "apply_cpu_ms"),
            row("ROUND = leader + apply (CPU ms)", "round_cpu_ms"),
            row("  same, wall (ms)", "round_wall_ms"),
            row("follower builds the Fetch (CPU ms)", "request_cpu_ms"),
            row("round incl. building (CPU ms)", "round_with_request_cpu_ms"),
            ["partitions named in the request", fmt(full["asked"], 0), fmt(inc["asked"], 0), ""],
            ["partitions in the answer", fmt(full["answered"], 0), fmt(inc["answered"], 0), ""],
            ["  of which with records", fmt(full["with_records"], 0), fmt(inc["with_records"], 0), ""],
        ]
        out.append(table([f"per round, median ({r['partitions']:,} partitions, {CHANGED} changed)",
                          "full", "incremental", "inc/full"], rows))
        out.append(f"  {r['blocks']} blocks x ({r['full_n']} full + {r['inc_n']} incremental rounds), interleaved; "
                   f"measured {r['counts']['full']} full / {r['counts']['inc']} incremental; setup "
                   f"{r['setup_s']:.1f} s")
        rc = ratio.get("round_cpu_ms")
        out.append(f"  target incremental round <= 5% of a full round (CPU, leader + apply): "
                   f"{'-' if rc is None else f'{rc:.2%}'} -> {res.get('verdict')}")
    sim = res.get("sim")
    if sim:
        out.append(f"  simulator (tests.sim.run.run_seed, seeds {sim['start']}..{sim['start'] + sim['seeds'] - 1}): "
                   f"{sim['events_per_s']:,.0f} events/s, {sim['seeds_per_s']:.2f} seeds/s "
                   f"({sim['events']:,} events in {sim['wall_s']:.2f} s; median seed {sim['seed_s_median']:.2f} s, "
                   f"max {sim['seed_s_max']:.2f} s; {sim['failures']} failed)")
    for k, e in res.get("errors", {}).items():
        out.append(f"  {k}: ERROR {e}")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.raft_round", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 blocks x (3 full + 30 incremental), 5 seeds")
    p.add_argument("--blocks", type=int)
    p.add_argument("--full", type=int, help="full rounds per block")
    p.add_argument("--inc", type=int, help="incremental rounds per block")
    p.add_argument("--seeds", type=int, help="simulator seeds")
    p.add_argument("--partitions", type=int, default=PARTITIONS)
    p.add_argument("--skip-sim", action="store_true")
    p.add_argument("--profile", choices=["inc", "full"], help="cProfile 50 rounds of this kind instead")
    args = p.parse_args(argv)

    class _Ctx:
        quick = args.quick

        @staticmethod
        def log(msg: str) -> None:
            print(msg, file=sys.stderr, flush=True)

    if args.profile:
        return _profile(args.profile, args.partitions)
    opts = _options(_Ctx)
    for key, value in (("blocks", args.blocks), ("full_n", args.full), ("inc_n", args.inc), ("seeds", args.seeds)):
        if value is not None:
            opts[key] = value
    res: dict = dict(name=NAME, target=TARGET, errors={}, options=opts)
    res["rounds"] = measure_rounds(args.partitions, opts["blocks"], opts["full_n"], opts["inc_n"], log=_Ctx.log)
    if not args.skip_sim:
        res["sim"] = measure_sim(opts["seeds"], log=_Ctx.log)
    ratio = res["rounds"]["summary"]["ratio"]["round_cpu_ms"]
    res["verdict"] = "MET" if ratio <= TARGET else "NOT MET"
    print(report(res))
    return 0


def _profile(kind: str, partitions: int) -> int:
    import cProfile
    import pstats

    cluster = Cluster(partitions)
    rng = random.Random(1)
    for _ in range(3):
        cluster.produce(rng)
        cluster.round(kind)
    prof = cProfile.Profile()
    for _ in range(50):
        cluster.produce(rng)
        prof.enable()
        cluster.round(kind)
        prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
