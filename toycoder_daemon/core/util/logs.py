"""Logging to stderr or a file, with secrets redacted from every record."""

from __future__ import annotations

import logging
import sys

from toycoder_daemon.core.util import secrets


class _RedactingFormatter(logging.Formatter):
    """Redacts the whole formatted record: message, arguments and traceback alike."""

    def format(self, record: logging.LogRecord) -> str:
        return secrets.redact(super().format(record))


def setup(level: str = "WARNING", log_file: str | None = None) -> None:
    handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The HTTP layers log request details at debug; they are never useful enough to risk.
    for noisy in ("httpx2", "httpcore2", "pygls"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
