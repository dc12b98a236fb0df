"""`kraftd verify` on a compacted topic: a cleaned log's gaps are not problems, and replicas,
which clean on their own, are compared by the latest value of each key below the HW."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from kraftd.protocol.records import build_batch
from kraftd.storage import FileLog
from kraftd.storage.replication_offset_checkpoint import write_replication_offsets

from .test_cli_verify import only, verify

TOPIC, NAME = "kv", "kv-0"
NOW = 1_700_000_000_000


def catalog(data_dir: Path, policy: str = "compact") -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "topics": {TOPIC: {"topic_id": str(uuid.UUID(int=7)), "partitions": 1,
                                             "configs": {"cleanup.policy": policy}}}}
    (data_dir / "topics.json").write_text(json.dumps(doc))


def updates(rounds: int = 30, change=None) -> list[bytearray]:
    out = []
    for i in range(rounds):
        pairs = [(b"key-%d" % ((i + j) % 7), b"v%d-%d" % (i, j)) for j in range(3)]
        if change is not None:
            pairs = [change(i, k, v) for k, v in pairs]
        out.append(bytearray(build_batch([(k, v, None, NOW - 1000) for k, v in pairs])))
    return out


def replica(data_dir: Path, batches, *, clean: bool, hw: int | None = None, policy: str = "compact") -> FileLog:
    catalog(data_dir, policy)
    log = FileLog(data_dir / NAME, segment_bytes=400, compacted=True)
    for b in batches:
        log.append_as_leader(b, 1, now_ms=NOW)
    log.roll()
    log.append_as_leader(bytearray(build_batch([(b"tail", b"x", None, NOW)])), 1, now_ms=NOW)
    log.flush()
    if clean:
        range_ = log.cleanable(max_offset=log.log_end_offset, now_ms=NOW, min_lag_ms=0)
        plan = log.plan_cleaning(range_, now_ms=NOW, delete_retention_ms=0, max_keys=1000, io_bytes_per_second=None)
        plan.run()
        assert log.commit_cleaning(plan)
    end = log.log_end_offset
    log.close()
    write_replication_offsets(data_dir / "replication-offset-checkpoint", {(TOPIC, 0): end if hw is None else hw})
    return log


def test_a_cleaned_replica_and_an_uncleaned_one_agree(tmp_path, capsys):
    replica(tmp_path / "a", updates(), clean=True)
    replica(tmp_path / "b", updates(), clean=False)
    status, findings, _ = verify(capsys, tmp_path / "a", tmp_path / "b")
    assert status == 0 and findings == []


def test_a_different_latest_value_below_the_hw_is_a_finding_naming_the_key(tmp_path, capsys):
    replica(tmp_path / "a", updates(), clean=True)
    replica(tmp_path / "b", updates(change=lambda i, k, v: (k, b"other") if (i, k) == (29, b"key-1") else (k, v)),
            clean=False)
    status, findings, _ = verify(capsys, tmp_path / "a", tmp_path / "b")
    line = only(findings)
    assert status == 1 and "[replicas]" in line and "differ below the high watermark" in line
    assert "first 'key-1'" in line and "value 'other'" in line and "value 'v29-" in line


def test_a_key_written_again_past_the_hw_is_not_compared(tmp_path, capsys):
    # The last batch (offsets 87..89) differs, but the HW checkpoint stops before it.
    changed = updates(change=lambda i, k, v: (k, b"other") if i == 29 else (k, v))
    replica(tmp_path / "a", updates(), clean=True, hw=87)
    replica(tmp_path / "b", changed, clean=False, hw=87)
    status, findings, _ = verify(capsys, tmp_path / "a", tmp_path / "b")
    assert status == 0 and findings == []


def test_the_gaps_of_a_cleaned_log_are_findings_only_where_the_topic_is_not_compacted(tmp_path, capsys):
    replica(tmp_path / "a", updates(), clean=True)
    status, findings, _ = verify(capsys, tmp_path / "a")
    assert status == 0 and findings == []
    catalog(tmp_path / "a", policy="delete")
    status, findings, _ = verify(capsys, tmp_path / "a")
    assert status == 1 and any("[segment]" in line for line in findings)
