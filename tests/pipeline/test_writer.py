"""Acceptance 4: DataFrame -> kraftd -> DataFrame; keys land where the Java producer puts them."""
import pytest
from pyspark.sql import Row
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from kraftd.pipeline.partitioner import partition_for_key

PARTITIONS = 6


def _read(spark, server, topic):
    return (spark.read.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
            .option("subscribe", topic).option("includeHeaders", "true").load())


def test_dataframe_round_trip_and_java_partitioning(spark, server, topics):
    topics({"wr": PARTITIONS})
    header_type = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    from pyspark.sql.types import ArrayType
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("headers", ArrayType(header_type)), StructField("partition", IntegerType())])
    rows = []
    for i in range(3000):
        key = None if i % 10 == 0 else f"user-{i % 700}"
        headers = [Row(key="i", value=str(i).encode())] if i % 4 == 0 else None
        partition = 5 if i % 50 == 1 else None
        rows.append((key, f"value-{i}".encode(), headers, partition))
    df = spark.createDataFrame(rows, schema).repartition(3)
    (df.write.format("kraftd").mode("append").option("kafka.bootstrap.servers", server.bootstrap)
     .option("topic", "wr").save())
    got = _read(spark, server, "wr").collect()
    assert len(got) == len(rows)
    sent = sorted(repr((k, v, tuple((h.key, h.value) for h in hs) if hs else None)) for k, v, hs, _ in rows)
    back = sorted(repr((r.key.decode() if r.key is not None else None, r.value,
                        tuple((h.key, h.value) for h in r.headers) if r.headers else None)) for r in got)
    assert back == sent
    explicit = {f"value-{i}".encode() for i in range(3000) if i % 50 == 1}
    for r in got:
        if r.value in explicit:
            assert r.partition == 5
        elif r.key is not None:
            assert r.partition == partition_for_key(r.key, PARTITIONS)
    # Java's default partitioner (murmur2 vectors of Kafka's UtilsTest): "foobar" -> 1357151166 % 6
    spark.createDataFrame([("foobar", "x")], "key string, value string").write.format("kraftd").mode("append") \
        .option("kafka.bootstrap.servers", server.bootstrap).option("topic", "wr").save()
    foobar = [r for r in _read(spark, server, "wr").collect() if r.key == b"foobar"]
    assert [r.partition for r in foobar] == [1357151166 % PARTITIONS]


def test_sink_errors_are_sparks(spark, server):
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    writer = df.write.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        writer.mode("overwrite").option("topic", "x").save()
    # Where we differ (README): Spark's Kafka sink also takes ErrorIfExists, the default mode;
    # PySpark lets a Python data source write only in Append or Overwrite, so the default and
    # Ignore (which Kafka's sink refuses too) fail before the writer is made.
    for mode in (None, "errorifexists", "ignore"):
        w = df.write.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap).option("topic", "x")
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            (w.mode(mode) if mode else w).save()
    with pytest.raises(Exception, match="topic option required when no 'topic' attribute is present"):
        df.write.format("kraftd").mode("append").option("kafka.bootstrap.servers", server.bootstrap).save()
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.select("key").write.format("kraftd").mode("append").option("kafka.bootstrap.servers", server.bootstrap) \
            .option("topic", "x").save()
    with pytest.raises(Exception, match="key attribute unsupported type int"):
        spark.createDataFrame([(1, "v")], "key int, value string").write.format("kraftd").mode("append") \
            .option("kafka.bootstrap.servers", server.bootstrap).option("topic", "x").save()


def test_streaming_write(spark, server, topics, tmp_path):
    topics({"sw-in": 2, "sw-out": 2})
    rows = [(f"k{i}", f"v{i}") for i in range(500)]
    spark.createDataFrame(rows, "key string, value string").write.format("kraftd").mode("append") \
        .option("kafka.bootstrap.servers", server.bootstrap).option("topic", "sw-in").save()
    query = (spark.readStream.format("kraftd").option("kafka.bootstrap.servers", server.bootstrap)
             .option("subscribe", "sw-in").option("startingOffsets", "earliest").load()
             .selectExpr("key", "value").writeStream.format("kraftd")
             .option("kafka.bootstrap.servers", server.bootstrap).option("topic", "sw-out")
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    out = _read(spark, server, "sw-out").collect()
    assert sorted((r.key.decode(), r.value.decode()) for r in out) == sorted(rows)
    assert all(r.partition == partition_for_key(r.key, 2) for r in out)
