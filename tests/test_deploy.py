"""deploy/: the docker-compose cluster, its Prometheus scrape config and its Grafana dashboard.

No Docker engine runs where the tests do, so the compose file is checked in two ways:
  * statically: three kraftd services whose command lines the real CLI accepts, consistent
    voters/ports/volumes, Prometheus scraping each node's metrics port, Grafana provisioned with
    that Prometheus and the dashboard;
  * natively: the three `kraftd serve` command lines the compose file declares are run as
    processes, with only host names (kraftd-N -> 127.0.0.1), ports (free local ones, mapped the
    same way in every node's --listen/--advertised-listener/--voters) and --data-dir rewritten;
    they must form one cluster and export every metric the dashboard queries.
"""
from __future__ import annotations

import json
import re
import shlex
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from kraftd.cli import build_parser
from kraftd.config.settings import Settings, format_host_port, parse_host_port, parse_voters
from tests.support.kraftd_process import KraftdProcess
from tests.support.prometheus import scrape_samples
from tests.support.waiting import poll_until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
PROMETHEUS_YML = ROOT / "deploy/prometheus/prometheus.yml"
GRAFANA = ROOT / "deploy/grafana"
DASHBOARD = GRAFANA / "dashboards/kraftd.json"

# What the dashboard must show about the cluster (server/metrics.py, from node.cluster_stats()).
CLUSTER_GAUGES = {"kraftd_metadata_leader_id", "kraftd_metadata_epoch", "kraftd_leader_partitions",
                  "kraftd_under_replicated_partitions", "kraftd_offline_partitions", "kraftd_leader_epoch"}
RAFT_HISTOGRAMS = {"kraftd_raft_election_latency_ms", "kraftd_raft_commit_latency_ms"}
METRIC_NAME = re.compile(r"\bkraftd_[A-Za-z0-9_]+")
FORM_TIMEOUT_S = 60.0
METRICS_TIMEOUT_S = 60.0


# -- reading the deploy files ------------------------------------------------------------------
def load_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def kraftd_services(compose: dict) -> dict[str, dict]:
    """The services whose command is `kraftd serve ...`, by name."""
    return {name: svc for name, svc in compose["services"].items()
            if command_argv(svc)[:2] == ["kraftd", "serve"]}


def command_argv(service: dict) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def serve_flags(service: dict):
    """The service's `kraftd serve` arguments as kraftd's own CLI parses them."""
    return build_parser().parse_args(command_argv(service)[1:])


# What `docker compose` would be given in the shell: the cluster secret the file requires.
COMPOSE_SHELL_ENV = {"KRAFTD_CLUSTER_SECRET": "deploy-test-secret"}
_INTERPOLATION = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")


def interpolate(value: str, shell: dict[str, str]) -> str:
    """Compose's ${NAME}, ${NAME:-default} and ${NAME:?error} ($$ is a literal $)."""
    def one(match: re.Match) -> str:
        name, kind, arg = match.groups()
        if shell.get(name):
            return shell[name]
        if kind == "?":
            raise ValueError(f"compose refuses to start: {arg}")
        return arg if kind == "-" else ""
    return _INTERPOLATION.sub(one, value).replace("$$", "$")


def environment(service: dict, shell: dict[str, str] = COMPOSE_SHELL_ENV) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v), shell) for k, v in env.items()}


def published_ports(service: dict) -> dict[int, int]:
    """container port -> host port, from the short "HOST:CONTAINER" syntax."""
    out = {}
    for entry in service.get("ports", []):
        host, container = str(entry).rsplit(":", 2)[-2:]
        out[int(container)] = int(host)
    return out


def mounts(service: dict) -> dict[str, str]:
    """container path -> source (a named volume or a ./path), from the short syntax."""
    out = {}
    for entry in service.get("volumes", []):
        source, target = str(entry).split(":")[:2]
        out[target] = source
    return out


def scrape_targets(prometheus: dict, job: str = "kraftd") -> set[str]:
    [config] = [c for c in prometheus["scrape_configs"] if c["job_name"] == job]
    return {t for sc in config["static_configs"] for t in sc["targets"]}


def dashboard_exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def dashboard_metric_names(dashboard: dict) -> set[str]:
    """Every kraftd_* series name any panel's PromQL reads (histograms as their _bucket series)."""
    return {name for expr in dashboard_exprs(dashboard) for name in METRIC_NAME.findall(expr)}


