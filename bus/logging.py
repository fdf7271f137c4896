"""structlog: JSON lines off a TTY, console on a TTY; ``service`` and ``op_id`` bound by callers."""
from __future__ import annotations

import logging
import sys

import msgspec
import structlog


def configure(fmt: str = "auto", level: str = "info") -> None:
    use_console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer = structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer(_json)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def _json(event: dict, **_: object) -> str:
    """One JSON line (msgspec: several times faster than ``json.dumps``; what it cannot encode, as ``str``)."""
    return _ENCODER.encode(event).decode()


_ENCODER = msgspec.json.Encoder(enc_hook=str)


def get(service: str, **bound: object) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger().bind(service=service, **bound)
