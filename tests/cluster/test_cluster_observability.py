"""Acceptance: what an operator sees of a three-node cluster, before and after the metadata
leader crashes. `kraftd quorum describe` (plain and --json; through every node, through the
followers only) names the leader the nodes' /metrics name, its epoch, a high watermark and the
voters' lags, for the metadata quorum and for a data partition. When the metadata leader is
killed (-9): a new leader with a higher epoch within 10 s (describe and /metrics), new leaders with
higher leader epochs for the partitions it led (Metadata and kraftd_leader_epoch), and
kraftd_under_replicated_partitions counting the partitions whose ISR lacks the dead node once
replica_lag_time_max_ms (2 s here) has passed, not before.

One cluster for the module; the tests run in order, the failover ones after the healthy ones.
The last test, on a cluster of its own: an idle cluster keeps full ISRs.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from tests.cluster.support import describe, describe_json, describe_quorum, gauge, metadata, parse_status, \
    replica_progress, samples, wait_cluster_ready
from tests.support.cluster import KraftdCluster
from tests.support.waiting import WaitTimeout, poll_until, wait_until

pytestmark = pytest.mark.clients

LAG_MS = 2000  # replica_lag_time_max_ms for this module's cluster
TOPIC = "observed"
PARTITIONS = 6
RECORDS_PER_PARTITION = 50
METADATA = "__cluster_metadata"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KraftdCluster(tmp_path_factory.mktemp("observability"), nodes=3,
                       env={"KRAFTD_REPLICA_LAG_TIME_MAX_MS": str(LAG_MS)}) as cluster:
        wait_cluster_ready(cluster)
        _create_and_fill(cluster)
        yield cluster


def _create_and_fill(cluster: KraftdCluster) -> float:
    """TOPIC, 6 partitions on all three nodes, led by each partition's first replica (two per
    node) if they get there within 10 s, then RECORDS_PER_PARTITION records each (acks=all).
    Returns when the last record was acknowledged (time.monotonic())."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaTimeoutError

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap().split(","))
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], timeout_ms=30_000)
    finally:
        admin.close()
    # Leaderships move to each partition's first replica, so that the metadata leader leads data
    # partitions when it is killed. test_three_node_clients asserts the moves; here a partition
    # that stays put only leaves the failover tests less to check.
    parts: dict = {}

    def settled():
        error, found = metadata(cluster.node(1), [TOPIC]).topics[TOPIC]  # error 3 until node 1 has it
        parts.update(found)
        return error == 0 and len(parts) == PARTITIONS and all(p.leader == p.replicas[0] for p in parts.values())
    if not poll_until(settled, 10, interval=0.2):
        print(f"{TOPIC}'s leaders not all on their first replicas after 10 s: "
              + "; ".join(f"{i}: leader {p.leader}@{p.leader_epoch} replicas {p.replicas}"
                          for i, p in sorted(parts.items())))

    # Not idempotent: producer ids are test_three_node_clients' concern; here only the records count.
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap().split(","), acks="all", linger_ms=5,
                             enable_idempotence=False)
    try:
        futures = [(p, producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i, partition=p))
                   for p in range(PARTITIONS) for i in range(RECORDS_PER_PARTITION)]
        try:
            producer.flush(timeout=30)
        except KafkaTimeoutError:
            pending = Counter(p for p, f in futures if not f.is_done)
            raise AssertionError(f"{sum(pending.values())} of {len(futures)} acks=all records unacknowledged after "
                                 f"30 s, per partition {dict(pending)}; " + _partition_report(cluster)) from None
        produced_at = time.monotonic()
        failed = [(p, f.exception) for p, f in futures if f.failed()]
        assert not failed, f"{len(failed)} records failed: {failed[:3]}; " + _partition_report(cluster)
    finally:
        producer.close(timeout=5)
    return produced_at


