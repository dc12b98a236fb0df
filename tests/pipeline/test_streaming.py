"""Acceptance 3: micro-batches under maxOffsetsPerTrigger while a producer runs, a restart from
the checkpoint, AvailableNow; truncation (KIP-320 epochs) and log-start movement under both
failOnDataLoss settings."""
import json
import shutil
import threading
import time

import pytest
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from tests.support.kraftd_process import KraftdProcess

from .helpers import consume_all, create_topics, produce_raw

LIMIT = 700


def _stream(spark, bootstrap, topic, checkpoint, out, *, available_now=False, **options):
    reader = (spark.readStream.format("kraftd").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    writer = (reader.load().selectExpr("partition", "offset", "value").writeStream.format("parquet")
              .option("path", str(out)).option("checkpointLocation", str(checkpoint)))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="200 milliseconds")
    return writer.start()


def _sink(spark, out):
    return [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(out)).collect()]


def test_exactly_once_under_the_limit_across_a_restart(spark, server, tmp_path):
    create_topics(server.bootstrap, {"st": 3})
    stop = threading.Event()

    def producer():
        i = 0
        while not stop.is_set() and i < 60:
            for p in range(3):
                produce_raw(server.bootstrap, "st", p, [(None, b"%d-%d" % (p, i * 100 + j)) for j in range(100)],
                            batch_records=25)
            i += 1
            time.sleep(0.05)

    thread = threading.Thread(target=producer)
    thread.start()
    sizes = []
    try:
        query = _stream(spark, server.bootstrap, "st", tmp_path / "ck", tmp_path / "out", maxOffsetsPerTrigger=str(LIMIT))
        time.sleep(6)
        query.stop()
        sizes += [p["numInputRows"] for p in query.recentProgress]
    finally:
        stop.set()
        thread.join()
    query = _stream(spark, server.bootstrap, "st", tmp_path / "ck", tmp_path / "out", available_now=True,
                    maxOffsetsPerTrigger=str(LIMIT))
    assert query.awaitTermination(120), "AvailableNow did not terminate"
    sizes += [p["numInputRows"] for p in query.recentProgress]
    assert max(sizes) <= LIMIT and sum(1 for s in sizes if s) >= 3
    expected = [(r[0], r[1], r[3]) for r in consume_all(server.bootstrap, "st", 3)]
    got = _sink(spark, tmp_path / "out")
    assert len(got) == len(set((p, o) for p, o, _ in got))          # exactly once
    assert sorted(got) == expected
    # The checkpoint holds our offset format (README), not Spark's {"st":{"0":n}}: positions and
    # the leader epoch each was learned under.
    last = max((tmp_path / "ck" / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))
    offset = json.loads(last.read_text().splitlines()[-1])
    assert set(offset) <= {"offsets", "epochs", "from"} and set(offset["offsets"]["st"]) == {"0", "1", "2"}
    assert {int(o) for o in offset["offsets"]["st"].values()} == {max(o for p, o, _ in expected if p == q) + 1
                                                                  for q in range(3)}
    assert all(e >= 1 for e in offset["epochs"]["st"].values())


def test_truncation_is_detected(spark, tmp_path):
    data = tmp_path / "data"
    server = KraftdProcess(data, env={"KRAFTD_FSYNC_POLICY": "never"}).start()
    try:
        create_topics(server.bootstrap, {"tr": 1})
        produce_raw(server.bootstrap, "tr", 0, [(None, b"old-%d" % i) for i in range(100)], batch_records=10)
        server.stop()
        shutil.copytree(data, tmp_path / "backup")
        server.start()
        produce_raw(server.bootstrap, "tr", 0, [(None, b"lost-%d" % i) for i in range(100)], batch_records=10)
        _stream(spark, server.bootstrap, "tr", tmp_path / "ck", tmp_path / "out", available_now=True) \
            .awaitTermination(120)
        read_first = len(_sink(spark, tmp_path / "out"))
        assert read_first == 200
        # The server comes back from the backup (its newer records are gone), a later epoch
        # writes new records past the position the query had read to.
        server.stop()
        shutil.rmtree(data)
        shutil.copytree(tmp_path / "backup", data)
        server.start()
        server.restart()
        produce_raw(server.bootstrap, "tr", 0, [(None, b"new-%d" % i) for i in range(150)], batch_records=10)

        query = _stream(spark, server.bootstrap, "tr", tmp_path / "ck", tmp_path / "out", available_now=True)
        with pytest.raises(Exception, match="KAFKA_DATA_LOSS.LOG_TRUNCATED"):
            query.awaitTermination(120)
        query = _stream(spark, server.bootstrap, "tr", tmp_path / "ck", tmp_path / "out", available_now=True,
                        failOnDataLoss="false")
        assert query.awaitTermination(120)
        values = [v for _, _, v in _sink(spark, tmp_path / "out")]
        # every new record is read once, after the divergence point (not skipped as Spark's source would)
        assert sorted(v for v in values if v.startswith(b"new-")) == sorted(b"new-%d" % i for i in range(150))
    finally:
        server.kill()


def test_log_start_moving(spark, server, tmp_path):
    create_topics(server.bootstrap, {"ls": 1})
    produce_raw(server.bootstrap, "ls", 0, [(None, b"a-%d" % i) for i in range(100)], batch_records=10)
    _stream(spark, server.bootstrap, "ls", tmp_path / "ck", tmp_path / "out", available_now=True).awaitTermination(120)
    position = max(o for _, o, _ in _sink(spark, tmp_path / "out")) + 1
    produce_raw(server.bootstrap, "ls", 0, [(None, b"b-%d" % i) for i in range(100)], batch_records=10)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.delete_records({TopicPartition("ls", 0): position + 50})
    finally:
        admin.close()
    query = _stream(spark, server.bootstrap, "ls", tmp_path / "ck", tmp_path / "out", available_now=True)
    with pytest.raises(Exception, match="KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_RANGE"):
        query.awaitTermination(120)
    query = _stream(spark, server.bootstrap, "ls", tmp_path / "ck", tmp_path / "out", available_now=True,
                    failOnDataLoss="false")
    assert query.awaitTermination(120)
    offsets = sorted(o for _, o, _ in _sink(spark, tmp_path / "out"))
    assert [o for o in offsets if o >= position] == list(range(position + 50, position + 100))
