"""Fixtures for the snapshot tests: a server started over snapshot files written while it was down."""
import random

import pytest

from kraftd.client import WireClient
from tests.support.kraftd_process import KraftdProcess

from .wire import BIG, SMALL, SNAPSHOT_POLICY, create_topic, put_many, write_snapshot

def _items(n, size, seed):
    rng = random.Random(seed)
    return [(b"key-%05d" % i, rng.randbytes(size)) for i in range(n)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server with snapshot topics kv (≈230 KB snapshot) and kv2 (≈12 KB), and a plain topic."""
    data = tmp_path_factory.mktemp("fetch-snapshot") / "data"
    server = KraftdProcess(data).start()
    client = WireClient(server.bootstrap)
    create_topic(client, "kv", 2, SNAPSHOT_POLICY)
    create_topic(client, "kv2", 1, SNAPSHOT_POLICY)
    create_topic(client, "plain", 1)
    client.close()
    server.stop()
    kv_items, kv2_items = _items(2000, 100, 1), _items(100, 100, 2)
    paths = {"kv": write_snapshot(data / "kv-0", BIG, kv_items, max_batch_bytes=16 << 10),
             "kv2": write_snapshot(data / "kv2-0", SMALL, kv2_items)}
    server.start()
    client = WireClient(server.bootstrap)
    tail: dict = {}
    put_many(client, "kv", 0, [(b"key-00001", None), (b"key-00002", b"new"), (b"tail", b"t")], model=tail)
    server.files = {name: path.read_bytes() for name, path in paths.items()}
    server.kv_state = {**dict(kv_items), b"key-00002": b"new", b"tail": b"t"}
    del server.kv_state[b"key-00001"]
    server.client = client
    yield server
    client.close()
    server.kill()