def _partition_report(cluster: KraftdCluster) -> str:
    """Leaders and ISRs as each node's Metadata has them, DescribeQuorum per partition, log tails."""
    lines = []
    for i in cluster.running():
        try:
            parts = metadata(cluster.node(i), [TOPIC], timeout=2).topics.get(TOPIC, (None, {}))[1]
            lines.append(f"node {i}'s Metadata: " + "; ".join(f"{p}: {v.leader}@{v.leader_epoch} ISR {v.isr}"
                                                              for p, v in sorted(parts.items())))
        except OSError as e:
            lines.append(f"node {i}: {e!r}")
    bootstrap = ",".join(cluster.node(i) for i in cluster.running())
    for p in range(PARTITIONS):
        out = describe("--bootstrap-server", bootstrap, "--partition", f"{TOPIC}:{p}", "--replication",
                       "--timeout", "2")
        lines.append(f"describe {TOPIC}:{p}:\n" + (out.stdout if out.returncode == 0 else out.stderr))
    return "\n".join(lines) + "\n" + "\n".join(cluster.logs(i, tail=25) for i in cluster.ids)


# -- reading the cluster ----------------------------------------------------------------------

def metadata_leader(cluster: KraftdCluster, nodes, timeout: float = 0) -> tuple[int, int]:
    """(leader id, epoch) that every node in `nodes` reports on /metrics, once they agree (within
    `timeout`: a node may be between two states when asked)."""
    seen: dict[int, tuple[int, int]] = {}

    def agreed():
        seen.update({i: (int(gauge(cluster, i, "kraftd_metadata_leader_id")),
                         int(gauge(cluster, i, "kraftd_metadata_epoch"))) for i in nodes})
        return len(set(seen.values())) == 1 and next(iter(seen.values()))[0] >= 0
    assert poll_until(agreed, timeout, interval=0.1), \
        f"nodes disagree on the metadata leader (id, epoch), or know none: {seen}"
    return next(iter(seen.values()))


def leaders_of(cluster: KraftdCluster, via: int) -> dict[int, tuple[int, int]]:
    """{partition: (leader, leader epoch)} of TOPIC, from node `via`'s Metadata."""
    return {i: (p.leader, p.leader_epoch) for i, p in metadata(cluster.node(via), [TOPIC]).partitions(TOPIC).items()}


def _out_of_sync(cluster: KraftdCluster) -> list[str]:
    """Under-replicated partitions on any node's /metrics, ISRs short of a replica in any node's Metadata."""
    problems = [f"node {i}: kraftd_under_replicated_partitions {under:g}" for i in cluster.ids
                if (under := gauge(cluster, i, "kraftd_under_replicated_partitions"))]
    for i in cluster.ids:
        isr = {p: part.isr for p, part in metadata(cluster.node(i), [TOPIC]).partitions(TOPIC).items()}
        problems += [f"node {i}'s Metadata: {TOPIC}:{p} ISR {s}" for p, s in isr.items() if sorted(s) != [1, 2, 3]]
    return problems


def check_description(d: dict, *, topic: str, partition: int, leader: int, epoch: int) -> None:
    """A --json description: the expected leader and epoch, voters 1..3 with lags that are the
    leader's log end minus theirs, a high watermark within the leader's log."""
    assert (d["topic"], d["partition"], d["leaderId"], d["leaderEpoch"]) == (topic, partition, leader, epoch), d
    assert [v["replicaId"] for v in d["voters"]] == [1, 2, 3] and d["observers"] == [], d
    voters = {v["replicaId"]: v for v in d["voters"]}
    leader_end = voters[leader]["logEndOffset"]
    assert 1 <= d["highWatermark"] <= leader_end, d
    for v in d["voters"]:
        assert v["logEndOffset"] <= leader_end, d
        assert v["lag"] == leader_end - max(v["logEndOffset"], 0), f"voter {v['replicaId']}: {d}"
    assert voters[leader]["lag"] == 0


def followers_answer(cluster: KraftdCluster, followers, partition_args, leader: int, epoch: int) -> None:
    """Describe through each follower alone, then through the followers together: the command
    finds the leader through the follower's Metadata and prints the leader and its epoch."""
    for bootstrap in [*(cluster.node(i) for i in followers), ",".join(cluster.node(i) for i in followers)]:
        out = describe("--bootstrap-server", bootstrap, *partition_args)
        assert out.returncode == 0, f"through {bootstrap}: {out.stderr}"
        fields = parse_status(out.stdout)
        assert (fields["LeaderId"], fields["LeaderEpoch"], fields["CurrentVoters"]) == \
            (str(leader), str(epoch), "[1,2,3]"), f"through {bootstrap}: {fields}"


