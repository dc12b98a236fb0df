"""`kraftd quorum force-leader` on data dirs made here (the whole recovery with real processes
and clients is tests/cluster/test_force_leader.py), and what a node does at startup with a
data dir whose remembered voters differ from --voters."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from kraftd.server.data_dir_startup import prepare_data_dir
from kraftd.quorum.node_config import NodeConfig, VoterSetMismatch
from kraftd.quorum.raft.election_state import ElectionState
from kraftd.server.election_state_file import FileElectionStore
from kraftd.storage import TopicCatalog
from kraftd.storage.data_dir_lock import DataDirLock
from kraftd.storage.forced_recovery import read_forced_recovery

SPEC = {1: ("127.0.0.1", 9001), 2: ("127.0.0.1", 9002), 3: ("127.0.0.1", 9003)}


def _node_dir(path, node_id: int = 1):
    catalog = TopicCatalog(path)
    catalog.create("__cluster_metadata", 1, {"cleanup.policy": "snapshot"}, topic_id=uuid.UUID(int=1),
                   assignments=[[1, 2, 3]])
    catalog.create("events", 2, {}, assignments=[[1, 2, 3], [2, 3, 4]])
    catalog.flush()
    FileElectionStore(path / "quorum-state").write({("__cluster_metadata", 0): ElectionState(7, 2, 2),
                                                    ("events", 0): ElectionState(4, 3, 3)})
    return path


def _force(path, spec: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftd", "quorum", "force-leader", "--data-dir", str(path),
                           "--voters", spec, *extra], capture_output=True, text=True, timeout=60)


def test_force_leader_rewrites_voters_epochs_and_leaves_the_recovery_file(tmp_path):
    d = _node_dir(tmp_path / "n1")
    done = _force(d, "1@127.0.0.1:9001")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"node_id": 1, "voters": [1], "lost": [2, 3],
                                                        "groups": 2, "epoch": 1007}
    catalog = TopicCatalog(d)
    assert catalog.get("__cluster_metadata").assignments == ((1,),)
    # Partition 1 is not hosted here; its list loses the lost nodes all the same (the image will too).
    assert catalog.get("events").assignments == ((1,), (4,))
    states = FileElectionStore(d / "quorum-state").load()
    assert states[("__cluster_metadata", 0)] == ElectionState(1007)  # no leader, no vote, +1000
    assert states[("events", 0)] == ElectionState(1004)
    assert read_forced_recovery(d).lost == (2, 3)
    assert "lost for good: [2, 3]" in done.stderr and "events-0" in done.stderr


@pytest.mark.parametrize("spec, extra, why", [
    ("4@127.0.0.1:9004", (), "cannot tell which node"),
    ("1@127.0.0.1:9001,2@127.0.0.1:9002", (), "cannot tell which node"),
    ("1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003", ("--node-id", "1"), "nothing was lost"),
    ("2@127.0.0.1:9002", ("--node-id", "1"), "not in SPEC"),
    ("1@nowhere", (), "--voters"),
])
def test_force_leader_refuses_what_it_cannot_do(tmp_path, spec, extra, why):
    d = _node_dir(tmp_path / "n1")
    before = (d / "topics.json").read_bytes()
    done = _force(d, spec, *extra)
    assert done.returncode != 0 and why in done.stderr, done.stderr
    assert (d / "topics.json").read_bytes() == before and read_forced_recovery(d) is None


def test_force_leader_refuses_a_data_dir_a_live_process_holds(tmp_path):
    d = _node_dir(tmp_path / "n1")
    with DataDirLock(d):
        done = _force(d, "1@127.0.0.1:9001")
    assert done.returncode != 0 and "live process" in done.stderr
    assert read_forced_recovery(d) is None


def test_a_lost_voter_sets_its_data_aside_and_any_other_voter_change_is_refused(tmp_path):
    lost = _node_dir(tmp_path / "n2")
    (lost / "events-0").mkdir()
    (lost / "events-0" / "00000000000000000000.log").write_bytes(b"diverged")
    startup = prepare_data_dir(NodeConfig(node_id=2, data_dir=str(lost), voters={1: SPEC[1]}), now_ms=123)
    startup.lock.release()
    assert startup.set_aside_to == lost / "discarded-123" and startup.rejoining
    assert (lost / "discarded-123" / "events-0" / "00000000000000000000.log").read_bytes() == b"diverged"
    assert sorted(p.name for p in lost.iterdir()) == [".lock", "discarded-123", "meta.properties", "rejoined-after-disk-loss"]

    kept = _node_dir(tmp_path / "n1")  # a former voter still in --voters, never forced
    with pytest.raises(VoterSetMismatch, match="force-leader"):
        prepare_data_dir(NodeConfig(node_id=1, data_dir=str(kept), voters={1: SPEC[1]}), now_ms=0)
    assert (kept / "topics.json").exists() and not any(p.name.startswith("discarded-") for p in kept.iterdir())


def test_a_deletion_interrupted_by_a_crash_is_finished_at_startup(tmp_path):
    from kraftd.server.data_dir_startup import finish_deletions
    from kraftd.storage import TopicCatalog

    catalog = TopicCatalog(tmp_path)
    catalog.create("gone", 2)
    catalog.create("kept", 1)
    catalog.flush()
    (tmp_path / "gone-0.0123abcd-delete").mkdir()  # renamed by FileLog.discard, then the crash
    (tmp_path / "gone-1").mkdir()
    (tmp_path / "kept-0").mkdir()

    assert finish_deletions(tmp_path) == ["gone-0.0123abcd-delete"]
    assert [t.name for t in TopicCatalog(tmp_path).all()] == ["kept"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]


def test_force_leader_records_spec_as_the_metadata_logs_voters(tmp_path):
    """Once the quorum recorded its voters (KIP-853) the log's VotersRecord is the set, not the
    catalog: SPEC goes into the log too, or the survivor would count the lost voters still (found
    on real processes: tests/cluster/test_group_unclean_recovery.py hung leaderless)."""
    from kraftd.protocol import messages
    from kraftd.quorum.raft.voter_set import Voter, VoterSet, voters_batch
    from kraftd.storage import FileLog

    d = _node_dir(tmp_path / "n1")
    recorded = VoterSet(tuple(Voter(i, uuid.UUID(int=100 + i), "127.0.0.1", 9000 + i) for i in (1, 2, 3)))
    log = FileLog(d / "__cluster_metadata-0")
    log.append_as_leader(voters_batch(recorded, 7, 0), 7, now_ms=0)
    log.flush()
    log.close()
    done = _force(d, "1@127.0.0.1:9001")
    assert done.returncode == 0, done.stderr
    log = FileLog(d / "__cluster_metadata-0")
    try:
        record, _ = messages.VotersRecord.decode(memoryview(log.voter_sets.latest()[1]), 0, 0)
    finally:
        log.close()
    assert VoterSet.from_record(record) == VoterSet((recorded.get(1),))  # its directory and listener kept
