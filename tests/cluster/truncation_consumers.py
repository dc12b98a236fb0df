"""Careful consumers of one partition (automatic offset reset off) that keep a journal of what
they saw, for the unclean-recovery test: kafka-python (`auto_offset_reset="none"`),
confluent-kafka (`auto.offset.reset=error`) and the Java client (`none`, tests/java/
TruncationConsumer.java). Each runs in the background until stopped.

Journal entries: ("record", offset, value), ("truncation", position, divergent offset or None),
("error", text). On a truncation the consumer does what its client lets a careful application
do: kafka-python and Java hand over the divergent offset (LogTruncationError /
LogTruncationException) and the consumer seeks there; librdkafka reports an error naming the
offsets and stops fetching the partition, and the consumer assigns it again at the offset the
error names (librdkafka gives it only in the message text).
"""
from __future__ import annotations

import re
import subprocess
import threading
import time

from tests.support.driver_process import stop_driver
from tests.support.java_client import compile_driver, java_command


class JournalingConsumer:
    name = "?"

    def __init__(self, bootstrap: str, topic: str, partition: int = 0) -> None:
        self.bootstrap, self.topic, self.partition = bootstrap, topic, partition
        self.journal: list[tuple] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failure: BaseException | None = None

    def note(self, *entry) -> None:
        with self._lock:
            self.journal.append(entry)

    def entries(self) -> list[tuple]:
        with self._lock:
            return list(self.journal)

    def records(self) -> list[tuple[int, str]]:
        return [(e[1], e[2]) for e in self.entries() if e[0] == "record"]

    def has_offset(self, offset: int) -> bool:
        return any(e[0] == "record" and e[1] >= offset for e in self.entries())

    def start(self) -> "JournalingConsumer":
        self._thread = threading.Thread(target=self._guarded, name=f"consumer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _guarded(self) -> None:
        try:
            self.run(self._stop)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def run(self, stop: threading.Event) -> None:
        raise NotImplementedError


class KafkaPythonConsumer(JournalingConsumer):
    name = "kafka-python"

    def run(self, stop) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.errors import KafkaError, LogTruncationError

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="none", fetch_max_wait_ms=200, metadata_max_age_ms=1000,
                                 reconnect_backoff_max_ms=500, request_timeout_ms=5000)
        tp = TopicPartition(self.topic, self.partition)
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            while not stop.is_set():
                try:
                    for records in consumer.poll(timeout_ms=200).values():
                        for r in records:
                            self.note("record", r.offset, r.value.decode())
                except LogTruncationError as e:
                    for part, divergent in e.divergent_offsets.items():
                        position = consumer.position(part) if divergent is None else None
                        self.note("truncation", position, None if divergent is None else divergent.offset)
                        if divergent is not None:
                            consumer.seek(part, divergent.offset)
                except KafkaError as e:
                    self.note("error", repr(e))
                    time.sleep(0.2)
        finally:
            consumer.close()


class ConfluentConsumer(JournalingConsumer):
    name = "confluent-kafka"
    # librdkafka 2.16: "Partition log truncation detected at offset 153 (leader epoch 3): broker end offset is 102 (...)"
    _OFFSETS = re.compile(r"truncation detected at (?:offset )?(\d+).*?end offset (?:is )?(\d+)", re.IGNORECASE | re.DOTALL)

    def run(self, stop) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kraftd-tests-unused",
                             "enable.auto.commit": False, "auto.offset.reset": "error",
                             "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 500,
                             "fetch.wait.max.ms": 200})
        try:
            consumer.assign([TopicPartition(self.topic, self.partition, 0)])
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                error = msg.error()
                if error is None:
                    self.note("record", msg.offset(), msg.value().decode())
                    continue
                text = error.str()
                match = self._OFFSETS.search(text)
                if error.code() == KafkaError._AUTO_OFFSET_RESET and match:
                    position, divergent = int(match.group(1)), int(match.group(2))
                    self.note("truncation", position, divergent)
                    # librdkafka has stopped fetching the partition (a seek fails: _STATE); the
                    # application assigns it again at the divergence point.
                    consumer.assign([TopicPartition(self.topic, self.partition, divergent)])
                else:
                    self.note("error", f"{error.name()}: {text}")
        finally:
            consumer.close()


class JavaConsumer(JournalingConsumer):
    name = "java"

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, *, classes_dir) -> None:
        super().__init__(bootstrap, topic, partition)
        self.classes = compile_driver("TruncationConsumer", classes_dir)
        self.stderr_tail: list[str] = []

    def run(self, stop) -> None:
        proc = subprocess.Popen(java_command("TruncationConsumer", self.classes, self.bootstrap, self.topic,
                                             str(self.partition), "600"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._drain_stderr, args=(proc,), daemon=True).start()
        try:
            watcher = threading.Thread(target=lambda: (stop.wait(), stop_driver(proc, 10)), daemon=True)
            watcher.start()
            for line in proc.stdout:
                kind, _, rest = line.rstrip("\n").partition(" ")
                if kind == "record":
                    offset, _, value = rest.partition(" ")
                    self.note("record", int(offset), value)
                elif kind == "truncation":
                    position, _, divergent = rest.partition(" ")
                    self.note("truncation", int(position) if position.isdigit() else None,
                              int(divergent) if divergent.isdigit() else None)
                elif kind == "error":
                    self.note("error", rest)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)

    def _drain_stderr(self, proc) -> None:
        for line in proc.stderr:
            self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-40:]
