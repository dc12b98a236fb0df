"""KraftdCluster without a multi-node server: the --voters each node gets, that proxy i→j leads to
node j (fake nodes stand on the reserved ports), what partition() cuts, and one standalone node's
lifecycle (start, metrics, crash, restart, stop)."""
import socket
import threading

import pytest

from tests.support.cluster import HOST, KraftdCluster


def _parse(spec: str) -> dict[int, str]:
    return {int(node): address for node, _, address in (e.partition("@") for e in spec.split(","))}


class FakeNodes:
    """A listener on each node's reserved Kafka port that greets with its node id, then echoes."""

    def __init__(self, cluster: KraftdCluster) -> None:
        self.listeners = []
        for i in cluster.ids:
            host, port = cluster.node(i).rsplit(":", 1)
            listener = socket.create_server((host, int(port)))
            self.listeners.append(listener)
            threading.Thread(target=self._serve, args=(listener, i), daemon=True).start()

    @staticmethod
    def _serve(listener: socket.socket, node_id: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=FakeNodes._greet_and_echo, args=(conn, node_id), daemon=True).start()

    @staticmethod
    def _greet_and_echo(conn: socket.socket, node_id: int) -> None:
        with conn:
            try:
                conn.sendall(b"node %d\n" % node_id)
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass

    def close(self) -> None:
        for listener in self.listeners:
            listener.shutdown(socket.SHUT_RDWR)
            listener.close()


@pytest.fixture
def proxied(tmp_path):
    cluster = KraftdCluster(tmp_path, nodes=3, proxies=True)  # not started: no process runs
    fakes = FakeNodes(cluster)
    yield cluster
    fakes.close()
    cluster.close()


def _dial(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=0.5)


def _greeting(address: str) -> bytes | None:
    """The greeting of whoever answers at `address`; None if the connection is refused, reset
    or stalls."""
    try:
        with _dial(address) as sock:
            return sock.recv(64) or None
    except OSError:  # refused, reset, timed out
        return None


def _echoes(address: str) -> bool:
    try:
        with _dial(address) as sock:
            sock.recv(64)
            sock.sendall(b"ping")
            return sock.recv(64) == b"ping"
    except OSError:
        return False


def test_without_proxies_every_node_gets_the_same_voters_the_real_listeners(tmp_path):
    cluster = KraftdCluster(tmp_path, nodes=3)
    try:
        expected = {i: cluster.node(i) for i in (1, 2, 3)}
        assert all(_parse(cluster.voters_spec(i)) == expected for i in (1, 2, 3))
        assert cluster.bootstrap() == ",".join(expected.values())
        ports = {int(a.rsplit(":", 1)[1]) for a in expected.values()}
        ports |= {cluster.process(i).metrics_port for i in (1, 2, 3)}
        assert len(ports) == 6 and 0 not in ports
        args = cluster.process(2).args
        assert args[:4] == ["--node-id", "2", "--voters", cluster.voters_spec(2)]
        assert cluster.voters_spec(1) == f"1@{HOST}:{cluster.process(1).port},2@{cluster.node(2)},3@{cluster.node(3)}"
    finally:
        cluster.close()


def test_with_proxies_node_i_reaches_voter_j_through_proxy_i_j(proxied):
    for i in proxied.ids:
        voters = _parse(proxied.voters_spec(i))
        assert voters[i] == proxied.node(i)  # itself: its real listener
        for j in proxied.ids:
            if j != i:
                assert voters[j] == proxied.proxy(i, j).address
                assert proxied.proxy(i, j).target == (HOST, int(proxied.node(j).rsplit(":", 1)[1]))
                assert _greeting(voters[j]) == b"node %d\n" % j
    addresses = [proxied.proxy(i, j).address for i in proxied.ids for j in proxied.ids if i != j]
    assert len(set(addresses)) == 6 and not set(addresses) & set(proxied.bootstrap().split(","))


def test_partition_cuts_both_proxies_of_a_pair_and_heal_all_restores_them(proxied):
    proxied.partition(1, 2)
    assert _greeting(proxied.proxy(1, 2).address) is None
    assert _greeting(proxied.proxy(2, 1).address) is None
    assert _greeting(proxied.proxy(1, 3).address) == b"node 3\n"
    assert _greeting(proxied.proxy(3, 2).address) == b"node 2\n"
    proxied.heal_all()
    assert _greeting(proxied.proxy(1, 2).address) == b"node 2\n"
    assert _greeting(proxied.proxy(2, 1).address) == b"node 1\n"


def test_a_one_way_partition_drops_only_what_i_sends_to_j(proxied):
    proxied.partition(1, 2, one_way=True)
    # 1 dials 2: 2's greeting reaches 1, 1's bytes do not reach 2 (so nothing is echoed).
    assert _greeting(proxied.proxy(1, 2).address) == b"node 2\n"
    assert not _echoes(proxied.proxy(1, 2).address)
    # 2 dials 1: what 1 sends back (its greeting) is lost.
    assert _greeting(proxied.proxy(2, 1).address) is None
    assert _echoes(proxied.proxy(1, 3).address) and _echoes(proxied.proxy(3, 1).address)
    proxied.heal_all()
    assert _echoes(proxied.proxy(1, 2).address) and _echoes(proxied.proxy(2, 1).address)


def test_isolate_cuts_a_node_off_from_all_others(proxied):
    proxied.isolate(3)
    for other in (1, 2):
        assert _greeting(proxied.proxy(3, other).address) is None
        assert _greeting(proxied.proxy(other, 3).address) is None
    assert _greeting(proxied.proxy(1, 2).address) == b"node 2\n"


def test_one_standalone_node_starts_crashes_restarts_and_stops(tmp_path):
    with KraftdCluster(tmp_path, nodes=1, voters=False) as cluster:
        cluster.wait_ready(30)
        assert cluster.running() == [1]
        assert "kraftd listening on" in cluster.logs(1)
        assert "# TYPE" in cluster.metrics(1)
        port = cluster.process(1).port
        cluster.kill(1)
        assert cluster.running() == []
        cluster.restart(1)
        cluster.wait_ready(30)
        assert cluster.process(1).port == port and cluster.node(1) == f"{HOST}:{port}"
        assert cluster.logs(1).count("kraftd listening on") == 2
        assert cluster.stop(1) == 0
        assert cluster.running() == []
