"""The shape of the code, checked over its syntax trees (issue 23):

- no import cycle between kraftd's modules, counting imports inside functions (a function-level
  import does not hide a cycle) and leaving out `if TYPE_CHECKING:` blocks (annotations only);
- quorum/ is sans-IO: it opens no file, fsyncs nothing, takes no lock, reads no clock and draws
  no OS randomness; time, randomness and storage are given to it;
- no class in quorum/ is longer than about 300 lines.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"kraftd": "kraftd", "kraftd.protocol": "protocol", "kraftd.storage": "storage",
                "kraftd.quorum": "quorum", "kraftd.server": "server", "kraftd.config": "config",
                "kraftd.schemas": "schemas", "kraftd.pipeline": "pipeline"}

# Standard-library modules that touch files, sockets, threads, the clock or OS entropy.
IO_MODULES = {"os", "io", "shutil", "fcntl", "pathlib", "tempfile", "time", "datetime", "socket", "asyncio",
              "threading", "concurrent", "mmap", "subprocess", "select", "selectors", "secrets", "glob"}
# quorum/ may import value types and in-memory state from storage/, never the file machinery.
STORAGE_IO_MODULES = {"kraftd.storage.aio_fsync", "kraftd.storage.atomic_file", "kraftd.storage.data_dir_audit",
                      "kraftd.storage.data_dir_lock", "kraftd.storage.file_log", "kraftd.storage.forced_recovery",
                      "kraftd.storage.quorum_state", "kraftd.storage.rejoin_marker", "kraftd.storage.segment",
                      "kraftd.storage.segment_files", "kraftd.storage.topic_catalog",
                      "kraftd.storage.replication_offset_checkpoint"}
IO_NAMES = {"open", "FileLog", "SnapshotStore", "TopicCatalog", "QuorumStateStore", "DataDirLock", "atomic_write"}
# quorum/ is configured through its own NodeConfig; the settings layer and the shell sit above it.
QUORUM_MAY_NOT_IMPORT = ("kraftd.config", "kraftd.server", "kraftd.commands", "kraftd.cli", "kraftd.pipeline")
MAX_CLASS_LINES = 300


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    names: tuple[str, ...]
    line: int


def _modules() -> dict[str, Path]:
    modules = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if package == "kraftd" and parts and parts[0] in {p.split(".")[1] for p in PACKAGE_DIRS if "." in p}:
                continue
            modules[".".join([package, *parts])] = path
    return modules


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def _imports(name: str) -> list[Import]:
    tree = TREES[name]
    is_package = MODULES[name].name == "__init__.py"
    skipped = _type_checking_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, (), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = tuple(alias.name for alias in node.names)
            for alias in names:  # `from . import x` imports the module x
                if f"{target}.{alias}" in MODULES:
                    found.append(Import(name, f"{target}.{alias}", (alias,), node.lineno))
                    break
            else:
                found.append(Import(name, target, names, node.lineno))
    return found


def _owning_module(target: str) -> str | None:
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _graph() -> dict[str, set[str]]:
    graph = {name: set() for name in MODULES}
    for name in MODULES:
        for imp in _imports(name):
            owner = _owning_module(imp.target) if imp.target.startswith("kraftd") else None
            if owner and owner != name and not name.startswith(owner + "."):
                graph[name].add(owner)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]; counter[0] += 1
                    stack.append(child); on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop(); on_stack.discard(member); component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


QUORUM = sorted(name for name in MODULES if name.startswith("kraftd.quorum"))


def _io_in_module(name: str) -> list[str]:
    problems = []
    for imp in _imports(name):
        top = imp.target.split(".")[0]
        if top in IO_MODULES:
            problems.append(f"line {imp.line}: imports {imp.target}")
        owner = _owning_module(imp.target) if imp.target.startswith("kraftd") else None
        if owner in STORAGE_IO_MODULES:
            problems.append(f"line {imp.line}: imports {owner}")
        if imp.target.startswith(QUORUM_MAY_NOT_IMPORT):
            problems.append(f"line {imp.line}: imports {imp.target}")
        problems += [f"line {imp.line}: imports {n}" for n in imp.names if n in IO_NAMES]
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            problems.append(f"line {node.lineno}: calls open()")
    return problems


@pytest.mark.parametrize("module", QUORUM)
def test_quorum_does_no_io(module):
    assert _io_in_module(module) == []


def test_the_io_check_sees_io(tmp_path, monkeypatch):
    source = "import os\nfrom ..storage.file_log import FileLog\ndef f(p):\n    return open(p).read()\n"
    MODULES["kraftd.quorum._probe"] = tmp_path / "_probe.py"
    TREES["kraftd.quorum._probe"] = ast.parse(source)
    try:
        problems = _io_in_module("kraftd.quorum._probe")
    finally:
        del MODULES["kraftd.quorum._probe"], TREES["kraftd.quorum._probe"]
    assert problems == ["line 1: imports os", "line 2: imports kraftd.storage.file_log",
                        "line 2: imports FileLog", "line 4: calls open()"]


def _classes(name: str):
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.ClassDef):
            yield node.name, node.end_lineno - node.lineno + 1


@pytest.mark.parametrize("module", QUORUM)
def test_quorum_classes_fit_a_few_screens(module):
    assert [(cls, lines) for cls, lines in _classes(module) if lines > MAX_CLASS_LINES] == []


def test_the_architecture_document_names_only_modules_that_exist():
    """docs/ARCHITECTURE.md: every `path.py` or `folder/` it names in backticks exists."""
    import re

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    names = set(re.findall(r"`([A-Za-z_][\w/]*(?:\.py|/))`", text))
    files, folders = set(), set()
    for folder in [*PACKAGE_DIRS.values(), "tests", "bench", "fuzz"]:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix == ".py":
                files.add(path.relative_to(ROOT).as_posix())
            elif path.is_dir():
                folders.add(path.relative_to(ROOT).as_posix() + "/")
    folders |= {f + "/" for f in [*PACKAGE_DIRS.values(), "tests", "bench", "fuzz", "docs"]}
    missing = [n for n in sorted(names)
               if not any(f == n or f.endswith("/" + n) for f in (files | folders))]
    assert len(names) > 30 and missing == []
