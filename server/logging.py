"""structlog setup: human-readable console lines or one JSON object per line, on stderr."""
from __future__ import annotations

import logging
import sys

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
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *extra,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,  # tests reconfigure
    )
    # asyncio and other stdlib loggers (e.g. "Task exception was never retrieved") go to the
    # same stream so nothing is lost.
    logging.basicConfig(stream=stream, level=max(level, logging.INFO),
                        format="%(asctime)s [%(levelname)s] %(name)s: %(message)s", force=True)
