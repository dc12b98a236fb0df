"""Packaging: the sdist and wheel `python -m build` makes hold every package in the tree, and the
wheel works on its own.

pyproject.toml's package-dir installs the top-level folders as kraftd.* (protocol/ as
kraftd.protocol, ...); setup.py lists the packages under them. Here the build inputs are copied
to a temporary directory, built into an sdist and a wheel (the wheel is built from the sdist, as
`python -m build` does), and the wheel is installed into a fresh venv that cannot see this
checkout. From a directory outside the checkout, that install must run `kraftd --help`, serve
ApiVersions and /healthz, and import kraftd.pipeline's `register` without pyspark.

The Dockerfile (no Docker engine runs here) is checked statically: it must COPY every build
input this test copies.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import tomllib
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from kraftd.client import WireClient
from kraftd.protocol import messages as m
from tests.support.waiting import poll_until

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# package name -> the folder it is installed from ("kraftd.quorum" -> "quorum").
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
PACKAGE_DATA: dict[str, list[str]] = PYPROJECT["tool"]["setuptools"].get("package-data", {})
# What building needs besides the package folders (README.md is the sdist's long description).
BUILD_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
BUILD_TIMEOUT_S = 180
INSTALL_TIMEOUT_S = 300
SERVE_TIMEOUT_S = 30

_LISTENING = re.compile(r"kraftd listening on ([0-9.]+):(\d+)")
_METRICS = re.compile(r"metrics listening on ([0-9.]+):(\d+)")


# -- the tree ----------------------------------------------------------------------------------
def _source_files(folder: Path):
    return (p for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)


def tree_files() -> dict[str, Path]:
    """Every file the wheel must hold, by its path in the wheel: each .py file under a mapped
    folder, and the package data (schemas/*.json)."""
    files = {}
    for package, folder in PACKAGE_DIR.items():
        base = ROOT / folder
        patterns = PACKAGE_DATA.get(package, [])
        for path in _source_files(base):
            rel = path.relative_to(base)
            is_data = rel.parent == Path(".") and any(path.match(p) for p in patterns)
            if path.suffix == ".py" or is_data:
                files["/".join([*package.split("."), *rel.parts])] = path
    return files


def tree_packages() -> set[str]:
    """Every package the wheel must hold: each mapped folder and each folder holding .py files."""
    return {name.rpartition("/")[0].replace("/", ".") for name in tree_files() if name.endswith(".py")}


def wheel_path_of(package: str) -> str:
    return package.replace(".", "/")


def test_every_folder_with_python_files_is_a_regular_package():
    """A folder of modules without an __init__.py would be a namespace package: it imports from
    the checkout but is easily lost in packaging; every one gets an __init__.py."""
    missing = {str(path.parent.relative_to(ROOT)) for folder in PACKAGE_DIR.values()
               for path in _source_files(ROOT / folder)
               if path.suffix == ".py" and not (path.parent / "__init__.py").exists()}
    assert not missing, f"folders with .py files but no __init__.py: {sorted(missing)}"


# -- building ----------------------------------------------------------------------------------
def _clean_env(**extra: str) -> dict[str, str]:
    """The environment minus anything that would point Python at this checkout or its venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    env.update(extra)
    return env


def _run(cmd, *, cwd, timeout, env=None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or _clean_env(), timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, f"{shlex.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """{"sdist": ..., "wheel": ...} from `python -m build` over a copy of the build inputs (so
    the checkout's own build/ and egg-info are never touched by a concurrent run)."""
    work = tmp_path_factory.mktemp("packaging")
    src = work / "src"
    src.mkdir()
    for name in BUILD_FILES:
        if (ROOT / name).exists():  # a missing one fails the build, saying which
            shutil.copy2(ROOT / name, src / name)
    for folder in PACKAGE_DIR.values():
        # The checkout's own build of the C walk (protocol/_record_walk.pyx) stays behind: the
        # build makes its own.
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_record_walk.c",
                                                      "_codecs.cache"))
    out = work / "dist"
    _run([sys.executable, "-m", "build", "--outdir", out, src], cwd=work, timeout=BUILD_TIMEOUT_S)
    sdists, wheels = sorted(out.glob("kraftd-*.tar.gz")), sorted(out.glob("kraftd-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return {"sdist": sdists[0], "wheel": wheels[0]}


def test_wheel_holds_every_package_module_and_schema(dists):
    with zipfile.ZipFile(dists["wheel"]) as whl:
        names = {n for n in whl.namelist() if ".dist-info/" not in n}
    packages = {n.rpartition("/")[0].replace("/", ".") for n in names if n.endswith(".py")}
    assert tree_packages() - packages == set(), "packages missing from the wheel"
    assert set(tree_files()) - names == set(), "files missing from the wheel"
    assert {n for n in names if n.startswith("kraftd/schemas/") and n.endswith(".json")}, "no schemas"


def test_sdist_holds_every_package_folder(dists):
    with tarfile.open(dists["sdist"]) as sdist:
        # "kraftd-0.1.0/quorum/raft/group.py" -> "quorum/raft/group.py"
        names = {n.partition("/")[2] for n in sdist.getnames()}
    expected = {str(path.relative_to(ROOT)) for path in tree_files().values()} | set(BUILD_FILES)
    assert expected - names == set(), "files missing from the sdist"
    assert "protocol/_record_walk.pyx" in names, "the C walk's source is missing from the sdist"
    assert "protocol/_codecs.cache" not in names, "the codec cache is built per install, not shipped in the sdist"


def test_wheel_holds_the_compiled_record_walk(dists):
    """The install compiles protocol/_record_walk.pyx (this machine has a C compiler); without
    it the produce path would fall back to the Python walk silently."""
    with zipfile.ZipFile(dists["wheel"]) as whl:
        assert [n for n in whl.namelist() if re.fullmatch(r"kraftd/protocol/_record_walk\..+\.so", n)]


def test_wheel_holds_the_codec_cache(dists):
    """The build compiles every codec into kraftd/protocol/_codecs.cache (protocol/code_cache.py)."""
    with zipfile.ZipFile(dists["wheel"]) as whl:
        assert whl.getinfo("kraftd/protocol/_codecs.cache").file_size > 100_000


# -- the installed wheel -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory) -> Path:
    """A fresh venv (no system or checkout site-packages) with the wheel and its dependencies;
    returns its bin/ directory."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    _run([sys.executable, "-m", "venv", venv], cwd=venv.parent, timeout=120)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", dists["wheel"]], cwd=venv.parent,
         timeout=INSTALL_TIMEOUT_S)
    return venv / "bin"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A working directory outside the checkout, so nothing imports from its folders."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    assert ROOT not in cwd.parents
    return cwd


def test_installed_packages_come_from_the_venv(installed, outside):
    """Every package resolves inside the venv's site-packages, none from this checkout."""
    probe = ("import importlib.util, sys\n"
             "for name in sys.argv[1:]:\n"
             "    spec = importlib.util.find_spec(name)\n"
             "    print(name, spec.origin if spec else None)\n")
    out = _run([installed / "python", "-c", probe, *sorted(tree_packages())], cwd=outside, timeout=60).stdout
    origins = dict(line.split(" ", 1) for line in out.splitlines())
    venv = str(installed.parent)
    wrong = {name: origin for name, origin in origins.items() if not origin.startswith(venv + os.sep)}
    assert not wrong, f"not installed from the wheel: {wrong}"
    assert set(origins) == tree_packages()


def test_installed_produce_path_uses_the_compiled_walk(installed, outside):
    probe = ("from kraftd.protocol import records, _record_walk\n"
             "assert records._records_are_well_formed is _record_walk.records_are_well_formed\n")
    _run([installed / "python", "-c", probe], cwd=outside, timeout=60)


def test_installed_server_compiles_no_codec(installed, outside):
    """Every version of every message's codec, and every class's methods, come from the
    install's cache: a server never compiles one on its event loop."""
    probe = ("from kraftd.protocol import code_cache, messages\n"
             "def refuse(*args, **kwargs):\n"
             "    raise AssertionError(f'compiled {args[1]}')\n"
             "code_cache.compile = refuse\n"
             "for root in messages.ALL_MESSAGES.values():\n"
             "    for version in range(root.MIN_VERSION, root.MAX_VERSION + 1):\n"
             "        root._compiler.compile(version)\n"
             "    for cls in root._compiler.classes.values():\n"
             "        cls.__eq__(cls.__new__(cls), None)\n")
    _run([installed / "python", "-c", probe], cwd=outside, timeout=60)


def test_installed_cli_help(installed, outside):
    out = _run([installed / "kraftd", "--help"], cwd=outside, timeout=60).stdout
    for command in ("serve", "dump-log", "snapshot", "pipeline", "verify", "quorum"):
        assert command in out


def test_installed_pipeline_register_imports_without_pyspark(installed, outside):
    probe = ("import importlib.util\n"
             "assert importlib.util.find_spec('pyspark') is None, 'pyspark is installed'\n"
             "from kraftd.pipeline import FORMATS, register\n"
             "assert callable(register) and 'kraftd' in FORMATS\n")
    _run([installed / "python", "-c", probe], cwd=outside, timeout=60)


def test_installed_server_answers_api_versions_and_healthz(installed, outside):
    cmd = [str(installed / "kraftd"), "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
           "--data-dir", str(outside / "data"), "--log-format", "console"]
    proc = subprocess.Popen(cmd, cwd=outside, env=_clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ports: dict[str, int] = {}
    ready = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if (found := _METRICS.search(line)) is not None:
                ports["metrics"] = int(found.group(2))
            if (found := _LISTENING.search(line)) is not None:
                ports["kafka"] = int(found.group(2))
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    try:
        assert ready.wait(SERVE_TIMEOUT_S), "the installed kraftd did not start:\n" + "\n".join(lines[-40:])
        assert "metrics" in ports, "\n".join(lines[-40:])

        client = WireClient(f"127.0.0.1:{ports['kafka']}", timeout=10)
        try:
            body = client.request(18, 3, m.ApiVersionsRequest(client_software_name="test-packaging",
                                                              client_software_version="1"))
        finally:
            client.close()
        assert body.error_code == 0
        assert {k.api_key for k in body.api_keys} >= {0, 1, 3, 18}

        def healthz() -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ports['metrics']}/healthz", timeout=5) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert poll_until(lambda: healthz() == 200, SERVE_TIMEOUT_S, 0.1), \
            "/healthz never answered 200:\n" + "\n".join(lines[-40:])

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(SERVE_TIMEOUT_S) == 0, "\n".join(lines[-40:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- the Dockerfile ----------------------------------------------------------------------------
def dockerfile_copy_sources() -> set[str]:
    """The host paths the Dockerfile's COPY/ADD instructions take from the build context
    (COPY --from=stage copies between stages and is not counted)."""
    sources: set[str] = set()
    logical: list[str] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        logical.append(pending.strip())
        pending = ""
    for instruction in logical:
        words = shlex.split(instruction)
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        args = words[1:]
        if any(a.startswith("--from") for a in args):
            continue
        paths = [a for a in args if not a.startswith("--")]
        sources.update(os.path.normpath(p.rstrip("/")) for p in paths[:-1])
    return sources


def test_dockerfile_copies_every_build_input():
    """The image runs `pip install .` over what it copied: every folder the wheel's packages
    come from, and the files the build reads, must be copied."""
    sources = dockerfile_copy_sources()
    if "." in sources:
        return
    needed = set(BUILD_FILES) | set(PACKAGE_DIR.values())
    assert needed - sources == set(), f"the Dockerfile does not COPY {sorted(needed - sources)}"


def test_dockerfile_installs_the_package():
    instructions = (ROOT / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    run_lines = [line for line in instructions if line.strip().upper().startswith("RUN")]
    assert any(re.search(r"\bpip install\b.*(\s\.(\s|$)|\.whl)", line) for line in run_lines), run_lines