# -- the compose file --------------------------------------------------------------------------
def test_compose_runs_three_kraftd_nodes_built_from_the_dockerfile():
    compose = load_compose()
    nodes = kraftd_services(compose)

    assert sorted(nodes) == ["kraftd-1", "kraftd-2", "kraftd-3"]
    for name, svc in nodes.items():
        assert svc["build"] in (".", {"context": "."}), name
        flags = serve_flags(svc)
        assert flags.node_id == int(name.rsplit("-", 1)[1]), name
        assert flags.data_dir == "/data", name
        metrics_port = parse_host_port(flags.metrics_listen)[1]
        assert f":{metrics_port}/healthz" in " ".join(svc["healthcheck"]["test"]), name
        volume = mounts(svc)["/data"]
        assert volume in compose["volumes"], f"{name}: /data should be a named volume"
        # Every setting must pass the daemon's own validation (flags > env, as at start-up).
        env = {k.removeprefix("KRAFTD_").lower(): v for k, v in environment(svc).items()}
        Settings.load(flags.config, **{**env, **{k: v for k, v in vars(flags).items()
                                                 if k in Settings.model_fields}})
        # A cluster needs a secret, and the file names none of its own: compose refuses to
        # start until the user exports one.
        assert set(environment(svc)) == {"KRAFTD_CLUSTER_SECRET"}, name
        with pytest.raises(ValueError, match="compose refuses to start: set KRAFTD_CLUSTER_SECRET"):
            environment(svc, shell={})
    data_volumes = [mounts(svc)["/data"] for svc in nodes.values()]
    assert len(set(data_volumes)) == 3, "each node needs its own data volume"


