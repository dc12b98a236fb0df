"""Java client (3.9) group members for the tests: each is a JVM running tests/java/
GroupConsumer.java whose stdout lines are read into a shared Collected and the member's own
rebalance journal. Closing its stdin makes it leave the group cleanly."""
from __future__ import annotations

import subprocess
import threading
import time

from tests.groups.support import Collected
from tests.support.driver_process import stop_driver
from tests.support.java_client import java_command


def _parts(text: str) -> set:
    return {int(p) for p in text.split(",") if p}


class JavaMember:
    def __init__(self, classes, name, bootstrap, topic, group, strategy, collected: Collected,
                 instance_id: str | None = None) -> None:
        self.name, self.collected = name, collected
        args = [bootstrap, topic, group, strategy, name] + ([instance_id] if instance_id else [])
        self.proc = subprocess.Popen(["java", "-Xmx128m", *java_command("GroupConsumer", classes, *args)[1:]],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lock = threading.Lock()
        self.events: list[tuple] = []   # ("revoked"|"added", generation, {partitions}) and ("lost", {..})
        self.assigned: set = set()
        self.generation = -1
        self.other: list[str] = []      # anything else it printed (errors, SLF4J notices)
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "record":
                partition, offset, value = rest.split(" ", 2)
                self.collected.add(self.name, int(partition), int(offset), value.encode())
            elif word in ("revoked", "added"):
                generation, _, parts = rest.partition(" ")
                with self.lock:
                    self.events.append((word, int(generation), _parts(parts)))
            elif word == "lost":
                with self.lock:
                    self.events.append(("lost", -1, _parts(rest)))
            elif word == "assignment":
                generation, _, parts = rest.partition(" ")
                with self.lock:
                    self.generation, self.assigned = int(generation), _parts(parts)
            elif word == "closed":
                self.closed.set()
            elif word != "ready":
                self.other.append(line.rstrip("\n"))

    def journal(self) -> list[tuple]:
        with self.lock:
            return list(self.events)

    def revoked_since(self, mark: int) -> list[set]:
        return [parts for kind, _, parts in self.journal()[mark:] if kind in ("revoked", "lost")]

    def close(self, timeout: float = 20.0) -> None:
        """Leave the group: stdin closes, the driver commits and (if dynamic) sends LeaveGroup."""
        stop_driver(self.proc, timeout)
        self.thread.join(5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_balanced(members, per_member: int, partitions: int, timeout: float, extra=lambda: True,
                  what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while True:
        sets = [m.assigned for m in members]
        if (all(len(s) == per_member for s in sets) and set().union(*sets) == set(range(partitions))
                and extra()):
            return
        if time.monotonic() > deadline:
            detail = {m.name: (sorted(m.assigned), m.other[-3:]) for m in members}
            raise AssertionError(f"timed out waiting for {what or 'a balanced group'}: {detail}")
        time.sleep(0.05)
