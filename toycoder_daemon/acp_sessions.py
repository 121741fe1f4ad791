"""What the ACP face tells a client about its open sessions outside its own prompts: turns another
daemon made (replayed as the updates the client would have seen) and title changes
(`session_info_update`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from acp.schema import SessionInfoUpdate

from . import protocol as wire
from .app import App
from .sessions.session import TranscriptEntry
from .sessions.store import SessionSummary

Send = Callable[[str, Any], Awaitable[None]]
Replay = Callable[[list[TranscriptEntry], App], list[Any]]


def hook(app: App, owner: dict[str, App], send: Send, later: Callable[[Coroutine[Any, Any, Any]], Any],
         replay: Replay) -> None:
    """Wire `app`'s session events to the client; only sessions open on this connection (`owner`)."""

    async def send_all(session_id: str, updates: list[Any]) -> None:
        for update in updates:
            await send(session_id, update)

    def changed(session_id: str, entries: list[TranscriptEntry], reset: bool) -> None:
        if owner.get(session_id) is app and not reset:  # ACP cannot retract: a rewrite is not replayed
            later(send_all(session_id, replay(entries, app)))

    def info(summary: SessionSummary) -> None:
        if owner.get(summary.id) is app:
            update = SessionInfoUpdate(session_update="session_info_update", title=summary.title or None,
                                       updated_at=wire.iso_time(summary.updated_at))
            later(send_all(summary.id, [update]))

    app.sharing.on_changed = changed
    app.on_session_info = info
