"""Acceptance item 5: crashes (kill -9) while a snapshot is downloaded or written.

A StateReader killed mid-download leaves only its `.part` (never promoted); a new one resumes at the
`.part`'s size and ends with the server's exact bytes and state. A server killed while writing a
snapshot leaves a `.part` that startup removes; no bad `.checkpoint` exists; the state is intact.
"""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kraftd.client import WireClient
from kraftd.storage.snapshots import SnapshotId, snapshot_filename, verify_snapshot

from .wire import (SNAPSHOT_POLICY, RecordingStateReader, create_topic, put_many,
                   random_updates, wait_until, write_snapshot)

ROOT = Path(__file__).resolve().parents[2]
SID = SnapshotId(70_000, 1)

_SLOW_READER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from tests.snapshots.wire import RecordingStateReader

    class SlowReader(RecordingStateReader):
        def _fetch_snapshot_chunk(self, sid, position):
            time.sleep(0.002)  # leaves the test time to kill us mid-download
            return super()._fetch_snapshot_chunk(sid, position)

    SlowReader({bootstrap!r}, "kv", 0, {directory!r}, chunk_bytes=8192).sync(timeout=120)
    print("DONE", flush=True)
""")


def test_state_reader_killed_mid_download_resumes_at_its_part(kraftd_factory, tmp_path):
    server = kraftd_factory()
    client = WireClient(server.bootstrap)
    create_topic(client, "kv", 1, SNAPSHOT_POLICY)
    client.close()
    server.stop()
    rng = random.Random(5)
    model = {b"key-%06d" % i: rng.randbytes(120) for i in range(60_000)}
    path = write_snapshot(server.data_dir / "kv-0", SID, model.items())
    server_bytes = path.read_bytes()
    assert len(server_bytes) > 7 << 20
    server.start()
    client = WireClient(server.bootstrap)
    put_many(client, "kv", 0, random_updates(rng, 2000, 70_000), per_batch=500, model=model)
    client.close()

    directory = tmp_path / "reader"
    directory.mkdir()
    part = directory / (snapshot_filename(SID) + ".part")
    script = _SLOW_READER.format(root=str(ROOT), bootstrap=server.bootstrap, directory=str(directory))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        def far_enough():
            assert proc.poll() is None, proc.communicate()
            assert not list(directory.glob("*.checkpoint")), "a snapshot was promoted before it was complete"
            return part.exists() and part.stat().st_size >= len(server_bytes) // 3
        wait_until(far_enough, 60, "the download to pass a third of the snapshot", interval=0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert sorted(p.name for p in directory.iterdir()) == [part.name]  # only the .part: nothing promoted
    left = part.read_bytes()
    assert 0 < len(left) < len(server_bytes)
    assert server_bytes.startswith(left)

    with RecordingStateReader(server.bootstrap, "kv", 0, directory, chunk_bytes=1 << 20) as reader:
        assert reader.snapshot_id is None  # nothing local to load at start
        reader.sync(timeout=60)
        assert reader.chunks[0] == (SID, len(left))  # resumed where the crash left off
        assert all(sid == SID for sid, _ in reader.chunks)
        assert (directory / snapshot_filename(SID)).read_bytes() == server_bytes
        assert not part.exists()
        assert reader.snapshot_id == SID
        assert reader.state == model

    # A reader started on the promoted snapshot loads it locally and downloads nothing.
    with RecordingStateReader(server.bootstrap, "kv", 0, directory) as again:
        assert again.snapshot_id == SID
        again.sync(timeout=30)
        assert again.chunks == [] and again.state == model


# Server-side generation crash: needs the server to run snapshot jobs.
BIG_POLICY = {**SNAPSHOT_POLICY, "metadata.log.max.record.bytes.between.snapshots": str(1 << 30),
              "metadata.snapshot.min.changed_records.ratio": "0", "segment.bytes": str(16 << 20)}


def test_server_killed_while_writing_a_snapshot(kraftd_factory):
    server = kraftd_factory()
    client = WireClient(server.bootstrap)
    create_topic(client, "kv", 1, BIG_POLICY)
    rng = random.Random(11)
    model: dict = {}
    # ~25 MB of state: writing its snapshot takes long enough (~1 s) to be caught in the act.
    pairs = [(b"key-%07d" % i, rng.randbytes(400)) for i in range(60_000)]
    put_many(client, "kv", 0, pairs, per_batch=1000, model=model)
    put_many(client, "kv", 0, random_updates(rng, 5000, 60_000, value_size=40), per_batch=1000, model=model)
    client.close()
    directory = server.data_dir / "kv-0"
    from .wire import http
    status, _ = http("POST", f"http://127.0.0.1:{server.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    part = wait_until(lambda: next(directory.glob("*.checkpoint.part"), None), 30, "the snapshot's .part",
                      interval=0.002)
    server.kill()
    assert part.exists() and not list(directory.glob("*.checkpoint")), "the crash came too late"

    server.start()
    assert not part.exists()
    assert any("removed leftover snapshot file" in line and part.name in line for line in server.log_lines)
    for checkpoint in directory.glob("*.checkpoint"):
        verify_snapshot(checkpoint)  # nothing half-written under a final name
    with RecordingStateReader(server.bootstrap, "kv", 0, server.data_dir.parent / "reader") as reader:
        reader.sync(timeout=60)
        assert reader.state == model
    # The interrupted snapshot can be taken again, and then it is complete and valid.
    status, _ = http("POST", f"http://127.0.0.1:{server.metrics_port}/admin/snapshot?topic=kv&partition=0")
    assert status == 202
    (done,) = wait_until(lambda: list(directory.glob("*.checkpoint")), 60, "the snapshot after the restart")
    assert verify_snapshot(done).records == len(model)
