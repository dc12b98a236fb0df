"""replication-offset-checkpoint: Kafka's text format, written atomically, read strictly."""
import pytest

from kraftd.storage.replication_offset_checkpoint import (CheckpointFormatError, read_replication_offsets,
                                                          write_replication_offsets)


def test_round_trip_in_kafkas_format(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    write_replication_offsets(path, {("events", 1): 7, ("__cluster_metadata", 0): 42, ("events", 0): 1042})
    assert path.read_text() == "0\n3\n__cluster_metadata 0 42\nevents 0 1042\nevents 1 7\n"
    assert read_replication_offsets(path) == {("events", 0): 1042, ("events", 1): 7, ("__cluster_metadata", 0): 42}
    assert not (tmp_path / "replication-offset-checkpoint.tmp").exists()


def test_an_empty_checkpoint(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    write_replication_offsets(path, {})
    assert read_replication_offsets(path) == {}


@pytest.mark.parametrize("text, line", [
    ("1\n0\n", 1),                           # unknown version
    ("", 1),                                 # empty file
    ("0\nx\n", 2),                           # no count
    ("0\n2\nevents 0 5\n", 2),               # fewer entries than announced
    ("0\n1\nevents zero 5\n", 3),            # not a number
    ("0\n1\nevents 0\n", 3),                 # a field missing
    ("0\n2\nevents 0 5\nevents 0 6\n", 4),   # the same partition twice
])
def test_malformed_files_name_the_line(tmp_path, text, line):
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointFormatError) as info:
        read_replication_offsets(path)
    assert info.value.line == line
