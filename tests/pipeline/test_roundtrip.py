"""Acceptance 1: records produced by kafka-python (all five codecs, with headers) read back by
format("kraftd") over the wire and by format("kraftd-log") from the data dir equal, row for
row and column for column, what a kafka-python consumer reads."""
import random

import pytest
from pyspark.sql import functions as F

from .helpers import arrow_rows, consume_all, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4


def _records(rng: random.Random, n: int, codec: str):
    pool = [rng.randbytes(rng.choice([0, 8, 40, 120])) * rng.choice([1, 3]) for _ in range(512)]
    for i in range(n):
        key = None if i % 17 == 0 else f"{codec}-{i % 5000}".encode()
        value = None if i % 101 == 0 and key is not None else pool[i % 512]  # tombstones
        headers = None
        if i % 3 == 0:
            headers = [("trace", f"{i}".encode()), ("empty", b"")]
        elif i % 7 == 0:
            headers = [("n\u00e4me", b"\x00\xff")]
        yield key, value, headers


def test_records_read_back_equal(spark, server, topics):
    # 200k in the default suite (~40 s here); the full million is the soak test below (~2.5 min).
    _round_trip(spark, server, topics, "rt", 200_000)


@pytest.mark.soak
def test_a_million_records_read_back_equal(spark, server, topics):
    _round_trip(spark, server, topics, "rt-million", 1_000_000)


def _round_trip(spark, server, topics, topic: str, records: int):
    RECORDS = records
    topics({topic: PARTITIONS})
    rng = random.Random(11)
    for codec in CODECS:
        produce(server.bootstrap, topic, _records(rng, RECORDS // len(CODECS), codec), compression_type=None if codec == "none" else codec)
    expected = consume_all(server.bootstrap, topic, PARTITIONS)
    assert len(expected) == RECORDS // len(CODECS) * len(CODECS)

    wire = (spark.read.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load())
    got = arrow_rows(wire.toArrow())
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a == b

    files = (spark.read.format("kraftd-log").option("includeHeaders", "true").load(str(server.data_dir))
             .where((F.col("topic") == topic) & ~F.col("isControl")))
    got = arrow_rows(files.toArrow())
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a == b
