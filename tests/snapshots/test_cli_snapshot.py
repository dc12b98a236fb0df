"""`kraftd snapshot list|inspect|verify|create` (create needs the server's /admin/snapshot)."""
import os
import subprocess
import sys

import pytest

from kraftd.cli import main
from kraftd.client import WireClient
from kraftd.storage.snapshots import SnapshotId

from .wire import SNAPSHOT_POLICY, create_topic, put_many, wait_until, write_snapshot


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def kraftd_cli(capsys):
    """Run `kraftd snapshot ARGS` in-process (the subprocess path is covered once, below)."""
    def run(*args):
        capsys.readouterr()
        code = main(["snapshot", *args])
        out = capsys.readouterr()
        return Result(code, out.out, out.err)
    return run


def test_snapshot_is_a_cli_command(data_dir):
    result = subprocess.run([sys.executable, "-m", "kraftd", "snapshot", "verify", str(data_dir / "other-3")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK ")


@pytest.fixture
def data_dir(tmp_path):
    data = tmp_path / "data"
    write_snapshot(data / "kv-0", SnapshotId(10, 1), [(b"a", b"1"), (b"b", b"22")], timestamp=1234)
    write_snapshot(data / "kv-0", SnapshotId(25, 2), [(b"k%03d" % i, b"v" * i) for i in range(100)],
                   timestamp=5678, max_batch_bytes=1000)
    write_snapshot(data / "other-3", SnapshotId(7, 0), [(b"x", b"y")])
    (data / "kv-0" / "00000000000000000030-0000000002.checkpoint.part").write_bytes(b"half")
    (data / "plain-0").mkdir()
    (data / "topics.json").write_text("{}")
    return data


def test_list_shows_every_snapshot_and_leftover_per_partition(data_dir, kraftd_cli):
    result = kraftd_cli("list", "--data-dir", str(data_dir))
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert [(r[0], r[1], r[2]) for r in rows] == [("kv-0", "10", "1"), ("kv-0", "25", "2"), ("kv-0", "-", "-"),
                                                   ("other-3", "7", "0")]
    assert rows[1][3] == str(os.path.getsize(data_dir / "kv-0" / "00000000000000000025-0000000002.checkpoint"))
    assert rows[2][-1] == "(leftover)"


def test_list_one_partition_and_a_missing_one(data_dir, kraftd_cli):
    result = kraftd_cli("list", "--data-dir", str(data_dir), "other-3")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[1:]] == ["other-3"]
    missing = kraftd_cli("list", "--data-dir", str(data_dir), "nope-0")
    assert missing.returncode == 1 and "nope-0" in missing.stderr
    assert kraftd_cli("list", "--data-dir", str(data_dir / "absent")).returncode == 2


def test_inspect_reports_id_size_batches_records_timestamp_and_keys(data_dir, kraftd_cli):
    path = data_dir / "kv-0" / "00000000000000000025-0000000002.checkpoint"
    result = kraftd_cli("inspect", str(path), "--records", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    fields = dict(line.split(": ", 1) for line in lines if ": " in line and not line.startswith("  "))
    assert fields["snapshot_id"] == "end_offset=25 epoch=2"
    assert int(fields["size"]) == os.path.getsize(path)
    assert int(fields["records"]) == 100
    assert int(fields["batches"]) > 3  # header, several data batches (1000-byte limit), footer
    assert fields["last_contained_log_timestamp"] == "5678"
    keys = [line.split()[0] for line in lines if line.startswith("  ")]
    assert keys == ["k000", "k001", "k002"]
    assert "value 1 bytes" in lines[-2]


def test_verify_accepts_good_files_and_fails_on_any_bad_one(data_dir, kraftd_cli):
    good = data_dir / "kv-0" / "00000000000000000010-0000000001.checkpoint"
    ok = kraftd_cli("verify", str(good), str(data_dir / "other-3"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("OK ") == 2 and "2 records" in ok.stdout

    flipped = data_dir / "flipped" / good.name
    flipped.parent.mkdir()
    data = bytearray(good.read_bytes())
    data[80] ^= 0x01  # inside the header batch's CRC-covered part
    flipped.write_bytes(bytes(data))
    torn = data_dir / "torn" / good.name
    torn.parent.mkdir()
    torn.write_bytes(good.read_bytes()[:-10])
    bad = kraftd_cli("verify", str(good), str(flipped), str(torn))
    assert bad.returncode == 1
    assert bad.stdout.count("OK ") == 1 and bad.stdout.count("BAD ") == 2
    assert "CRC" in bad.stdout and "torn" in bad.stdout
    # inspect refuses a corrupt file too
    assert kraftd_cli("inspect", str(flipped)).returncode == 1


def test_create_against_an_unreachable_server_fails_cleanly(kraftd_cli):
    result = kraftd_cli("create", "--server", "http://127.0.0.1:1", "--timeout", "2", "kv", "0")
    assert result.returncode == 2 and "cannot reach" in result.stderr


def test_create_requests_a_snapshot_from_a_running_server(kraftd, kraftd_cli):
    """202 {"requested": true} on a snapshot topic (and a snapshot file appears), 404 otherwise."""
    client = WireClient(kraftd.bootstrap)
    create_topic(client, "kv", 1, SNAPSHOT_POLICY)
    create_topic(client, "plain", 1)
    put_many(client, "kv", 0, [(b"a", b"1"), (b"b", b"2")])
    client.close()
    server = f"http://127.0.0.1:{kraftd.metrics_port}"
    result = kraftd_cli("create", "--server", server, "kv", "0")
    assert result.returncode == 0, result.stderr
    assert "requested" in result.stdout
    wait_until(lambda: list((kraftd.data_dir / "kv-0").glob("*.checkpoint")), 20, "the requested snapshot")
    plain = kraftd_cli("create", "--server", server, "plain", "0")
    assert plain.returncode == 1 and "not a snapshot-policy partition" in plain.stderr
    unknown = kraftd_cli("create", "--server", server, "nope", "0")
    assert unknown.returncode == 1
