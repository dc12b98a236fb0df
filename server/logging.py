"""structlog setup: human-readable console lines or one JSON object per line, on stderr.

Stdlib `logging` records (quorum/ and storage/ use it; so does asyncio) are rendered by the same
processors, so `--log-format json` yields JSON for every line.
"""
from __future__ import annotations

import logging
import sys
import time

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def configure_logging(log_format: str = "console", log_level: str = "info", stream=None) -> None:
    level = _LEVELS[log_level]
    stream = stream if stream is not None else sys.stderr
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer()
        extra = [structlog.processors.format_exc_info]
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())
        extra = []
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, *extra, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,  # tests reconfigure
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, *extra],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


class LogThrottle:
    """At most one line every `interval_s` for one kind of event, so that a flood (refused
    connections, failed authentications) cannot flood the log; `due()` says how many events the
    line stands for (this one and those held back since the last), or 0 to stay quiet."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self._interval_s = interval_s
        self._last = float("-inf")
        self._held = 0

    def due(self) -> int:
        self._held += 1
        now = time.monotonic()
        if now - self._last < self._interval_s:
            return 0
        self._last, held, self._held = now, self._held, 0
        return held
