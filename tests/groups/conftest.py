import pytest

from tests.support.kraftd_process import KraftdProcess

# A short first-rebalance delay keeps the tests quick; sessions stay at the clients' defaults.
GROUP_ENV = {"KRAFTD_GROUP_INITIAL_REBALANCE_DELAY_MS": "300", "KRAFTD_OFFSETS_TOPIC_NUM_PARTITIONS": "10"}


@pytest.fixture(scope="module")
def groups_server(tmp_path_factory):
    """One real kraftd process for a module (each test uses its own topic and group)."""
    server = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data", env=GROUP_ENV).start()
    yield server
    server.kill()
