"""StateReader against a real server: snapshot download edge cases (crash windows, replaced snapshots)."""
from kraftd.storage.snapshots import SnapshotId, snapshot_filename

from .wire import BIG, RecordingStateReader


def _check(served, directory, reader):
    assert reader.state == served.kv_state
    assert reader.snapshot_id == BIG
    assert (directory / snapshot_filename(BIG)).read_bytes() == served.files["kv"]
    assert not list(directory.glob("*.part"))


def test_sync_reads_the_log_tail_after_installing_a_snapshot(served, tmp_path):
    # Regression: sync() used to stop right after the install (no high watermark known yet).
    with RecordingStateReader(served.bootstrap, "kv", 0, tmp_path, chunk_bytes=50_000) as reader:
        reader.sync(timeout=30)
        _check(served, tmp_path, reader)
        assert reader.offset >= BIG.end_offset + 3  # the three tail records were applied
        assert [p for _, p in reader.chunks] == [0, 50_000, 100_000, 150_000, 200_000][:len(reader.chunks)]


def test_a_complete_part_left_before_its_rename_is_promoted(served, tmp_path):
    # A crash between the last chunk's fsync and the rename: position == size on resume.
    (tmp_path / (snapshot_filename(BIG) + ".part")).write_bytes(served.files["kv"])
    with RecordingStateReader(served.bootstrap, "kv", 0, tmp_path, chunk_bytes=4096) as reader:
        reader.sync(timeout=30)
        _check(served, tmp_path, reader)
        assert reader.chunks == [(BIG, len(served.files["kv"]))]


def test_a_part_longer_than_the_snapshot_is_downloaded_again(served, tmp_path):
    (tmp_path / (snapshot_filename(BIG) + ".part")).write_bytes(served.files["kv"] + b"junk")
    with RecordingStateReader(served.bootstrap, "kv", 0, tmp_path, chunk_bytes=100_000) as reader:
        reader.sync(timeout=30)
        _check(served, tmp_path, reader)
        assert [p for _, p in reader.chunks] == [len(served.files["kv"]) + 4, 0, 100_000, 200_000]


def test_a_stale_part_of_another_snapshot_is_removed(served, tmp_path):
    stale = tmp_path / (snapshot_filename(SnapshotId(10, 0)) + ".part")
    stale.write_bytes(b"x" * 1000)
    with RecordingStateReader(served.bootstrap, "kv", 0, tmp_path, chunk_bytes=1 << 20) as reader:
        reader.sync(timeout=30)
        _check(served, tmp_path, reader)
        assert not stale.exists()


def test_a_snapshot_replaced_mid_download_is_fetched_again(served, tmp_path):
    with RecordingStateReader(served.bootstrap, "kv", 0, tmp_path, chunk_bytes=20_000, replace_at=3) as reader:
        reader.sync(timeout=30)
        _check(served, tmp_path, reader)
        positions = [p for _, p in reader.chunks]
        # 0, 20k, 40k, then 60k answered SNAPSHOT_NOT_FOUND: the .part went, a new Fetch, from 0 again
        assert positions[:5] == [0, 20_000, 40_000, 60_000, 0]
        assert positions[-1] + 20_000 >= len(served.files["kv"])
