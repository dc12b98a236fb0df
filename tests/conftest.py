import pytest

from tests.support.kraftd_process import KraftdProcess


@pytest.fixture
def kraftd(tmp_path):
    """A real kraftd process on ephemeral ports; stopped (or killed) at the end of the test."""
    server = KraftdProcess(tmp_path / "data").start()
    yield server
    server.kill()


@pytest.fixture
def kraftd_factory(tmp_path):
    """Start kraftd processes with extra CLI args / env: kraftd_factory("--foo", env={...})."""
    started = []

    def start(*args, env=None, data_dir=None):
        server = KraftdProcess(data_dir or tmp_path / f"data{len(started)}", *args, env=env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
