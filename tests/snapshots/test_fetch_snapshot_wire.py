"""FetchSnapshot (api 59) against a real server (acceptance item 3).

The server does not take snapshots itself yet, so the snapshots here are written into the
partition directories while the server is stopped; the server loads them at start (a snapshot
beyond the log end restarts the log at it, KIP-630), which is also how a follower's log looks
after it installed a snapshot. What is served is exactly the file on disk.
"""
from kraftd.client import StateReader
from kraftd.protocol import api
from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.storage.snapshots import SnapshotId, snapshot_filename

from .wire import BIG, SMALL, fetch_snapshot, leader_epoch, one_partition


def test_whole_file_in_one_response(served):
    for version in (0, 1):
        p = one_partition(fetch_snapshot(served.client, [("kv", 0, BIG, 0, -1)], version=version), "kv")
        assert p.error_code == 0
        assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == BIG
        assert p.size == len(served.files["kv"]) and p.position == 0
        assert bytes(p.unaligned_records) == served.files["kv"]


def test_chunks_reassemble_to_the_file(served):
    file, chunk, got = served.files["kv"], 7001, bytearray()
    while len(got) < len(file):
        p = one_partition(fetch_snapshot(served.client, [("kv", 0, BIG, len(got), -1)], max_bytes=chunk), "kv")
        assert p.error_code == 0 and p.position == len(got) and p.size == len(file)
        assert 0 < len(p.unaligned_records) <= chunk
        got += p.unaligned_records
    assert bytes(got) == file
    assert len(file) % chunk != 0  # the last chunk was a short one


def test_resume_at_a_position(served):
    file = served.files["kv"]
    for position in (1, 12345, len(file) - 1):
        p = one_partition(fetch_snapshot(served.client, [("kv", 0, BIG, position, -1)], max_bytes=5000), "kv")
        assert p.error_code == 0 and p.position == position
        assert bytes(p.unaligned_records) == file[position:position + 5000]


def _two(served, max_bytes, kv_position=0, kv2_position=0):
    response = fetch_snapshot(served.client, [("kv", 0, BIG, kv_position, -1), ("kv2", 0, SMALL, kv2_position, -1)],
                              max_bytes=max_bytes)
    return one_partition(response, "kv"), one_partition(response, "kv2")


def test_two_partitions_share_max_bytes_evenly(served):
    kv, kv2 = _two(served, 2000)
    assert len(kv.unaligned_records) == len(kv2.unaligned_records) == 1000
    assert bytes(kv.unaligned_records) == served.files["kv"][:1000]
    assert bytes(kv2.unaligned_records) == served.files["kv2"][:1000]
    kv, kv2 = _two(served, 2001, kv_position=50, kv2_position=70)
    assert sorted([len(kv.unaligned_records), len(kv2.unaligned_records)]) == [1000, 1001]
    assert bytes(kv.unaligned_records) == served.files["kv"][50:50 + len(kv.unaligned_records)]
    assert bytes(kv2.unaligned_records) == served.files["kv2"][70:70 + len(kv2.unaligned_records)]


def test_a_small_remainder_leaves_the_rest_to_the_other_partition(served):
    small = len(served.files["kv2"])
    kv, kv2 = _two(served, 4000, kv2_position=small - 300)
    assert bytes(kv2.unaligned_records) == served.files["kv2"][-300:]
    assert bytes(kv.unaligned_records) == served.files["kv"][:3700]


def test_error_partitions_take_no_share_of_the_budget(served):
    response = fetch_snapshot(served.client, [("kv", 0, BIG, 0, -1), ("kv", 0, SnapshotId(5, 5), 0, -1),
                                              ("kv2", 0, SMALL, 10 ** 9, -1)], max_bytes=3000)
    parts = response.topics[0].partitions
    assert [p.error_code for p in parts] == [0, ErrorCode.SNAPSHOT_NOT_FOUND]
    assert len(parts[0].unaligned_records) == 3000 and len(parts[1].unaligned_records) == 0
    assert one_partition(response, "kv2").error_code == ErrorCode.POSITION_OUT_OF_RANGE


def test_snapshot_not_found(served):
    for topic, partition, sid in (("kv", 0, SnapshotId(BIG.end_offset, BIG.epoch + 1)),
                                  ("kv", 0, SnapshotId(BIG.end_offset - 1, BIG.epoch)),
                                  ("kv", 1, BIG),            # the other partition has no snapshot
                                  ("plain", 0, SnapshotId(0, 0))):  # not a snapshot-policy topic
        p = one_partition(fetch_snapshot(served.client, [(topic, partition, sid, 0, -1)]), topic, partition)
        assert p.error_code == ErrorCode.SNAPSHOT_NOT_FOUND, (topic, partition, sid)
        assert len(p.unaligned_records) == 0


def test_position_out_of_range(served):
    size = len(served.files["kv"])
    for position in (-1, size, size + 1):
        p = one_partition(fetch_snapshot(served.client, [("kv", 0, BIG, position, -1)]), "kv")
        assert p.error_code == ErrorCode.POSITION_OUT_OF_RANGE, position
        assert p.size == size and len(p.unaligned_records) == 0


def test_unknown_topic_or_partition(served):
    for topic, partition in (("nope", 0), ("kv", 2), ("kv2", -1)):
        p = one_partition(fetch_snapshot(served.client, [(topic, partition, BIG, 0, -1)]), topic, partition)
        assert p.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (topic, partition)


def test_leader_epoch_fencing_says_who_leads(served):
    epoch = leader_epoch(served.client, "kv")
    assert epoch >= 1
    p = one_partition(fetch_snapshot(served.client, [("kv", 0, BIG, 0, epoch)], max_bytes=10), "kv")
    assert p.error_code == 0 and len(p.unaligned_records) == 10
    for asked, code in ((epoch - 1, ErrorCode.FENCED_LEADER_EPOCH), (epoch + 1, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        for version in (0, 1):
            response = fetch_snapshot(served.client, [("kv", 0, BIG, 0, asked)], version=version)
            p = one_partition(response, "kv")
            assert p.error_code == code
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, epoch)
            assert len(p.unaligned_records) == 0


def test_inconsistent_cluster_id_is_a_top_level_error(served):
    cluster_id = served.client.request(api.METADATA, 12, m.MetadataRequest(topics=[])).cluster_id
    assert cluster_id
    ok = fetch_snapshot(served.client, [("kv", 0, BIG, 0, -1)], max_bytes=10, cluster_id=cluster_id)
    assert ok.error_code == 0 and len(one_partition(ok, "kv").unaligned_records) == 10
    for version in (0, 1):
        bad = fetch_snapshot(served.client, [("kv", 0, BIG, 0, -1)], cluster_id="not-" + cluster_id,
                             version=version)
        assert bad.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
        assert bad.topics == []


def test_state_reader_reassembles_the_file_and_reads_the_tail(served, tmp_path):
    with StateReader(served.bootstrap, "kv", 0, tmp_path / "state", chunk_bytes=3000) as reader:
        reader.sync(timeout=30)
        assert reader.snapshot_id == BIG
        assert (tmp_path / "state" / snapshot_filename(BIG)).read_bytes() == served.files["kv"]
        assert not list((tmp_path / "state").glob("*.part"))
        assert reader.state == served.kv_state
