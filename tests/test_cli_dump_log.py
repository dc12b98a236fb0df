"""`kraftd dump-log` prints batches and records of real segment files and reports torn tails."""
import io
import subprocess
import sys

from kraftd.commands.dump_log import dump
from kraftd.protocol.control_records import ControlType, build_control_batch
from kraftd.protocol.records import Compression, build_batch
from kraftd.storage import FileLog


def _segment(tmp_path):
    log = FileLog(tmp_path / "t-0")
    log.append_as_leader(bytearray(build_control_batch(ControlType.LEADER_CHANGE, b"\0\0", base_offset=0,
                                                       timestamp=5, leader_epoch=3)), 3, now_ms=5)
    log.append_as_leader(bytearray(build_batch([(b"k1", b"v1", [("h", b"x")], 10), (None, b"v2", [], 11)],
                                               compression=Compression.GZIP)), 3, now_ms=10)
    log.flush()
    log.close()
    return next((tmp_path / "t-0").glob("*.log"))


def test_dump_prints_batches_records_and_payloads(tmp_path):
    out = io.StringIO()
    assert dump(str(_segment(tmp_path)), records=True, data=True, out=out) == 0
    lines = out.getvalue().splitlines()
    assert "isControl: true" in lines[1] and "partitionLeaderEpoch: 3" in lines[1]
    assert "controlType: LEADER_CHANGE(2)" in lines[2]
    assert "baseOffset: 1 lastOffset: 2 count: 2" in lines[3] and "compresscodec: gzip" in lines[3]
    assert "isvalid: true" in lines[3]
    assert lines[4].endswith("key: k1 payload: v1") and "headerKeys: [h]" in lines[4]
    assert "keySize: -1" in lines[5] and lines[5].endswith("key: null payload: v2")


def test_dump_reports_a_torn_tail_and_a_bad_crc(tmp_path):
    path = _segment(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    out = io.StringIO()
    assert dump(str(path), records=False, data=False, out=out) == 1
    assert "Torn tail" in out.getvalue()
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    out = io.StringIO()
    assert dump(str(path), records=True, data=False, out=out) == 1
    assert "isvalid: false" in out.getvalue()


def test_dump_log_is_a_cli_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kraftd", "dump-log", str(_segment(tmp_path))],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("baseOffset:") == 2