# -- a healthy cluster ------------------------------------------------------------------------

def test_describe_the_metadata_quorum_through_every_node(cluster):
    leader, epoch = metadata_leader(cluster, cluster.ids, timeout=5)
    assert leader in cluster.ids and epoch >= 1
    followers = [i for i in cluster.ids if i != leader]
    # The leader alone, and every node in an order that puts the followers first.
    for bootstrap in (cluster.node(leader), ",".join(cluster.node(i) for i in [*followers, leader])):
        end_before = samples(cluster, leader)[("kraftd_log_end_offset", (("partition", "0"), ("topic", METADATA)))]
        d = describe_json(bootstrap)
        end_after = samples(cluster, leader)[("kraftd_log_end_offset", (("partition", "0"), ("topic", METADATA)))]
        check_description(d, topic=METADATA, partition=0, leader=leader, epoch=epoch)
        leader_end = next(v["logEndOffset"] for v in d["voters"] if v["replicaId"] == leader)
        assert end_before <= leader_end <= end_after, (end_before, d, end_after)
        assert d["clusterId"] == metadata(cluster.node(leader)).cluster_id

        plain = describe("--bootstrap-server", bootstrap)
        assert plain.returncode == 0, plain.stderr
        fields = parse_status(plain.stdout)
        assert (fields["LeaderId"], fields["LeaderEpoch"]) == (str(leader), str(epoch)), fields
        assert int(fields["HighWatermark"]) >= 1 and fields["CurrentVoters"] == "[1,2,3]", fields
        assert fields["CurrentObservers"] == "[]" and fields["ClusterId"] == d["clusterId"], fields
        assert int(fields["MaxFollowerLag"]) >= 0, fields
    for i in cluster.ids:
        assert gauge(cluster, i, "kraftd_leader_epoch", topic=METADATA, partition=0) == epoch, f"node {i}"
    followers_answer(cluster, followers, (), leader, epoch)


def test_describe_quorum_v2_names_each_voters_directory_id_and_listener(cluster):
    """Issue 25 item 1: each data dir's meta.properties holds its own directory id; the metadata
    leader's DescribeQuorum v2 reports it for every voter (from their fetches), and Nodes lists
    each voter's listener."""
    from pathlib import Path

    from kraftd.storage.meta_properties import read_meta_properties

    dirs = {i: read_meta_properties(Path(cluster.process(i).data_dir)).directory_id for i in cluster.ids}
    assert len(set(dirs.values())) == len(cluster.ids)
    leader, _ = metadata_leader(cluster, cluster.ids, timeout=5)

    def described():
        out = describe_quorum(cluster.node(leader), METADATA, 0)
        p = out.topics[0].partitions[0]
        return out if {v.replica_id: v.replica_directory_id for v in p.current_voters} == dirs else None

    out = wait_until(described, 10, "every voter's directory id in DescribeQuorum")
    listeners = {n.node_id: [f"{x.host}:{x.port}" for x in n.listeners] for n in out.nodes}
    assert listeners == {i: [cluster.node(i)] for i in cluster.ids}


