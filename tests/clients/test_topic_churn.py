"""Topic churn on a real server: CreateTopics and DeleteTopics in quick succession, the way a
test suite or a tenant's tooling creates and drops topics.

The first loop-stall bench found a crash here: a topic deleted while its log's group commit
ran had its directory renamed away under the flush, the flush failed with ENOENT, and the
server took it for a failed fsync and stopped. The flush of a deleted log is now moot
(server/shell_step.py: a discarded log's result is left out)."""
import pytest

pytestmark = pytest.mark.clients

TOPICS = 150


def test_creating_and_deleting_topics_in_quick_succession_keeps_the_server_up(kraftd):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kraftd.bootstrap})
    names = [f"churn-{i}" for i in range(TOPICS)]
    for i, name in enumerate(names):
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        if i >= 2:  # a topic created a moment ago: its first group commit may still run
            doomed = names[i - 2]
            admin.delete_topics([doomed])[doomed].result(30)
    assert kraftd.alive()
    assert set(admin.list_topics(timeout=30).topics) & set(names) == set(names[-2:])
    for name in names[-2:]:
        admin.delete_topics([name])[name].result(30)
    assert kraftd.alive()
    assert not [line for line in kraftd.log_lines if "fsync failed" in line]
