"""replica_logs reads replicas' segment files through the shared offline scanner
(kraftd.storage.segment_files, as `kraftd verify` does): records in offset order, and a CRC
mismatch, a torn tail or a batch starting below its predecessor's end noted at its offset."""
import os

from kraftd.protocol.records import build_batch, iter_batch_headers, patch_base_offset
from tests.cluster.replica_logs import first_difference, log_end_offset, read_replica_log
from tests.test_cli_verify import NAME, TOPIC, make_partition, segments


def test_records_of_every_segment_in_offset_order(tmp_path):
    make_partition(tmp_path / "d")
    log = read_replica_log(tmp_path / "d", TOPIC, 0, node=1)
    assert [e.offset for e in log.entries] == list(range(41)) and log.problems == []
    assert log.entries[0].control and log.entries[5].key == b"key-5" and log.entries[30].leader_epoch == 2
    assert log.end_offset == log_end_offset(tmp_path / "d", TOPIC, 0) == 41


def test_a_crc_mismatch_ends_the_segment_and_is_noted(tmp_path):
    make_partition(tmp_path / "d")
    seg = segments(tmp_path / "d")[-1]
    position, header = list(iter_batch_headers(seg.read_bytes()))[1]
    data = bytearray(seg.read_bytes())
    data[position + header.size - 1] ^= 1
    seg.write_bytes(bytes(data))
    log = read_replica_log(tmp_path / "d", TOPIC, 0)
    assert log.end_offset == header.base_offset
    assert log.problems == [(header.base_offset, f"{seg.name}: CRC mismatch in batch at offset {header.base_offset} "
                                                 f"(position {position})")]
    assert first_difference([read_replica_log(tmp_path / "d", TOPIC, 0, node=1),
                             read_replica_log(tmp_path / "d", TOPIC, 0, node=2)], 41).startswith("replicas end below")


def test_a_torn_tail_and_a_batch_going_backwards_are_noted(tmp_path):
    log = make_partition(tmp_path / "d", close=False)
    log.append_as_leader(bytearray(build_batch([(b"late", b"x" * 100, [], 5000)])), 2, now_ms=5000)
    last = segments(tmp_path / "d")[-1]
    os.truncate(last, last.stat().st_size - 10)
    seg = segments(tmp_path / "d")[0]
    position, header = list(iter_batch_headers(seg.read_bytes()))[2]
    data = bytearray(seg.read_bytes())
    patch_base_offset(data, position, header.base_offset - 1)
    seg.write_bytes(bytes(data))
    problems = read_replica_log(tmp_path / "d", TOPIC, 0).problems
    assert problems[0] == (header.base_offset - 1, f"{seg.name}: batch at position {position} starts at offset "
                                                   f"{header.base_offset - 1}, below the previous batch's end "
                                                   f"{header.base_offset}")
    assert problems[1][0] == 41 and "torn batch at position" in problems[1][1], problems
    assert (tmp_path / "d" / NAME).is_dir()
