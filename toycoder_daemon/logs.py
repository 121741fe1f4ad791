"""Logging to stderr or a file, with secrets redacted from every record."""

from __future__ import annotations

import logging
import sys

_secrets: set[str] = set()


def register_secrets(values: list[str]) -> None:
    """Values (API keys) that must never appear in a log line."""
    _secrets.update(v for v in values if v and len(v) >= 4)


class _Redact(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if _secrets:
            msg = record.getMessage()
            for s in _secrets:
                if s in msg:
                    msg = msg.replace(s, "***")
            record.msg, record.args = msg, None
        return True


def setup(level: str = "WARNING", log_file: str | None = None) -> None:
    handler: logging.Handler = logging.FileHandler(log_file, encoding="utf-8") if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_Redact())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The SDK and HTTP layers log request details at debug; they are never useful enough to risk.
    for noisy in ("openai", "httpx", "httpx2", "httpcore", "pygls"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