def test_describe_a_data_partition(cluster):
    views: dict[int, tuple] = {}

    def agreed():
        """Every node's Metadata and kraftd_leader_epoch agree on partition 0's leader and epoch."""
        views.update({i: (*leaders_of(cluster, i)[0],
                          gauge(cluster, i, "kraftd_leader_epoch", topic=TOPIC, partition=0)) for i in cluster.ids})
        return len(set(views.values())) == 1 and views[1][1] == views[1][2]
    assert poll_until(agreed, 5, interval=0.2), f"{TOPIC}:0 (leader, epoch, kraftd_leader_epoch) per node: {views}"
    leader, epoch, _ = views[1]
    args = ("--partition", f"{TOPIC}:0")
    # The records were acknowledged with acks=all and nothing is produced now: the followers
    # reach the leader's log end, and the high watermark covers every record.
    d: dict = {}

    def caught_up():
        d.update(describe_json(cluster.bootstrap(), *args))
        return all(v["lag"] == 0 for v in d["voters"])
    if not poll_until(caught_up, 10, interval=0.2):
        raise WaitTimeout(f"followers of {TOPIC}:0 not caught up: {json.dumps(d)}")
    check_description(d, topic=TOPIC, partition=0, leader=leader, epoch=epoch)
    assert d["highWatermark"] >= 1 + RECORDS_PER_PARTITION, d  # a LeaderChange control record, then data
    assert gauge(cluster, leader, "kraftd_high_watermark", topic=TOPIC, partition=0) == d["highWatermark"]
    assert gauge(cluster, leader, "kraftd_log_end_offset", topic=TOPIC, partition=0) == \
        next(v["logEndOffset"] for v in d["voters"] if v["replicaId"] == leader)

    plain = describe("--bootstrap-server", cluster.bootstrap(), *args)
    assert plain.returncode == 0, plain.stderr
    fields = parse_status(plain.stdout)
    assert (fields["LeaderId"], fields["LeaderEpoch"], fields["HighWatermark"]) == \
        (str(leader), str(epoch), str(d["highWatermark"])), fields
    assert fields["CurrentVoters"] == "[1,2,3]" and fields["MaxFollowerLag"] == "0", fields
    followers_answer(cluster, [i for i in cluster.ids if i != leader], args, leader, epoch)


# -- the metadata leader crashes --------------------------------------------------------------

