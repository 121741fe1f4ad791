"""Errors the core raises; the wire faces map them to their own error codes."""

from __future__ import annotations


class ToyCoderError(Exception):
    """Base of the errors a client is meant to read."""


class ConfigError(ToyCoderError):
    """The configuration is missing, unreadable or invalid. `problems`: each one, naming its field
    (the message holds them all)."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems if problems is not None else [message]


class SessionNotFound(ToyCoderError):
    def __init__(self, session_id: str, message: str = ""):
        super().__init__(message or f"session not found: {session_id}")
        self.session_id = session_id


class SessionDeleted(SessionNotFound):
    """The session was deleted in another daemon while this one had it open: it is not written again."""

    def __init__(self, session_id: str):
        super().__init__(session_id, f"session {session_id} was deleted in another editor")


MAX_SESSION_ID = 64
"""Bytes a session id may have: it names files (`<id>.jsonl`, `<id>.lock`, checkpoints), and a
longer one could pass NAME_MAX (ours are 12 characters)."""


class InvalidSessionId(ToyCoderError):
    """A session id no session can have (too long to name its file): the request's params are
    invalid, whatever it asks."""

    def __init__(self, session_id: str):
        super().__init__(f"Invalid params: sessionId: longer than {MAX_SESSION_ID} bytes "
                         f"({len(session_id.encode(errors='replace'))})")
        self.session_id = session_id


class SessionBusy(ToyCoderError):
    def __init__(self, session_id: str, why: str = "it is already running a turn; wait for it or cancel it"):
        super().__init__(f"session {session_id} is busy: {why}")
        self.session_id = session_id


class ProviderError(ToyCoderError):
    """The model provider failed after our retries (or on a non-retryable error)."""

    def __init__(self, provider: str, reason: str, status: int | None = None):
        from toycoder_daemon.core.util import secrets

        reason = secrets.redact(reason)  # some proxies echo the key in their error text
        super().__init__(f"provider {provider!r} failed: {reason}")
        self.provider = provider
        self.reason = reason
        self.status = status


class BadInput(ToyCoderError):
    """What a client sent is refused (a prompt's context item, a mention): the message names the
    item and says why. The faces answer it as invalid params (-32602)."""
