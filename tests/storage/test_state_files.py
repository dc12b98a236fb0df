import base64
import uuid

import pytest

from kraftd.storage import QuorumStateStore, TopicCatalog, TopicExistsError


def test_quorum_state_round_trip(tmp_path):
    store = QuorumStateStore(tmp_path / "quorum-state")
    assert store.read() is None
    store.write({"leaderEpoch": 3, "votedId": 1})
    assert QuorumStateStore(tmp_path / "quorum-state").read() == {"leaderEpoch": 3, "votedId": 1}
    store.write({"leaderEpoch": 4})
    assert store.read() == {"leaderEpoch": 4}
    assert [p.name for p in tmp_path.iterdir()] == ["quorum-state"]


def test_topic_catalog_persists(tmp_path):
    cat = TopicCatalog(tmp_path)
    tid = uuid.uuid4()
    cat.create("a", 3, {"retention.ms": "100"}, topic_id=tid)
    b = cat.create("b", 1)
    with pytest.raises(TopicExistsError):
        cat.create("a", 1)
    cat.flush()  # changes are written in the background (a log's flush waits for them)
    again = TopicCatalog(tmp_path)
    assert again.get("a").topic_id == tid and again.get("a").partitions == 3
    assert again.get("a").configs == {"retention.ms": "100"}
    assert again.get("b").topic_id == b.topic_id
    assert sorted(t.name for t in again.all()) == ["a", "b"]
    again.delete("b")
    again.flush()
    assert TopicCatalog(tmp_path).get("b") is None


def test_topic_catalog_writes_in_the_background_and_coalesces(tmp_path, monkeypatch):
    import threading

    from kraftd.storage import topic_catalog
    from kraftd.storage.background_writes import background_writes

    writers = []
    real = topic_catalog.atomic_write
    monkeypatch.setattr(topic_catalog, "atomic_write",
                        lambda *a: (writers.append(threading.current_thread().name), real(*a)))
    writes = background_writes()
    release = threading.Event()
    writes.submit(lambda: release.wait(10))  # holds the queue while 100 topics are made
    cat = TopicCatalog(tmp_path)
    for i in range(100):
        cat.create(f"t{i}", 1)
    release.set()
    cat.flush()
    assert len(TopicCatalog(tmp_path).all()) == 100
    assert len(writers) == 1 and threading.current_thread().name not in writers


def test_cluster_id_is_generated_once(tmp_path):
    cid = TopicCatalog(tmp_path).cluster_id()
    assert len(cid) == 22 and base64.urlsafe_b64decode(cid + "==")
    assert TopicCatalog(tmp_path).cluster_id() == cid
