"""`kraftd verify` over crafted data dirs: a clean dir passes; each kind of damage is found in the
file, partition, offset and byte position where it was planted; replicas that differ below the
checkpointed high watermark are reported at the first differing offset, and only there."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kraftd.cli import main
from kraftd.protocol.control_records import ControlType, build_control_batch
from kraftd.protocol.records import build_batch, iter_batch_headers, patch_base_offset
from kraftd.storage import FileLog
from kraftd.storage.replication_offset_checkpoint import write_replication_offsets
from kraftd.storage.snapshots import SnapshotId, SnapshotWriter

TOPIC = "events"
NAME = f"{TOPIC}-0"
BATCHES = 40  # one LeaderChange batch, then 40 data batches: offsets 0..40 (or more per batch)


def make_partition(data_dir: Path, *, records_per_batch: int = 1, hw: int | None = None, close: bool = True,
                   value=lambda offset: b"value-%d" % offset, batches: int = BATCHES) -> FileLog:
    """A partition written the way the server writes it: small segments (several sealed, each with
    index entries), epoch 1 then epoch 2 from the 21st data batch on, and (hw) a HW checkpoint."""
    log = FileLog(data_dir / NAME, segment_bytes=1200, index_interval_bytes=200)
    log.append_as_leader(bytearray(build_control_batch(ControlType.LEADER_CHANGE, b"\0\0", base_offset=0,
                                                       timestamp=5, leader_epoch=1)), 1, now_ms=5)
    for i in range(batches):
        first = log.log_end_offset
        records = [(b"key-%d" % (first + j), value(first + j), [], 1000 + first + j) for j in range(records_per_batch)]
        log.append_as_leader(bytearray(build_batch(records)), 1 if i < 20 else 2, now_ms=1000 + first)
    log.flush()
    if close:
        log.close()
    if hw is not None:
        write_replication_offsets(data_dir / "replication-offset-checkpoint", {(TOPIC, 0): hw})
    return log


def segments(data_dir: Path) -> list[Path]:
    return sorted((data_dir / NAME).glob("*.log"))


def batches(path: Path) -> list[tuple[int, object]]:
    return list(iter_batch_headers(path.read_bytes()))


def flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x40
    path.write_bytes(bytes(data))


def verify(capsys, *dirs, extra=()) -> tuple[int, list[str], list[str]]:
    """(exit status, FINDING lines, NOTE lines)."""
    status = main(["verify", *extra, "--data-dir", *map(str, dirs)])
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(f"{sum(line.startswith('FINDING') for line in out)} findings"), out[-1]
    findings = [line for line in out if line.startswith("FINDING")]
    return status, findings, [line for line in out if line.startswith("NOTE")]


def only(lines: list[str]) -> str:
    assert len(lines) == 1, "\n".join(lines)
    return lines[0]


# -- one data dir ------------------------------------------------------------------------------------

def test_a_clean_data_dir_has_no_findings_and_exits_0(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    assert len(segments(tmp_path / "d")) >= 3
    status, findings, notes = verify(capsys, tmp_path / "d")
    assert (status, findings, notes) == (0, [], [])


def test_verify_is_a_cli_command(tmp_path):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    ok = subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir", str(tmp_path / "d")],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("0 findings, 0 notes: 1 data dirs, 1 partitions")
    flip(segments(tmp_path / "d")[0], -1)
    bad = subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "FINDING [segment]" in bad.stdout
    missing = subprocess.run([sys.executable, "-m", "kraftd", "verify", "--data-dir", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "not a directory" in missing.stderr


def test_a_flipped_byte_in_record_data_is_a_crc_finding_at_its_batch(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    seg = segments(tmp_path / "d")[1]  # a sealed segment in the middle
    position, header = batches(seg)[3]
    flip(seg, position + header.size - 2)  # inside the last record's value
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    line = only(findings)
    assert line.startswith(f"FINDING [segment] {seg}, partition {NAME}, offset {header.base_offset}, "
                           f"position {position}: CRC mismatch in batch at offset {header.base_offset}")
    # After a clean shutdown startup trusts sealed segments: it would not notice. So says the finding.
    assert line.endswith("startup does not rescan this segment (clean shutdown), so the node would keep and serve it")
    report = FileLog(tmp_path / "d" / NAME).recovery_report
    assert report.segments_scanned == () and report.truncated_segment is None


def test_the_audit_and_recovery_agree_on_where_a_segment_goes_bad(tmp_path, capsys):
    make_partition(tmp_path / "d", close=False, hw=None)  # a crash: the whole log is scanned at open
    seg = segments(tmp_path / "d")[-1]
    position, header = batches(seg)[2]
    flip(seg, position + header.size - 1)
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1 and f"offset {header.base_offset}, position {position}: CRC mismatch" in only(findings)
    assert f"recovery keeps the first {position} bytes and truncates the other" in only(findings)
    report = FileLog(tmp_path / "d" / NAME).recovery_report
    assert (report.truncated_segment, report.truncated_at_position) == (int(seg.stem), position)


def test_a_bad_index_entry_is_found_with_its_entry_position(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    index = segments(tmp_path / "d")[1].with_suffix(".index")
    raw = bytearray(index.read_bytes())
    assert len(raw) >= 16
    raw[12:16] = (int.from_bytes(raw[12:16], "big") + 7).to_bytes(4, "big")  # entry 1's position, off by 7
    index.write_bytes(bytes(raw))
    rel = int.from_bytes(raw[8:12], "big")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    line = only(findings)
    offset = int(index.stem) + rel
    assert line.startswith(f"FINDING [index] {index}, partition {NAME}, offset {offset}, position 8: "
                           f"entry 1 maps offset {offset} to segment position")
    assert "points where no batch starts" in line


def test_a_time_index_entry_naming_the_wrong_batch_is_found(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    timeindex = segments(tmp_path / "d")[0].with_suffix(".timeindex")
    raw = bytearray(timeindex.read_bytes())
    raw[8:12] = (int.from_bytes(raw[8:12], "big") + 1000).to_bytes(4, "big")  # entry 0's offset
    timeindex.write_bytes(bytes(raw))
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert findings[0].startswith(f"FINDING [timeindex] {timeindex}, partition {NAME}, offset 1003, position 0: "
                                  "entry 0 maps timestamp 1003 to offset 1003 but no batch starts at that offset")


@pytest.mark.parametrize("shift, kind", [(+5, "gap"), (-3, "backwards")])
def test_an_offset_gap_or_a_batch_out_of_order_is_found(tmp_path, capsys, shift, kind):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    seg = segments(tmp_path / "d")[1]
    position, header = batches(seg)[2]
    data = bytearray(seg.read_bytes())
    patch_base_offset(data, position, header.base_offset + shift)  # outside the CRC: only offsets tell
    seg.write_bytes(bytes(data))
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    first = findings[0]
    assert first.startswith(f"FINDING [segment] {seg}, partition {NAME}, offset {header.base_offset + shift}, "
                            f"position {position}: batch at position {position} starts at offset "
                            f"{header.base_offset + shift}")
    assert ("are missing" if kind == "gap" else "below the previous batch's end") in first


def test_a_segment_named_for_the_wrong_offset_is_found(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    seg = segments(tmp_path / "d")[-1]
    base = int(seg.stem)
    for suffix in (".log", ".index", ".timeindex"):
        seg.with_suffix(suffix).rename(seg.parent / f"{base + 2:020d}{suffix}")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert f"offset {base + 2}, position 0: the segment is named for offset {base + 2} but the previous segment " \
           f"ends at offset {base}" in findings[0]


def test_a_corrupt_leader_epoch_checkpoint_names_the_line(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    checkpoint = tmp_path / "d" / NAME / "leader-epoch-checkpoint"
    assert checkpoint.read_text() == "0\n2\n1 0\n2 21\n"
    checkpoint.write_text("0\n2\n1 0\n2 twenty-one\n")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert only(findings) == (f"FINDING [leader-epoch-checkpoint] {checkpoint}, partition {NAME}, position 8: "
                              "line 4: '2 twenty-one' is not 'epoch start-offset'")


def test_a_leader_epoch_checkpoint_whose_epochs_go_backwards(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    checkpoint = tmp_path / "d" / NAME / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n3\n1 0\n3 10\n2 21\n")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert only(findings) == (f"FINDING [leader-epoch-checkpoint] {checkpoint}, partition {NAME}, offset 21, "
                              "position 13: line 5: entry (epoch 2, start offset 21) does not come after (epoch 3, "
                              "start offset 10): epochs and start offsets must both increase")


def test_a_leader_epoch_checkpoint_that_disagrees_with_the_batches(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    checkpoint = tmp_path / "d" / NAME / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n2\n1 0\n2 25\n")  # epoch 2 starts at 21 in the batches
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    line = only(findings)
    assert f"{checkpoint}, partition {NAME}, offset 21: the batch at offset 21" in line
    assert "has leader epoch 2, the checkpoint gives epoch 1 for it" in line


def test_leader_epochs_going_backwards_in_the_batches(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    seg = segments(tmp_path / "d")[-1]
    position, header = batches(seg)[-1]
    assert header.partition_leader_epoch == 2
    data = bytearray(seg.read_bytes())
    data[position + 12:position + 16] = (1).to_bytes(4, "big")  # outside the CRC
    seg.write_bytes(bytes(data))
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert any(f"offset {header.base_offset}, position {position}: batch {header.base_offset}..{header.last_offset} "
               f"has leader epoch 1, below epoch 2" in line for line in findings), findings


def _snapshot(tmp_path) -> Path:
    writer = SnapshotWriter(tmp_path / "d" / NAME, SnapshotId(30, 2), last_contained_log_timestamp=1030,
                            max_batch_bytes=64)
    writer.append_many((b"k%d" % i, b"v%d" % i) for i in range(10))
    return Path(writer.freeze())


def test_a_clean_snapshot_passes(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    _snapshot(tmp_path)
    assert verify(capsys, tmp_path / "d") == (0, [], [])


def test_a_corrupt_snapshot_is_a_crc_finding_at_its_batch(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    path = _snapshot(tmp_path)
    position, header = batches(path)[2]
    flip(path, position + header.size - 1)
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert only(findings).startswith(f"FINDING [snapshot] {path}, partition {NAME}, offset {header.base_offset}, "
                                     f"position {position}: snapshot 30-2: CRC mismatch")


def test_a_truncated_snapshot(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    path = _snapshot(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])  # torn inside the footer batch
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1 and "snapshot 30-2: torn batch at position" in only(findings)
    last_position, _ = list(iter_batch_headers(data))[-1]
    path.write_bytes(data[:last_position])  # cut at a batch boundary: no footer
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert "snapshot 30-2" in only(findings) and "is not a SNAPSHOT_FOOTER control record" in only(findings)


def test_a_leftover_snapshot_part_is_a_note(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    (tmp_path / "d" / NAME / f"{30:020d}-{2:010d}.checkpoint.part").write_bytes(b"half")
    status, findings, notes = verify(capsys, tmp_path / "d")
    assert (status, findings) == (0, []) and "startup removes it" in only(notes)
    assert verify(capsys, tmp_path / "d", extra=["--no-notes"]) == (0, [], [])


# -- torn tails ------------------------------------------------------------------------------------

def _crash_with_a_torn_tail(data_dir: Path, *, hw: int | None) -> tuple[Path, int, int]:
    """A log flushed up to offset 41, then one more batch written and cut short by a crash:
    (segment, position of the torn batch, its offset)."""
    log = make_partition(data_dir, close=False, hw=hw)
    torn_offset = log.log_end_offset
    log.append_as_leader(bytearray(build_batch([(b"late", b"x" * 100, [], 5000)])), 2, now_ms=5000)
    seg = segments(data_dir)[-1]
    size = seg.stat().st_size
    position = batches(seg)[-1][0]
    os.truncate(seg, size - 40)
    return seg, position, torn_offset


def test_a_torn_tail_past_the_recovery_point_is_a_note_saying_what_recovery_truncates(tmp_path, capsys):
    seg, position, offset = _crash_with_a_torn_tail(tmp_path / "d", hw=BATCHES + 1)
    status, findings, notes = verify(capsys, tmp_path / "d")
    assert (status, findings) == (0, [])
    torn = [line for line in notes if "[segment]" in line]
    assert only(torn).startswith(f"NOTE [segment] {seg}, partition {NAME}, offset {offset}, position {position}: "
                                 "torn batch at position")
    size = seg.stat().st_size
    assert f"recovery keeps the first {position} bytes and truncates the other {size - position}" in torn[0]
    assert "an unfinished write past the recovery point" in torn[0]
    # The crash left no index files for the active segment: notes too, not findings.
    assert any("[index]" in line and "missing" in line for line in notes)
    report = FileLog(tmp_path / "d" / NAME).recovery_report
    assert (report.truncated_at_position, report.truncated_bytes) == (position, size - position)


def test_a_torn_tail_below_the_high_watermark_is_a_finding(tmp_path, capsys):
    seg, position, offset = _crash_with_a_torn_tail(tmp_path / "d", hw=None)
    write_replication_offsets(tmp_path / "d" / "replication-offset-checkpoint", {(TOPIC, 0): offset + 1})
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert any(line.startswith(f"FINDING [segment] {seg}, partition {NAME}, offset {offset}, position {position}: "
                               "torn batch") and "flushed data is lost" in line for line in findings), findings
    assert any("[high-watermark]" in line and f"the log ends at offset {offset}, below the high watermark {offset + 1}"
               in line for line in findings), findings


# -- several data dirs -------------------------------------------------------------------------------

def test_identical_replicas_are_clean(tmp_path, capsys):
    for node in ("n1", "n2", "n3"):
        make_partition(tmp_path / node, hw=BATCHES + 1)
    assert main(["verify", "--data-dir", *(str(tmp_path / n) for n in ("n1", "n2", "n3"))]) == 0
    assert capsys.readouterr().out == ("0 findings, 0 notes: 3 data dirs, 3 partitions, 9 segments, 123 batches "
                                       "checked; 1 partitions compared across replicas below their high watermark\n")


def test_replicas_that_differ_below_the_hw_are_reported_at_the_first_differing_offset(tmp_path, capsys):
    # Batches of 5 records; one record (offset 23, the 3rd of batch 21..25) differs in n2.
    make_partition(tmp_path / "n1", records_per_batch=5, hw=100)
    make_partition(tmp_path / "n2", records_per_batch=5, hw=120,
                   value=lambda o: b"other" if o == 23 else b"value-%d" % o)
    make_partition(tmp_path / "n3", records_per_batch=5, hw=150)
    status, findings, _ = verify(capsys, tmp_path / "n1", tmp_path / "n2", tmp_path / "n3")
    assert status == 1
    line = only(findings)
    seg = next(s for s in segments(tmp_path / "n2") if any(h.base_offset == 21 for _, h in batches(s)))
    position = next(p for p, h in batches(seg) if h.base_offset == 21)
    assert line.startswith(f"FINDING [replicas] {seg}, partition {NAME}, offset 23, position {position}: "
                           "replicas differ at offset 23, below the high watermark 100 (the smallest checkpointed): "
                           "the records differ")
    assert "value='other'" in line and "value='value-23'" in line
    for node in ("n1", "n3"):
        assert str(tmp_path / node / NAME) in line


def test_differences_at_or_above_the_hw_are_not_findings(tmp_path, capsys):
    make_partition(tmp_path / "n1", hw=30)
    make_partition(tmp_path / "n2", hw=35, value=lambda o: b"other" if o >= 30 else b"value-%d" % o)
    assert verify(capsys, tmp_path / "n1", tmp_path / "n2")[:2] == (0, [])
    write_replication_offsets(tmp_path / "n1" / "replication-offset-checkpoint", {(TOPIC, 0): 31})
    status, findings, _ = verify(capsys, tmp_path / "n1", tmp_path / "n2")
    assert status == 1 and "replicas differ at offset 30, below the high watermark 31" in only(findings)


def test_a_replica_that_ends_below_the_hw(tmp_path, capsys):
    make_partition(tmp_path / "n1", hw=30)
    make_partition(tmp_path / "n2", hw=30, batches=25)  # ends at 26 although its own HW says 30
    status, findings, _ = verify(capsys, tmp_path / "n1", tmp_path / "n2")
    assert status == 1
    assert any("[high-watermark]" in line and "the log ends at offset 26, below the high watermark 30" in line
               for line in findings), findings
    assert any("[replicas]" in line and "replicas differ at offset 26" in line and "one replica's log ends there"
               in line for line in findings), findings


def test_replicas_without_a_hw_checkpoint_are_not_compared_and_a_note_says_so(tmp_path, capsys):
    make_partition(tmp_path / "n1", hw=40)
    make_partition(tmp_path / "n2", hw=None, value=lambda o: b"other")
    status, findings, notes = verify(capsys, tmp_path / "n1", tmp_path / "n2")
    assert (status, findings) == (0, [])
    assert any(f"partition {NAME}: not compared: no high watermark checkpointed for it in {tmp_path / 'n2'}" in line
               for line in notes), notes


def test_crc_valid_garbage_records_are_found_unless_headers_only(tmp_path, capsys):
    from kraftd.protocol.records import compute_crc

    make_partition(tmp_path / "d", hw=BATCHES + 1)
    seg = segments(tmp_path / "d")[0]
    position, header = batches(seg)[2]
    data = bytearray(seg.read_bytes())
    data[position + 61] = 0x7F  # the first record's length varint: now past the batch's end
    data[position + 17:position + 21] = compute_crc(data, position, header).to_bytes(4, "big")
    seg.write_bytes(bytes(data))
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert only(findings).startswith(f"FINDING [records] {seg}, partition {NAME}, offset {header.base_offset}, "
                                     f"position {position}: batch {header.base_offset}..{header.last_offset}: "
                                     "records unreadable although the CRC holds")
    assert verify(capsys, tmp_path / "d", extra=["--headers-only"])[:2] == (0, [])


def test_state_files_that_do_not_parse(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    (tmp_path / "d" / "topics.json").write_text("{not json")
    (tmp_path / "d" / NAME / "log-start-offset").write_text("twelve\n")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1 and len(findings) == 2
    assert findings[0].startswith(f"FINDING [state-file] {tmp_path / 'd' / 'topics.json'}: not valid JSON")
    assert findings[1].startswith(f"FINDING [log-start-offset] {tmp_path / 'd' / NAME / 'log-start-offset'}, "
                                  f"partition {NAME}: unreadable")
    (tmp_path / "d" / "replication-offset-checkpoint").write_text("0\n1\nevents\n")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert any(line.startswith(f"FINDING [replication-offset-checkpoint] {tmp_path / 'd'}/replication-offset-"
                               "checkpoint: 'events' is not 'topic partition offset' (line 3)") for line in findings)


def test_a_batch_straddling_the_hw_is_compared_only_below_it(tmp_path, capsys):
    # Batch 21..25 holds the HW 23: offsets 21 and 22 are committed, 23..25 are not.
    make_partition(tmp_path / "n1", records_per_batch=5, hw=23)
    make_partition(tmp_path / "n2", records_per_batch=5, hw=26,
                   value=lambda o: b"other" if o == 23 else b"value-%d" % o)
    assert verify(capsys, tmp_path / "n1", tmp_path / "n2")[:2] == (0, [])
    write_replication_offsets(tmp_path / "n1" / "replication-offset-checkpoint", {(TOPIC, 0): 24})
    status, findings, _ = verify(capsys, tmp_path / "n1", tmp_path / "n2")
    assert status == 1 and "replicas differ at offset 23, below the high watermark 24" in only(findings)


def test_an_unreadable_meta_properties_is_a_finding(tmp_path, capsys):
    make_partition(tmp_path / "d", hw=BATCHES + 1)
    (tmp_path / "d" / "meta.properties").write_text("version=1\nnode.id=1\ndirectory.id=nope\n")
    status, findings, _ = verify(capsys, tmp_path / "d")
    assert status == 1
    assert only(findings).startswith(f"FINDING [meta.properties] {tmp_path / 'd' / 'meta.properties'}: ")
    assert "cannot be read" in only(findings)