def test_dockerfile_lets_compose_give_the_whole_command_line():
    # With an ENTRYPOINT of `kraftd serve`, compose's `command: kraftd serve ...` would be
    # appended to it rather than replace it.
    instructions = [line.split(None, 1)[0].upper() for line in DOCKERFILE.read_text().splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    assert "ENTRYPOINT" not in instructions
    assert "CMD" in instructions


def test_voters_listeners_and_ports_agree_across_the_nodes():
    nodes = kraftd_services(load_compose())
    flags = {name: serve_flags(svc) for name, svc in nodes.items()}

    voter_specs = {f.voters for f in flags.values()}
    assert len(voter_specs) == 1, f"every node must list the same voters: {voter_specs}"
    voters = parse_voters(voter_specs.pop())
    assert sorted(voters) == [1, 2, 3]
    host_ports: list[int] = []
    for name, f in flags.items():
        listen_host, listen_port = parse_host_port(f.listen)
        assert listen_host == "0.0.0.0", f"{name} must listen on all interfaces in its container"
        # Peers reach a voter at its service name and listen port; it advertises that address.
        assert voters[f.node_id] == (name, listen_port), name
        assert parse_host_port(f.advertised_listener) == voters[f.node_id], name
        metrics_host, metrics_port = parse_host_port(f.metrics_listen)
        assert metrics_host == "0.0.0.0", name
        published = published_ports(nodes[name])
        assert listen_port in published and metrics_port in published, name
        host_ports += [published[listen_port], published[metrics_port]]
    assert len(set(host_ports)) == len(host_ports), f"host ports must be distinct: {host_ports}"


def test_prometheus_scrapes_every_node_metrics_port():
    compose = load_compose()
    prometheus = yaml.safe_load(PROMETHEUS_YML.read_text())
    expected = {f"{name}:{parse_host_port(serve_flags(svc).metrics_listen)[1]}"
                for name, svc in kraftd_services(compose).items()}

    assert scrape_targets(prometheus) == expected
    service = compose["services"]["prometheus"]
    config_flag = next(a for a in command_argv(service) if a.startswith("--config.file="))
    config_path = config_flag.split("=", 1)[1]
    assert (ROOT / mounts(service)[config_path]).resolve() == PROMETHEUS_YML.resolve()
    assert set(service["depends_on"]) >= set(kraftd_services(compose))


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard():
    compose = load_compose()
    grafana = compose["services"]["grafana"]
    grafana_mounts = {target: (ROOT / source).resolve() for target, source in mounts(grafana).items()
                      if source.startswith(".")}
    assert grafana_mounts["/etc/grafana/provisioning"] == (GRAFANA / "provisioning").resolve()

    [datasource] = yaml.safe_load(
        (GRAFANA / "provisioning/datasources/prometheus.yml").read_text())["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    assert published_ports(compose["services"]["prometheus"]).get(9090) is not None

    [provider] = yaml.safe_load(
        (GRAFANA / "provisioning/dashboards/kraftd.yml").read_text())["providers"]
    dashboards_dir = provider["options"]["path"]
    assert grafana_mounts[dashboards_dir] == DASHBOARD.parent.resolve()

    dashboard = json.loads(DASHBOARD.read_text())
    uses = {json.dumps(p["datasource"], sort_keys=True) for p in dashboard["panels"]}
    uses |= {json.dumps(t["datasource"], sort_keys=True) for p in dashboard["panels"] for t in p["targets"]}
    assert uses == {json.dumps({"type": "prometheus", "uid": datasource["uid"]}, sort_keys=True)}


def test_dashboard_queries_the_cluster_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    names = dashboard_metric_names(dashboard)
    exprs = dashboard_exprs(dashboard)

    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(METRIC_NAME.search(e) for e in exprs), "every query reads a kraftd metric"
    assert CLUSTER_GAUGES <= names
    for hist in RAFT_HISTOGRAMS:
        assert any(f"{hist}_bucket" in e and "histogram_quantile" in e for e in exprs), hist
    # And some of what the server already exported: requests, latency, connections, fetch
    # sessions, snapshot lag.
    assert {"kraftd_requests_total", "kraftd_request_latency_seconds_bucket", "kraftd_connections_open",
            "kraftd_num_incremental_fetch_sessions", "kraftd_snapshot_lag"} <= names


# -- the compose command lines, run natively ---------------------------------------------------
def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def rewrite_serve_args(args: list[str], rewrite: dict) -> list[str]:
    """Replace the values of the flags in `rewrite` (flag -> function of the old value)."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        flag, eq, inline = arg.partition("=")
        if flag in rewrite and eq:
            out.append(f"{flag}={rewrite[flag](inline)}")
        elif arg in rewrite:
            out += [arg, rewrite[arg](args[i + 1])]
            i += 1
        else:
            out.append(arg)
        i += 1
    return out


def native_commands(compose: dict, data_root: Path) -> dict[int, tuple[list[str], dict[str, str]]]:
    """node id -> (`kraftd serve` arguments after "serve", environment), for 127.0.0.1."""
    nodes = kraftd_services(compose)
    flags = {name: serve_flags(svc) for name, svc in nodes.items()}
    voters = parse_voters(next(iter(flags.values())).voters)
    ports = free_ports(2 * len(voters))
    kafka_port = dict(zip(sorted(voters), ports))
    metrics_port = dict(zip(sorted(voters), ports[len(voters):]))
    # Every address naming a voter (host, port) becomes that voter's local port.
    local = {address: ("127.0.0.1", kafka_port[node_id]) for node_id, address in voters.items()}

    def local_address(value: str) -> str:
        return format_host_port(*local[parse_host_port(value)])

    out = {}
    for name, svc in nodes.items():
        node_id = flags[name].node_id
        env = environment(svc)
        overridden = {"KRAFTD_LISTEN", "KRAFTD_ADVERTISED_LISTENER", "KRAFTD_METRICS_LISTEN",
                      "KRAFTD_DATA_DIR", "KRAFTD_VOTERS"} & set(env)
        assert not overridden, f"{name}: put addresses on the command line, not in {overridden}"
        args = rewrite_serve_args(command_argv(svc)[2:], {
            "--listen": lambda _v, n=node_id: format_host_port("127.0.0.1", kafka_port[n]),
            "--advertised-listener": local_address,
            "--voters": lambda v: ",".join(f"{i}@{format_host_port(*local[a])}"
                                           for i, a in parse_voters(v).items()),
            "--metrics-listen": lambda _v, n=node_id: format_host_port("127.0.0.1", metrics_port[n]),
            "--data-dir": lambda _v, n=name: str(data_root / n),
        })
        out[node_id] = (args, env)
    return out


def test_native_commands_rewrite_only_hosts_ports_and_data_dirs(tmp_path):
    compose = load_compose()
    commands = native_commands(compose, tmp_path)
    nodes = {serve_flags(svc).node_id: svc for svc in kraftd_services(compose).values()}

    kafka_ports = {}
    for node_id, (args, _env) in commands.items():
        original = command_argv(nodes[node_id])[2:]
        assert len(args) == len(original)
        changed = {a for a, b in zip(original, args) if a != b}
        was = build_parser().parse_args(["serve", *original])
        assert changed <= {was.listen, was.advertised_listener, was.metrics_listen, was.data_dir, was.voters}
        flags = build_parser().parse_args(["serve", *args])
        assert flags.listen == flags.advertised_listener, "a node advertises the port it listens on"
        assert flags.data_dir == str(tmp_path / f"kraftd-{node_id}")
        kafka_ports[node_id] = flags.listen
    for args, _env in commands.values():
        voters = parse_voters(build_parser().parse_args(["serve", *args]).voters)
        assert {i: format_host_port(*a) for i, a in voters.items()} == kafka_ports


class ComposeCluster:
    """The compose file's kraftd nodes running here, by node id."""

    def __init__(self, procs: dict[int, KraftdProcess]) -> None:
        self.procs = procs
        self._formed: int | str | None = None  # the leader's id, or why there is none

    def scrape_all(self) -> dict[int, dict]:
        out = {}
        for node_id, p in self.procs.items():
            try:
                out[node_id] = scrape_samples(p.metrics_port)
            except OSError:
                out[node_id] = {}
        return out

    def metadata_leaders(self) -> dict[int, float | None]:
        """Each node's view of the metadata leader (None: not exported)."""
        return {node_id: samples.get(("kraftd_metadata_leader_id", ()))
                for node_id, samples in self.scrape_all().items()}

    def wait_for_one_metadata_leader(self) -> int:
        """Waits once per cluster: a second test does not wait again for what never came."""
        if self._formed is None:
            self._formed = self._wait_for_one_metadata_leader()
        if isinstance(self._formed, str):
            pytest.fail(self._formed)
        return self._formed

    def _wait_for_one_metadata_leader(self) -> int | str:
        def agreed():
            values = set(self.metadata_leaders().values())
            return len(values) == 1 and None not in values and values.pop() >= 1

        if poll_until(agreed, FORM_TIMEOUT_S, interval=0.25):
            return int(next(iter(self.metadata_leaders().values())))
        logs = "\n".join(f"--- kraftd-{i} ---\n" + "\n".join(p.log_lines[-15:])
                         for i, p in self.procs.items())
        return (f"no agreed metadata leader after {FORM_TIMEOUT_S}s; kraftd_metadata_leader_id per "
                f"node: {self.metadata_leaders()}\n{logs}")


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory):
    data_root = tmp_path_factory.mktemp("compose-cluster")
    commands = native_commands(load_compose(), data_root)
    # KraftdProcess puts its own defaults first; the compose arguments, later, win (argparse).
    procs = {node_id: KraftdProcess(data_root / f"kraftd-{node_id}", *args, env=env)
             for node_id, (args, env) in commands.items()}
    try:
        # Together: a node may wait for its peers before it serves.
        with ThreadPoolExecutor(len(procs)) as pool:
            for future in [pool.submit(p.start, 60.0) for p in procs.values()]:
                future.result()
        yield ComposeCluster(procs)
    finally:
        for p in procs.values():
            p.kill()


def test_compose_cluster_elects_one_metadata_leader(compose_cluster):
    leader = compose_cluster.wait_for_one_metadata_leader()

    assert leader in compose_cluster.procs
    assert all(p.alive() for p in compose_cluster.procs.values())


def create_topics_when_ready(bootstraps: list[str], topics: list, timeout: float) -> None:
    """Create `topics` with kafka-python's admin client, retrying while the cluster settles.

    A metadata leader is elected before every broker has registered with it, and a node's
    metadata may name a controller it has no address for yet: replication factor 3 needs all
    three brokers, and the admin client needs the controller's address. Retried until `timeout`.
    """
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    pending = list(topics)
    errors: list[str] = []

    def attempt() -> bool:
        admin = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstraps, request_timeout_ms=10_000)
            while pending:
                try:
                    admin.create_topics([pending[0]], timeout_ms=10_000)
                except TopicAlreadyExistsError:
                    pass  # an earlier attempt's request got through
                pending.pop(0)
            return True
        except KafkaError as e:
            errors.append(repr(e))
            return False
        finally:
            if admin is not None:
                admin.close()

    assert poll_until(attempt, timeout, interval=0.5), f"topics not created; errors: {errors[-5:]}"


