"""meta.properties (issue 25, KIP-853): every data dir gets a directory id when first written,
keeps it across restarts, an older dir gets one on its first start, and a dir of another node
is refused."""
from __future__ import annotations

import uuid

import pytest

from kraftd.quorum.node_config import NodeConfig
from kraftd.server.data_dir_startup import prepare_data_dir
from kraftd.storage.meta_properties import (META_PROPERTIES, MetaPropertiesError, ensure_meta_properties,
                                            read_meta_properties, uuid_from_kafka, uuid_to_kafka)


def _start(data_dir, node_id=1):
    startup = prepare_data_dir(NodeConfig(node_id=node_id, data_dir=str(data_dir)), 0)
    startup.lock.release()
    return startup.meta


def test_a_new_dir_gets_a_directory_id_that_it_keeps(tmp_path):
    first = _start(tmp_path / "d")
    assert first.created and first.node_id == 1 and first.directory_id.int >= 100
    text = (tmp_path / "d" / META_PROPERTIES).read_text()
    assert "version=1" in text and "node.id=1" in text and f"directory.id={uuid_to_kafka(first.directory_id)}" in text
    again = _start(tmp_path / "d")
    assert not again.created and again.directory_id == first.directory_id


def test_two_dirs_get_different_ids(tmp_path):
    assert _start(tmp_path / "a").directory_id != _start(tmp_path / "b").directory_id


def test_a_dir_written_before_directory_ids_gets_one(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    (d / "quorum-state").write_text("{}")  # state from an older kraftd
    meta = _start(d)
    assert meta.created and read_meta_properties(d).directory_id == meta.directory_id
    assert (d / "quorum-state").read_text() == "{}"


def test_another_nodes_dir_is_refused(tmp_path):
    _start(tmp_path / "d", node_id=1)
    with pytest.raises(MetaPropertiesError, match="belongs to node 1, and this is node 2"):
        _start(tmp_path / "d", node_id=2)
    # The refusal released the lock: the right node still starts on it.
    assert _start(tmp_path / "d", node_id=1).node_id == 1


@pytest.mark.parametrize("text", ["version=1\nnode.id=1\n", "version=0\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n",
                                  "version=1\nnode.id=x\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n",
                                  "version=1\nnode.id=1\ndirectory.id=not-a-uuid\n"])
def test_an_unreadable_file_is_an_error_not_a_new_identity(tmp_path, text):
    (tmp_path / META_PROPERTIES).write_text(text)
    with pytest.raises(MetaPropertiesError, match="cannot be read"):
        ensure_meta_properties(tmp_path, 1)
    assert (tmp_path / META_PROPERTIES).read_text() == text


def test_kafka_uuid_text_round_trips():
    value = uuid.uuid4()
    text = uuid_to_kafka(value)
    assert len(text) == 22 and "=" not in text
    assert uuid_from_kafka(text) == value
    # Kafka's form of a known UUID (base64url of its bytes, unpadded).
    assert uuid_to_kafka(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
