"""Acceptance 1: a million records produced by kafka-python (all five codecs, with headers) read
back by format("kraftd") over the wire and by format("kraftd-log") from the data dir equal, row
for row and column for column, what kafka-python consumers read.

The records are produced and consumed once for the module (two kafka-python producers and two
consumers in processes of their own, one per core); both readers are compared with them as
Arrow columns."""
import pytest
from pyspark.sql import functions as F

from .helpers import assert_same_records, consume_arrow, create_topics, produce_in_processes

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 4
RECORDS = 1_000_000
TOPIC = "rt"


@pytest.fixture(scope="module")
def produced(server):
    """The million records, and what kafka-python consumers read of them."""
    create_topics(server.bootstrap, {TOPIC: PARTITIONS})
    per = RECORDS // len(CODECS) // 2   # two jobs of each codec: ten jobs share two processes evenly
    produce_in_processes(server.bootstrap, TOPIC, [
        ("tests.pipeline.helpers.codec_records", (codec, per, 11 + i),
         {"compression_type": None if codec == "none" else codec})
        for i, codec in enumerate(CODECS * 2)])
    expected = consume_arrow(server.bootstrap, TOPIC, PARTITIONS)
    assert expected.num_rows == RECORDS
    return expected


def test_wire_source_reads_what_kafka_python_reads(spark, server, produced):
    df = (spark.read.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
          .option("subscribe", TOPIC).option("includeHeaders", "true").load())
    assert_same_records(df.toArrow(), produced, TOPIC)


def test_log_source_reads_what_kafka_python_reads(spark, server, produced):
    df = (spark.read.format("kraftd-log").option("includeHeaders", "true").load(str(server.data_dir))
          .where((F.col("topic") == TOPIC) & ~F.col("isControl")).drop("baseOffset", "leaderEpoch", "producerId",
                                                                          "isControl"))
    assert_same_records(df.toArrow(), produced, TOPIC)
