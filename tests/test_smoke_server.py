"""The server process starts, answers a real client, and stops cleanly on SIGTERM."""
from kafka import KafkaAdminClient


def test_server_answers_and_stops_cleanly(kraftd):
    admin = KafkaAdminClient(bootstrap_servers=kraftd.bootstrap)
    assert admin.describe_cluster()["controller_id"] == 1
    admin.close()
    assert kraftd.stop() == 0
