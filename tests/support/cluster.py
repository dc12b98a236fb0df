"""A cluster of real `kraftd serve` processes on loopback, optionally with a TcpProxy on every
ordered pair of nodes so a test can partition any link.

    with KraftdCluster(tmp_path, nodes=3, proxies=True) as cluster:   # starts every node
        cluster.wait_ready(30)
        cluster.partition(1, 2)          # nothing passes between 1 and 2 (both proxies cut)
        cluster.kill(3); cluster.start(3)
        cluster.heal_all()

Node ids are 1..nodes. Every port is reserved before any node starts, because each node's
--voters names them all: node i reaches voter j at `voters_spec(i)`'s address for j, which is
the proxy i→j when proxies=True (its own entry is always its real listener). Clients use the
real listeners: `bootstrap()`.
"""
from __future__ import annotations

import socket
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from tests.support.kraftd_process import KraftdProcess
from tests.support.tcp_proxy import TcpProxy

HOST = "127.0.0.1"
# Every node of a test cluster shares it (KRAFTD_CLUSTER_SECRET): nodes authenticate to each other.
CLUSTER_SECRET = "kraftd-test-cluster-secret"


class KraftdCluster:
    def __init__(self, tmp_path, nodes: int = 3, *, proxies: bool = False, extra_args=(), env: dict | None = None,
                 voters: bool = True, voter_ids=None, started=None) -> None:
        """voters=False starts each node without --voters (a standalone server, for nodes=1);
        voter_ids: the metadata quorum's voters (default: every node); the others join as brokers;
        started: the nodes `with` starts (default: every node; `start(i)` starts the others)."""
        self.tmp_path = Path(tmp_path)
        self.ids = list(range(1, nodes + 1))
        self.voter_ids = list(voter_ids) if voter_ids is not None else list(self.ids)
        self._started_first = list(started) if started is not None else list(self.ids)
        self._proxies: dict[tuple[int, int], TcpProxy] = {}
        with ExitStack() as reserved:
            # Held until the proxies are bound, so no proxy takes a node's port (bind(0) does not
            # hand out a port that is bound); released before the nodes bind them.
            self._ports = {i: (self._reserve(reserved), self._reserve(reserved)) for i in self.ids}
            if proxies:
                self._proxies = {(i, j): TcpProxy((HOST, self._ports[j][0]))
                                 for i in self.ids for j in self.ids if i != j}
        self._processes: dict[int, KraftdProcess] = {}
        for i in self.ids:
            args = ["--node-id", str(i), *(["--voters", self.voters_spec(i)] if voters else []), *extra_args]
            process = KraftdProcess(self.tmp_path / f"node{i}", *args,
                                    env={"KRAFTD_CLUSTER_SECRET": CLUSTER_SECRET, **(env or {})})
            process.port, process.metrics_port = self._ports[i]  # start() listens on these
            self._processes[i] = process

    @staticmethod
    def _reserve(stack: ExitStack) -> int:
        sock = stack.enter_context(socket.socket())
        sock.bind((HOST, 0))
        return sock.getsockname()[1]

    # -- addresses ---------------------------------------------------------------------------
    def voters_spec(self, node_id: int) -> str:
        """The --voters value node `node_id` is started with: "1@host:port,2@host:port,..."."""
        def address(j: int) -> str:
            return self._proxies[node_id, j].address if (node_id, j) in self._proxies else self.node(j)
        return ",".join(f"{j}@{address(j)}" for j in self.voter_ids)

    def change_voters(self, voter_ids) -> None:
        """Every node is started from now on with these voters (after `kraftd quorum force-leader`)."""
        self.voter_ids = list(voter_ids)
        for i, process in self._processes.items():
            if "--voters" in process.args:
                process.args[process.args.index("--voters") + 1] = self.voters_spec(i)

    def node(self, i: int) -> str:
        """Node i's real Kafka listener, "127.0.0.1:port"."""
        return f"{HOST}:{self._ports[i][0]}"

    def bootstrap(self) -> str:
        return ",".join(self.node(i) for i in self.ids)

    def proxy(self, i: int, j: int) -> TcpProxy:
        """The proxy node i dials to reach node j."""
        return self._proxies[i, j]

    def process(self, i: int) -> KraftdProcess:
        return self._processes[i]

    def create_topic(self, topic: str, partitions: int, rf: int, timeout: float = 60.0) -> float:
        """CreateTopics through confluent-kafka's AdminClient, retried while the controller
        settles (TOPIC_ALREADY_EXISTS counts as done); returns the seconds left of `timeout`."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap()})
        deadline = time.monotonic() + timeout
        while True:
            futures = admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=10, request_timeout=15)
            try:
                futures[topic].result(timeout=20)
                break
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        return deadline - time.monotonic()

    # -- processes ---------------------------------------------------------------------------
    def start(self, i: int, timeout: float = 30.0) -> None:
        self._processes[i].start(timeout)

    def start_all(self, timeout: float = 30.0) -> None:
        for i in self.ids:
            if not self._processes[i].alive():
                self.start(i, timeout)

    def kill(self, i: int) -> None:
        """SIGKILL: a crash."""
        self._processes[i].kill()

    def stop(self, i: int, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit status."""
        return self._processes[i].stop(timeout)

    def restart(self, i: int, *, crash: bool = False) -> None:
        """Stop (or SIGKILL) node i and start it again on the same ports and data dir."""
        self._processes[i].restart(crash=crash)

    def running(self) -> list[int]:
        return [i for i in self.ids if self._processes[i].alive()]

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every running node accepts connections on its Kafka listener."""
        deadline = time.monotonic() + timeout
        waiting = set(self.running())
        while waiting:
            for i in sorted(waiting):
                try:
                    socket.create_connection((HOST, self._ports[i][0]), timeout=1).close()
                    waiting.discard(i)
                except OSError:
                    pass
            if waiting and time.monotonic() > deadline:
                raise TimeoutError(f"nodes {sorted(waiting)} not listening after {timeout}s:\n"
                                   + "\n".join(self.logs(i, tail=40) for i in sorted(waiting)))
            if waiting:
                time.sleep(0.05)

    def metrics(self, i: int) -> str:
        """Node i's /metrics text."""
        with urllib.request.urlopen(f"http://{HOST}:{self._ports[i][1]}/metrics", timeout=10) as r:
            return r.read().decode()

    def logs(self, i: int, tail: int | None = None) -> str:
        """Node i's output (stdout and stderr, every run), headed by its id, for failure messages."""
        lines = self._processes[i].log_lines
        return f"--- node {i} ---\n" + "\n".join(lines[-tail:] if tail else lines)

    # -- links -------------------------------------------------------------------------------
    def partition(self, i: int, j: int, *, one_way: bool = False) -> None:
        """Cut the links between i and j: both proxies reset their connections and refuse new
        ones. one_way=True: nothing i sends reaches j (its requests to j, its responses to j's
        requests are blackholed, the connections stay open), while j's bytes still reach i."""
        if one_way:
            self.proxy(i, j).cut_one_way("forward")
            self.proxy(j, i).cut_one_way("backward")
        else:
            self.proxy(i, j).cut()
            self.proxy(j, i).cut()

    def isolate(self, i: int) -> None:
        """Partition node i from every other node."""
        for j in self.ids:
            if j != i:
                self.partition(i, j)

    def heal_all(self) -> None:
        for p in self._proxies.values():
            p.heal()

    # -- lifetime ----------------------------------------------------------------------------
    def __enter__(self) -> "KraftdCluster":
        try:
            for i in self._started_first:
                self.start(i)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """SIGKILL every node (teardown does not depend on a clean shutdown) and close the proxies."""
        for process in self._processes.values():
            process.kill()
        for p in self._proxies.values():
            p.close()
