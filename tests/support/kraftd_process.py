"""A real kraftd server process for tests: ephemeral ports, same port across restarts."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_LISTENING = re.compile(r"kraftd listening on ([0-9.]+):(\d+)")
_METRICS = re.compile(r"metrics listening on ([0-9.]+):(\d+)")


class KraftdProcess:
    def __init__(self, data_dir: Path, *args: str, env: dict | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.args = list(args)
        self.env = env or {}
        self.port = 0
        self.metrics_port = 0
        self.proc: subprocess.Popen | None = None
        self.log_lines: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "KraftdProcess":
        cmd = [sys.executable, "-m", "kraftd", "serve", "--listen", f"127.0.0.1:{self.port}",
               "--metrics-listen", f"127.0.0.1:{self.metrics_port}", "--data-dir", str(self.data_dir),
               "--log-format", "console", *self.args]
        env = {**os.environ, **self.env}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(timeout):
            self.kill()
            raise RuntimeError("kraftd did not start:\n" + "\n".join(self.log_lines[-40:]))
        return self

    def _pump(self, proc: subprocess.Popen, ready: threading.Event) -> None:
        with proc.stdout:  # (closed at the process's end: a suite starts hundreds of them)
            for line in proc.stdout:
                self.log_lines.append(line.rstrip())
                if (m := _METRICS.search(line)) is not None:
                    self.metrics_port = int(m.group(2))
                if (m := _LISTENING.search(line)) is not None:
                    self.port = int(m.group(2))
                    ready.set()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the clean shutdown path."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash (no flush, no clean close)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, *, crash: bool = False) -> "KraftdProcess":
        """Stop (or crash) and start again on the same ports and data dir."""
        self.kill() if crash else self.stop()
        deadline = time.monotonic() + 10
        while True:
            try:
                return self.start()
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