def test_every_dashboard_metric_is_exported_by_every_node(compose_cluster):
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    wanted = dashboard_metric_names(json.loads(DASHBOARD.read_text()))
    compose_cluster.wait_for_one_metadata_leader()
    procs = compose_cluster.procs
    # Requests on every node (request counters and latency histograms have no series before),
    # a replicated topic for the per-partition gauges, a snapshot-policy one for snapshot lag.
    for p in procs.values():
        KafkaAdminClient(bootstrap_servers=p.bootstrap, request_timeout_ms=10_000).close()
    create_topics_when_ready([p.bootstrap for p in procs.values()], [
        NewTopic("deploy-plain", num_partitions=3, replication_factor=3),
        NewTopic("deploy-kv", num_partitions=1, replication_factor=3,
                 topic_configs={"cleanup.policy": "snapshot"}),
    ], FORM_TIMEOUT_S)

    def missing() -> dict[int, list[str]]:
        out = {}
        for node_id, samples in compose_cluster.scrape_all().items():
            present = {name for name, _labels in samples}
            if gone := sorted(wanted - present):
                out[node_id] = gone
        return out

    poll_until(lambda: not missing(), METRICS_TIMEOUT_S, interval=0.5)
    assert missing() == {}, "dashboard metrics without a series, per node"