class Trickle:
    """One record to every partition every 100 ms (raw Produce, acks=1, to the leader Metadata
    names), so that followers keep fetching data and an ISR may shrink only because a replica
    died, never because its partition was idle. Raw requests: no client retry backoff can leave a
    partition idle for longer than the server makes it."""

    def __init__(self, cluster: KraftdCluster) -> None:
        self.cluster = cluster
        self.stopping = threading.Event()
        self.acked: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}  # monotonic ack times
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from kraftd.client import WireClient

        clients: dict[int, WireClient] = {}
        leaders: dict[int, int] = {}
        n = 0
        while not self.stopping.wait(0.1):
            if len(leaders) < PARTITIONS:
                leaders = self._leaders()
            for p, leader in list(leaders.items()):
                try:
                    client = clients.get(leader) or clients.setdefault(
                        leader, WireClient(self.cluster.node(leader), client_id="trickle", timeout=1))
                    if self._produce(client, p, n):
                        self.acked[p].append(time.monotonic())
                    else:
                        del leaders[p]  # not the leader (any more): ask Metadata again
                except OSError:
                    clients.pop(leader, None)
                    del leaders[p]
            n += 1
        for client in clients.values():
            client.close()

    def _leaders(self) -> dict[int, int]:
        for i in self.cluster.running():
            try:
                return {p: v.leader for p, v in metadata(self.cluster.node(i), [TOPIC], timeout=1)
                        .partitions(TOPIC).items() if v.leader in self.cluster.running()}
            except (OSError, AssertionError):
                continue
        return {}

    @staticmethod
    def _produce(client, partition: int, n: int) -> bool:
        from kraftd.protocol import api
        from kraftd.protocol import messages as m
        from kraftd.protocol.records import build_batch

        batch = build_batch([(b"trickle", b"%d" % n, [], int(time.time() * 1000))])
        response = client.request(api.PRODUCE, 9, m.ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[m.ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[m.ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
        return response.responses[0].partition_responses[0].error_code == 0

    def gaps(self, since: float) -> dict[int, float]:
        """{partition: the longest time without an ack since `since` (monotonic), up to now}."""
        now = time.monotonic()
        out = {}
        for p, times in self.acked.items():
            points = [since, *(t for t in list(times) if t > since), now]
            out[p] = round(max(b - a for a, b in zip(points, points[1:])), 2)
        return out

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(5)


@dataclass
class Sample:
    at: float                      # seconds after the kill
    node: int
    under_replicated: float | None
    metadata_leader: float | None
    metadata_epoch: float | None


@dataclass
class Failover:
    dead: int
    epoch_before: int
    led_before: dict[int, int]     # partition the dead node led -> its leader epoch (Metadata)
    killed_at: float
    survivors: list[int]
    killed_wall_ms: int
    samples: list[Sample] = field(default_factory=list)
    isr_seen: list[tuple[float, int, dict[int, tuple[int, ...]]]] = field(default_factory=list)  # (at, via, ISRs)
    # (seconds after the kill, partition, {voter: (ms since last fetch, ms since last caught up)})
    progress_seen: list[tuple[float, int, dict]] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    trickle: Trickle | None = None

    def watch(self, cluster: KraftdCluster, seconds: float) -> None:
        """For `seconds` after the kill: the survivors' gauges every ~100 ms, and their Metadata
        ISRs as often as they answer (an ISR may shrink and grow back within a fraction of a second)."""
        def gauges():
            while time.monotonic() - self.killed_at < seconds:
                for i in self.survivors:
                    try:
                        s = samples(cluster, i)
                    except OSError:
                        continue
                    self.samples.append(Sample(time.monotonic() - self.killed_at, i,
                                               s.get(("kraftd_under_replicated_partitions", ())),
                                               s.get(("kraftd_metadata_leader_id", ())),
                                               s.get(("kraftd_metadata_epoch", ()))))
                time.sleep(0.1)

        def isrs():
            while time.monotonic() - self.killed_at < seconds:
                for i in self.survivors:
                    try:
                        parts = metadata(cluster.node(i), [TOPIC], timeout=2).partitions(TOPIC)
                    except (OSError, AssertionError):
                        continue
                    self.isr_seen.append((time.monotonic() - self.killed_at, i, {p: v.isr for p, v in parts.items()}))
                    if i == self.survivors[0]:
                        self._progress(cluster, parts)
                time.sleep(0.01)

        self.threads = [threading.Thread(target=run, daemon=True) for run in (gauges, isrs)]
        for t in self.threads:
            t.start()

    def join(self) -> None:
        for t in self.threads:
            t.join()

    def _progress(self, cluster: KraftdCluster, parts) -> None:
        """Each partition's followers as its leader sees them: (seconds after the kill, partition,
        {voter: (ms since its last fetch, ms since it was last caught up)})."""
        for p, v in parts.items():
            if v.leader not in self.survivors:
                continue
            try:
                progress = replica_progress(cluster.node(v.leader), TOPIC, p)
            except OSError:
                continue
            now_ms = int(time.time() * 1000)
            if progress is not None:
                self.progress_seen.append((time.monotonic() - self.killed_at, p, {
                    r: tuple(now_ms - t if t >= 0 else -1 for t in (fetched, caught_up))
                    for r, (_, fetched, caught_up) in progress.items()}))

    def progress_near(self, at: float, partition: int) -> tuple | None:
        """The leader's view of `partition`'s followers sampled closest to `at`."""
        near = [(abs(t - at), t, seen) for t, p, seen in self.progress_seen if p == partition]
        return min(near, key=lambda x: x[0])[1:] if near else None


@pytest.fixture(scope="module")
def failover(cluster):
    trickle = Trickle(cluster)
    try:
        # Every follower has fetched data recently (an idle partition may have shrunk its ISR), and
        # every node's Metadata says so.
        problems: list[str] = []

        def in_sync():
            problems[:] = _out_of_sync(cluster)
            return not problems
        if not poll_until(in_sync, 15, interval=0.2):
            raise WaitTimeout("no full ISR everywhere 15 s after records began to trickle in:\n  "
                              + "\n  ".join(problems))
        dead, epoch = metadata_leader(cluster, cluster.ids, timeout=5)

        def led_by_dead():
            """(the partitions it leads and their epochs,) once its Metadata and gauges agree."""
            led = {p: e for p, (leader, e) in leaders_of(cluster, dead).items() if leader == dead}
            if all(gauge(cluster, dead, "kraftd_leader_epoch", topic=TOPIC, partition=p) == e for p, e in led.items()):
                return (led,)
        (led,) = wait_until(led_by_dead, 5, f"node {dead}'s Metadata and kraftd_leader_epoch to agree", interval=0.1)
        cluster.kill(dead)
        f = Failover(dead, epoch, led, time.monotonic(), [i for i in cluster.ids if i != dead],
                     int(time.time() * 1000), trickle=trickle)
        f.watch(cluster, LAG_MS / 1000 + 6)
        yield f
    finally:
        trickle.close()


def test_a_new_metadata_leader_with_a_higher_epoch_within_10s(cluster, failover):
    f = failover
    survivors = ",".join(cluster.node(i) for i in f.survivors)
    seen: list[str] = []  # what describe and /metrics said, for the failure message

    def agreed():
        """describe through the survivors and both survivors' /metrics name the same new leader."""
        out = describe("--bootstrap-server", survivors, "--json", "--timeout", "2")
        if out.returncode != 0:
            seen.append(f"{time.monotonic() - f.killed_at:.2f} s: describe: {out.stderr.strip()}")
            return None
        d = json.loads(out.stdout)
        metrics = {i: (gauge(cluster, i, "kraftd_metadata_leader_id"), gauge(cluster, i, "kraftd_metadata_epoch"))
                   for i in f.survivors}
        seen.append(f"{time.monotonic() - f.killed_at:.2f} s: describe {d['leaderId']}@{d['leaderEpoch']}, "
                    f"/metrics (leader, epoch) {metrics}")
        new = (d["leaderId"], d["leaderEpoch"])
        if new[0] in f.survivors and new[1] > f.epoch_before and set(metrics.values()) == {new}:
            return d
        return None

    d = poll_until(agreed, 10 - (time.monotonic() - f.killed_at), interval=0.2)
    if not d:
        raise WaitTimeout(f"10 s after node {f.dead} (leader at epoch {f.epoch_before}) was killed:\n  "
                          + "\n  ".join(seen[-15:]) + "\n" + "\n".join(cluster.logs(i, tail=20) for i in f.survivors))
    leader, epoch = d["leaderId"], d["leaderEpoch"]
    print(f"metadata leader {f.dead}@{f.epoch_before} killed; describe and /metrics show {leader}@{epoch} "
          f"{time.monotonic() - f.killed_at:.2f} s later")
    check_description(d, topic=METADATA, partition=0, leader=leader, epoch=epoch)
    dead_voter = next(v for v in d["voters"] if v["replicaId"] == f.dead)
    # The new leader never heard from the dead node in its epoch: its log end is unknown, it lags by
    # the whole log, and if a last fetch is named at all, it happened before the kill.
    assert dead_voter["logEndOffset"] == -1 and dead_voter["lag"] > 0, dead_voter
    assert dead_voter["lastFetchTimestamp"] <= f.killed_wall_ms, (dead_voter, f"killed at {f.killed_wall_ms}")
    # A bootstrap list that still names the dead node skips it; every survivor names the new
    # leader as the controller.
    assert describe_json(cluster.bootstrap())["leaderId"] in f.survivors
    controllers: dict[int, int] = {}

    def controllers_agree():
        leader = metadata_leader_or_none(cluster, f.survivors)
        controllers.update({i: metadata(cluster.node(i)).controller_id for i in f.survivors})
        return leader is not None and set(controllers.values()) == {leader[0]}
    assert poll_until(controllers_agree, 5, interval=0.2), \
        f"Metadata controller per survivor {controllers}, " \
        f"metadata leader {metadata_leader_or_none(cluster, f.survivors)}"


def metadata_leader_or_none(cluster: KraftdCluster, nodes) -> tuple[int, int] | None:
    try:
        return metadata_leader(cluster, nodes)
    except AssertionError:
        return None


def test_the_partitions_it_led_get_new_leaders_with_higher_epochs(cluster, failover):
    f = failover
    assert f.led_before, f"node {f.dead} led no data partition when it was killed: nothing to check"
    survivors = ",".join(cluster.node(i) for i in f.survivors)
    views: dict[int, dict] = {}

    def moved():
        """Both survivors' Metadata name the same live leader at a higher epoch for each of them."""
        views.update({via: leaders_of(cluster, via) for via in f.survivors})
        answers = {p: {views[via][p] for via in f.survivors} for p in f.led_before}
        if all(len(a) == 1 and (x := next(iter(a)))[0] in f.survivors and x[1] > f.led_before[p]
               for p, a in answers.items()):
            return {p: next(iter(a)) for p, a in answers.items()}
        return None

    new = poll_until(moved, max(1, 10 - (time.monotonic() - f.killed_at)), interval=0.2)
    if not new:
        raise WaitTimeout(f"10 s after the kill, the partitions node {f.dead} led ({f.led_before}, partition: "
                          f"epoch) have (leader, epoch) per survivor's Metadata {views}")
    print(f"partitions node {f.dead} led (epochs {f.led_before}) now led by (leader, epoch) {new}")
    for p in f.led_before:
        observed: list = []

        def consistent():
            """Metadata, the leader's kraftd_leader_epoch and describe agree (a leadership may still move)."""
            leader, epoch = leaders_of(cluster, f.survivors[0])[p]
            if leader not in f.survivors:
                return False
            gauge_epoch = gauge(cluster, leader, "kraftd_leader_epoch", topic=TOPIC, partition=p)
            out = describe("--bootstrap-server", survivors, "--partition", f"{TOPIC}:{p}", "--json", "--timeout", "2")
            d = json.loads(out.stdout) if out.returncode == 0 else {}
            observed.append((leader, epoch, gauge_epoch,
                             (d.get("leaderId"), d.get("leaderEpoch")) if d else out.stderr))
            return epoch > f.led_before[p] and gauge_epoch == epoch and (d.get("leaderId"), d.get("leaderEpoch")) \
                == (leader, epoch)
        if not poll_until(consistent, 5, interval=0.2):
            raise WaitTimeout(f"{TOPIC}:{p} (epoch {f.led_before[p]} on node {f.dead}): (Metadata leader, epoch, "
                              f"its kraftd_leader_epoch, describe) {observed[-5:]}")


def test_under_replicated_partitions_count_the_dead_replica_only_after_the_lag_time(cluster, failover):
    f = failover
    f.join()
    lag = LAG_MS / 1000
    # A follower that is caught up fetches at least every 500 ms (the long poll), and records
    # trickle in every 100 ms: the dead node was last caught up ~0.6 s before the kill at worst,
    # so nothing may be counted in the first half of the lag time (the margin is for slow hosts).
    early = [s for s in f.samples if s.at < lag / 2 and s.under_replicated]
    timeline = "\n  ".join(f"{s.at:5.2f} s node {s.node}: under_replicated {s.under_replicated}, metadata leader "
                           f"{s.metadata_leader} epoch {s.metadata_epoch}" for s in f.samples)
    assert not early, f"partitions counted under-replicated before replica_lag_time_max_ms ({LAG_MS} ms) " \
                      f"had passed since the kill:\n  {timeline}"
    # In the end every partition (all have a replica on the dead node) is counted once, by its
    # leader, and every survivor's Metadata shows ISR = the survivors.
    state: dict = {}

    def settled():
        state["under"] = {i: gauge(cluster, i, "kraftd_under_replicated_partitions") for i in f.survivors}
        state["isr"] = {via: {p: v.isr for p, v in metadata(cluster.node(via), [TOPIC]).partitions(TOPIC).items()}
                        for via in f.survivors}
        lacking = {p for p, s in state["isr"][f.survivors[0]].items() if f.dead not in s}
        return all(sorted(s) == f.survivors for isr in state["isr"].values() for s in isr.values()) \
            and sum(state["under"].values()) == len(lacking) == PARTITIONS
    if not poll_until(settled, 3, interval=0.2):
        described = {}
        for p in range(PARTITIONS):
            out = describe("--bootstrap-server", ",".join(cluster.node(i) for i in f.survivors),
                           "--partition", f"{TOPIC}:{p}", "--json", "--timeout", "2")
            if out.returncode == 0:
                d = json.loads(out.stdout)
                described[p] = {"leader": d["leaderId"], "epoch": d["leaderEpoch"], "voters": {
                    v["replicaId"]: (v["logEndOffset"], v["lastCaughtUpTimestamp"]) for v in d["voters"]}}
            else:
                described[p] = out.stderr.strip()
        raise AssertionError(
            f"{time.monotonic() - f.killed_at:.1f} s after node {f.dead} was killed "
            f"(replica_lag_time_max_ms {LAG_MS}):\n"
            f"  kraftd_under_replicated_partitions per survivor: {state['under']}\n"
            f"  ISR per partition, per survivor's Metadata: {state['isr']}\n"
            f"  describe per partition (voter: (log end, last caught up ms)): {described}\n"
            f"  now (ms): {int(time.time() * 1000)}\n"
            + "\n".join(cluster.logs(i, tail=15) for i in f.survivors))
    # A live replica never left an ISR on the way (only the dead one may).
    dropped = [(round(at, 2), via, p, s) for at, via, seen in f.isr_seen for p, s in seen.items()
               if not set(f.survivors) <= set(s)]
    if dropped:
        first = {}
        for at, via, p, s in dropped:
            first.setdefault(p, (at, via, s))
        leader_view = {p: f.progress_near(at, p) for p, (at, _, _) in first.items()}
        raise AssertionError(
            f"a surviving replica was dropped from an ISR after node {f.dead} was killed; first sighting per "
            f"partition (seconds after the kill, Metadata from node, ISR): {first}; {len(dropped)} sightings in "
            f"all; partitions node {f.dead} led: {sorted(f.led_before)}. The partition leader's DescribeQuorum "
            f"closest to each first sighting (seconds after the kill, {{voter: (ms since its last fetch, ms since "
            f"it was last caught up)}}): {leader_view}. The longest time each partition went without a produced "
            f"record since the kill: {f.trickle.gaps(f.killed_at)}")


def test_raft_latency_histograms_are_exported_and_counting(cluster, failover):
    """Both histograms exist on every survivor; each survivor took part in an election after the
    kill, and acks=all produces were committed (the records of _create_and_fill)."""
    counts = {}
    for i in failover.survivors:
        s = samples(cluster, i)
        for what in ("election", "commit"):
            name = f"kraftd_raft_{what}_latency_ms"
            assert (f"{name}_count", ()) in s and (f"{name}_sum", ()) in s, f"node {i} exports no {name}"
            counts[i, what] = (s[f"{name}_count", ()], s[f"{name}_sum", ()])
    print("raft latency (count, sum ms) per (node, histogram):", counts)
    assert all(counts[i, "election"][0] > 0 for i in failover.survivors), counts
    assert sum(counts[i, "commit"][0] for i in failover.survivors) > 0, counts


# -- an idle cluster --------------------------------------------------------------------------

@pytest.fixture
def idle_cluster(tmp_path):
    with KraftdCluster(tmp_path, nodes=3, env={"KRAFTD_REPLICA_LAG_TIME_MAX_MS": str(LAG_MS)}) as cluster:
        wait_cluster_ready(cluster)
        produced_at = _create_and_fill(cluster)
        yield cluster, produced_at




def test_an_idle_healthy_cluster_keeps_every_replica_in_sync(idle_cluster):
    """Nothing is produced for longer than replica_lag_time_max_ms: the followers still fetch
    (they are caught up, not lagging), so no ISR shrinks and nothing is under-replicated.
    A cluster of its own, so that this runs last (under -x) and the others do not depend on it."""
    cluster, produced_at = idle_cluster
    problems: list[str] = []

    def in_sync():
        problems[:] = _out_of_sync(cluster)
        return not problems
    if not poll_until(in_sync, 3 * LAG_MS / 1000, interval=0.2):
        raise WaitTimeout(f"not in sync {time.monotonic() - produced_at:.1f} s after the last record was "
                          f"acknowledged (replica_lag_time_max_ms {LAG_MS}):\n  " + "\n  ".join(problems))
    until = produced_at + 2 * LAG_MS / 1000 + 1
    while (now := time.monotonic()) < until:
        if problems := _out_of_sync(cluster):
            raise AssertionError(f"in sync, then {now - produced_at:.1f} s after the last record was acknowledged "
                                 f"(replica_lag_time_max_ms {LAG_MS}):\n  " + "\n  ".join(problems))
        time.sleep(0.2)
