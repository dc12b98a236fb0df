"""kafkajs for tests: tests/js/package.json pins it (package-lock.json); the first test that needs
it runs `npm ci` into tests/js/node_modules (gitignored) when that is missing or older than the
lock. Node 20 is on the machine; without node/npm the kafkajs tests skip, saying so."""
from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parent.parent / "js"


def require_node() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("no node/npm on this machine: the kafkajs tests need Node 18+")


def install_js_clients() -> Path:
    """`npm ci` in tests/js unless node_modules matches the lock; returns tests/js."""
    require_node()
    lock = JS_DIR / "package-lock.json"
    stamp = JS_DIR / "node_modules" / ".package-lock.json"   # npm writes it on every install
    with open(JS_DIR / ".npm-ci.lock", "w") as guard:   # pytest-xdist workers install once
        fcntl.flock(guard, fcntl.LOCK_EX)
        if stamp.exists() and stamp.stat().st_mtime >= lock.stat().st_mtime:
            return JS_DIR
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=JS_DIR,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.fail(f"npm ci in {JS_DIR} failed (kafkajs for the group tests):\n{done.stdout}{done.stderr}")
    return JS_DIR


def node_command(script: str, *args: str) -> list[str]:
    return ["node", str(JS_DIR / script), *args]
