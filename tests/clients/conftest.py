import pytest

from tests.support.kraftd_process import KraftdProcess


@pytest.fixture(scope="module")
def shared_kraftd(tmp_path_factory):
    """One real kraftd process for a whole module (each test uses its own topics)."""
    server = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data").start()
    yield server
    server.kill()
