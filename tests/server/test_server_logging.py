"""Log output formats: every line is JSON in json mode, stdlib records included."""
from __future__ import annotations

import io
import json
import logging

import structlog

import pytest

from kraftd.server.logging import configure_logging


@pytest.fixture(autouse=True)
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def test_json_lines_for_structlog_and_stdlib():
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    structlog.get_logger().info("kraftd listening on 127.0.0.1:9092", node_id=1)
    logging.getLogger("kraftd.quorum.node").info("leading at epoch %d", 4)
    structlog.get_logger().debug("filtered out")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [l["event"] for l in lines] == ["kraftd listening on 127.0.0.1:9092", "leading at epoch 4"]
    assert lines[0]["node_id"] == 1 and lines[1]["logger"] == "kraftd.quorum.node"


def test_console_level_filter():
    out = io.StringIO()
    configure_logging("console", "warning", stream=out)
    structlog.get_logger().info("quiet")
    structlog.get_logger().warning("loud")
    logging.getLogger("x").info("quiet too")
    text = out.getvalue()
    assert "loud" in text and "quiet" not in text
