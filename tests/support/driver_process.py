"""Client drivers run as child processes (the Java and kafkajs group members) stop when their
stdin closes; one that does not within `timeout` is killed."""
from __future__ import annotations

import subprocess


def stop_driver(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
