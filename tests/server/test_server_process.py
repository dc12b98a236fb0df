"""Real server processes: readiness line, ephemeral ports, SIGTERM/SIGINT shutdown."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PYTHON = sys.executable
READY = re.compile(r"kraftd listening on (\S+):(\d+)")
METRICS = re.compile(r"metrics listening on (\S+):(\d+)")


def start(argv: list[str], tmp_path: Path) -> tuple[subprocess.Popen, int, int, list[str]]:
    proc = subprocess.Popen([PYTHON, *argv, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
                             "--log-format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 30
    metrics_port = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if (mm := METRICS.search(line)):
            metrics_port = int(mm.group(2))
        if (mk := READY.search(line)):
            return proc, int(mk.group(2)), metrics_port, lines
    proc.kill()
    raise AssertionError("server did not become ready:\n" + "".join(lines) + proc.stdout.read())


def api_versions_round_trip(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        body = struct.pack(">hhih", 18, 0, 42, 1) + b"t"
        s.sendall(struct.pack(">i", len(body)) + body)
        size, = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        payload = s.recv(size, socket.MSG_WAITALL)
        correlation, error = struct.unpack_from(">ih", payload)
        assert correlation == 42
        return error


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_fake_node_process_serves_and_stops_cleanly(tmp_path, sig):
    proc, port, metrics_port, _ = start([str(HERE / "fake_serve.py")], tmp_path)
    assert port != 0 and metrics_port not in (None, 0)
    assert api_versions_round_trip(port) == 0
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5) as r:
        assert r.status == 200 and r.read() == b"ok\n"
    code, out = stop(proc, sig)
    assert code == 0, out
    assert "kraftd stopped" in out
    closed = json.loads((tmp_path / "data" / "fake-node-closed").read_text())
    assert closed == {"produced": 0, "flushed": 0}


def test_bad_config_exits_2_naming_the_field(tmp_path):
    cfg = tmp_path / "kraftd.toml"
    cfg.write_text('segment_bytes = -5\nlisten = "127.0.0.1:9092"\n')
    proc = subprocess.run([PYTHON, "-m", "kraftd", "serve", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "segment_bytes" in proc.stderr


def _real_node_available() -> bool:
    try:
        from kraftd.storage import FileLog  # noqa: F401
        from kraftd.quorum.node import Node  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _real_node_available(), reason="storage/quorum not landed yet")
def test_real_kraftd_process_serves_and_stops_cleanly(tmp_path):
    proc, port, _, _ = start(["-m", "kraftd", "serve"], tmp_path)
    assert api_versions_round_trip(port) == 0
    code, out = stop(proc)
    assert code == 0, out


def test_port_in_use_fails_at_start_with_exit_1(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [PYTHON, str(HERE / "fake_serve.py"), "--listen", f"127.0.0.1:{port}",
             "--metrics-listen", "127.0.0.1:0", "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "kraftd failed" in proc.stderr and "address already in use" in proc.stderr.lower()


@pytest.mark.skipif(not _real_node_available(), reason="storage/quorum not landed yet")
def test_real_node_acks_all_produce_is_fsynced_and_visible_in_metrics(tmp_path):
    import asyncio

    from kraftd.protocol import messages as m
    from kraftd.protocol.records import build_batch
    from prometheus_client.parser import text_string_to_metric_families
    from server_client import TestClient

    proc, port, metrics_port, _ = start(["-m", "kraftd", "serve"], tmp_path)

    async def produce_some() -> list[int]:
        c = await TestClient.connect("127.0.0.1", port)
        await c.request(3, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name="shell")],
            allow_auto_topic_creation=True))
        for i in range(5):
            batch = build_batch([(None, b"v%d" % i, [], 1_700_000_000_000)])
            c.send(0, 9, m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                m.ProduceRequest.TopicProduceData(name="shell", partition_data=[
                    m.ProduceRequest.PartitionProduceData(index=0, records=batch)])]))
        out = []
        for _ in range(5):
            _, body = await c.recv()
            p = body.responses[0].partition_responses[0]
            assert p.error_code == 0, p
            out.append(p.base_offset)
        c.close()
        return out

    try:
        offsets = asyncio.run(produce_some())
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read()
        gauges = {(s.name, s.labels.get("topic")): s.value
                  for f in text_string_to_metric_families(text.decode()) for s in f.samples}
        # acks=-1 was answered after fsync, so the high watermark covers all five.
        assert gauges[("kraftd_high_watermark", "shell")] >= offsets[-1] + 1
    finally:
        code, out = stop(proc)
    assert code == 0, out
