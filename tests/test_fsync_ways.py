"""The group commit's fsyncs on a real server: by kernel AIO where it works (the default), on the
loop and in the fsync pool with fsync_aio off. Either way a real client's acks=all records are
acknowledged, read back, and still there after a kill -9."""
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.prometheus import scrape_samples


def flushes(server) -> dict[str, float]:
    return {dict(labels)["way"]: value for (name, labels), value in scrape_samples(server.metrics_port).items()
            if name == "kraftd_log_flushes_total"}


def produce_and_read_back(server, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0)
    for i in range(count):
        producer.send(topic, f"v{i}".encode()).get(timeout=30)  # one acks=all write at a time
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(topic, 0)])
    assert [m.value for m in consumer] == [f"v{i}".encode() for i in range(count)]
    consumer.close()


@pytest.mark.parametrize("aio", [True, False])
def test_acks_all_records_are_fsynced_the_configured_way_and_survive_kill_9(kraftd_factory, aio):
    server = kraftd_factory(env={"KRAFTD_FSYNC_AIO": str(aio).lower()})
    said = "segment fsyncs through native AIO"
    assert any(said in line for line in server.log_lines) == aio
    produce_and_read_back(server, "durable", 30)
    ways = flushes(server)
    # Each acks=all write waited for a flush of its log. The first one also fsyncs the new
    # partition directory and epoch checkpoint, which the pool does either way.
    assert ways.get("pool", 0) >= 1, ways
    if aio:
        assert ways.get("aio", 0) >= 25 and ways.get("loop", 0) == 0, ways
    else:
        assert ways.get("aio", 0) == 0 and ways.get("loop", 0) >= 25, ways
    server.restart(crash=True)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("durable", 0)])
    assert len(list(consumer)) == 30
    consumer.close()
