import pytest

from tests.support.kraftd_process import KraftdProcess


@pytest.fixture
def kraftd(tmp_path):
    """A real kraftd process on ephemeral ports; stopped (or killed) at the end of the test."""
    server = KraftdProcess(tmp_path / "data").start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    """Test certificates (a CA, a server certificate for 127.0.0.1, client certificates):
    tests/support/certs.py."""
    from tests.support.certs import make_certs

    return make_certs(tmp_path_factory.mktemp("certs"))


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


# -- pytest-xdist (`make test` runs the suite on several workers; see the Makefile) ------------

def _shared_fixture_group(item) -> str | None:
    """The one worker's worth of tests that share an instance of a fixture of ours: a module's
    tests for a module-scoped one, every user of a session- or package-scoped one. Kept on one
    worker, the fixture (a cluster, a Spark session) is set up once, as in a serial run."""
    group = None
    for defs in item._fixtureinfo.name2fixturedefs.values():
        fixture = defs[-1]
        if not fixture.baseid.startswith("tests"):
            continue  # pytest's and the plugins' own
        if fixture.scope in ("session", "package"):
            return f"shared:{fixture.baseid}"
        if fixture.scope == "module":
            group = f"shared:{item.module.__name__}"
    return group


def _starts_clusters(item) -> bool:
    """tests/cluster's tests start three to five kraftd processes each: on two cores, two such
    tests at once starve each other's elections, so under xdist they form one group (one worker
    runs them one after another while the other runs the single-server tests)."""
    return item.nodeid.startswith("tests/cluster/")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Tests marked `long` start first (under xdist none of them is left to run alone at the
    end), and tests sharing one of our module/session fixtures form an xdist group."""
    for item in items:
        group = "clusters" if _starts_clusters(item) else _shared_fixture_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
