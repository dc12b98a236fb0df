"""Topic configs with real clients' admin APIs (DescribeConfigs, IncrementalAlterConfigs):
confluent-kafka, kafka-python and the Java client read a topic's configs and where each comes
from, alter them, and read the change back; a topic altered to cleanup.policy=compact is then
cleaned."""
from __future__ import annotations

import time

import pytest

from tests.support.java_client import compile_driver
from tests.support.kraftd_process import KraftdProcess
from tests.support.waiting import wait_until

from .test_compaction import Java, read_with_kafka_python


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc = KraftdProcess(tmp_path_factory.mktemp("kraftd") / "data", env={"KRAFTD_LOG_CLEANER_BACKOFF_MS": "200"}).start()
    yield proc
    proc.kill()


def test_confluent_describes_and_alters_a_topics_configs(server):
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       NewTopic)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("cfg-confluent", 1, 1, config={"retention.ms": "3600000"})])["cfg-confluent"].result(30)
    resource = ConfigResource("TOPIC", "cfg-confluent")

    def described():
        return admin.describe_configs([resource])[resource].result(30)
    before = described()
    assert before["retention.ms"].value == "3600000"
    assert before["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert before["cleanup.policy"].value == "delete" and before["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    change = ConfigResource("TOPIC", "cfg-confluent", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([change])[change].result(30)
    after = described()
    assert after["cleanup.policy"].value == "compact" and after["retention.ms"].value == "604800000"
    bad = ConfigResource("TOPIC", "cfg-confluent", incremental_configs=[
        ConfigEntry("cleanup.policy", "snapshot", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="INVALID_CONFIG|snapshot"):
        admin.incremental_alter_configs([bad])[bad].result(30)


def test_kafka_python_describes_and_alters_a_topics_configs(server):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic("cfg-kp", 1, 1)])
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg-kp", configs={"segment.ms": "60000"})])
        response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg-kp")])
        text = repr(response)
        assert "segment.ms" in text and "60000" in text, text[:2000]
    finally:
        admin.close()


def test_java_alters_a_topic_to_compact_and_the_cleaner_then_cleans_it(server, tmp_path):
    java = Java(server.bootstrap, tmp_path)
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic("cfg-java", 1, 1, config={"segment.bytes": "4096"})])["cfg-java"].result(30)
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for i in range(2000):
        producer.produce("cfg-java", key=b"k%d" % (i % 10), value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    java._run("alter", server.bootstrap, "cfg-java", "cleanup.policy=compact,min.cleanable.dirty.ratio=0.01")
    lines = [line.split(" ", 3) for line in java._run("describe", server.bootstrap, "cfg-java") if line.startswith("config ")]
    configs = {name: (value, source) for _, name, value, source in lines}
    assert configs["cleanup.policy"] == ("compact", "DYNAMIC_TOPIC_CONFIG")
    assert configs["segment.bytes"] == ("4096", "DYNAMIC_TOPIC_CONFIG")
    assert configs["delete.retention.ms"] == ("86400000", "DEFAULT_CONFIG")
    for i in range(10):  # a write rolls the active segment (it is past segment.bytes): all of it is cleanable
        producer.produce("cfg-java", key=b"k%d" % i, value=b"last-%d" % i, partition=0)
        producer.flush(30)
    end = 2010 + 1  # (the leader's LeaderChange record first)

    def cleaned():
        got = read_with_kafka_python(server.bootstrap, "cfg-java", end)
        return len(got) <= 20 and got
    got = wait_until(cleaned, 30, "the cleaner to clean the topic altered to compact")
    assert {k: v for _, k, v in got} == {b"k%d" % i: b"last-%d" % i for i in range(10)}
