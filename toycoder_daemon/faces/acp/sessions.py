"""The ACP face's session extras: what it tells a client about its open sessions outside its own
prompts (turns another daemon made, replayed as the updates the client would have seen; title
changes as `session_info_update`; mode changes as `current_mode_update`), session modes, and
`session/delete` (which SDK 0.12.1 does not route)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from acp import RequestError
from acp.meta import AGENT_METHODS
from acp.router import MessageRouter
from acp.schema import DeleteSessionRequest, SetSessionModeResponse

from toycoder_daemon.app.application import App
from toycoder_daemon.core.errors import SessionBusy, SessionNotFound
from toycoder_daemon.core.modes import MODES
from toycoder_daemon.core.ports import Event
from toycoder_daemon.faces.acp.client import chunk
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.sessions.store import SessionSummary
from toycoder_daemon.wire import codes as wire

Send = Callable[[str, Any], Awaitable[None]]
Replay = Callable[[list[TranscriptEntry], App], list[Any]]


CUT_NOTICE = ("[the live stream of the turn in another editor was cut off: what the session file has of it "
              "follows, and the rest as it lands]")

Told = dict[str, tuple[str | None, str | None]]
"""Session id -> the (title, mode) its client was last told (opening it says both)."""


def opened(told: Told, s: Session) -> list[Any]:
    """A session was made, loaded or resumed here: its answer tells the client its mode. Returns
    what a load sends after the replay: the title, when there is one (a client that loads by a
    stored id, without the session list, has it from nowhere else). From then on only a change of
    either is news."""
    told[s.id] = (s.title, s.mode)
    return [{"title": s.title, "sessionUpdate": "session_info_update"}] if s.title else []


def hook(app: App, owner: dict[str, App], send: Send, later: Callable[[Coroutine[Any, Any, Any]], Any],
         replay: Replay, told: Told, observe: Callable[[str], AcpFrontend] | None = None) -> None:
    """Wire `app`'s session events to the client; only sessions open on this connection (`owner`).
    `observe`: a frontend for a session's turn heard live from another daemon (its updates as if
    it ran here, after the prompt as a `user_message_chunk` that says where it runs in `_meta`; its
    permission requests and questions asked through it too)."""
    elsewhere: dict[str, AcpFrontend] = {}

    def live_turn(session_id: str, turn_id: str, client: str, running: bool, prompt: str) -> None:
        ended = elsewhere.pop(session_id, None)
        if ended is not None:
            ended.flush()
        if not running or observe is None or owner.get(session_id) is not app:
            return
        frontend = elsewhere[session_id] = observe(session_id)
        where = {"toycoder": {"turnElsewhere": {"client": client or "another editor", "running": True,
                                                "turnId": turn_id}}}
        frontend.send({**chunk(prompt, "user_message_chunk"), "_meta": where})

    def live_event(session_id: str, turn_id: str, event: Event) -> None:
        frontend = elsewhere.get(session_id)
        if frontend is not None:
            frontend.emit(event)

    async def send_all(session_id: str, updates: list[Any]) -> None:
        for update in updates:
            await send(session_id, update)

    def changed(session_id: str, entries: list[TranscriptEntry], reset: bool, untold: list[TranscriptEntry]) -> None:
        """ACP cannot retract: a reset (a cut live stream) replays what the client was not told,
        after a notice, as the file has it (a rewrite elsewhere has nothing to replay)."""
        if owner.get(session_id) is not app or not untold:
            return
        updates = replay(untold, app)
        if reset:
            updates.insert(0, chunk(CUT_NOTICE, "agent_thought_chunk"))
        later(send_all(session_id, updates))

    def info(summary: SessionSummary, turn_id: str) -> None:
        if owner.get(summary.id) is not app:
            return
        title, mode = told.get(summary.id, (None, None))
        updates: list[Any] = []
        if summary.title != title:
            info = {"title": summary.title, "updatedAt": wire.iso_time(summary.updated_at)}
            updates.append({**{k: v for k, v in info.items() if v}, "sessionUpdate": "session_info_update"})
        if summary.mode and summary.mode != mode:
            updates.append({"currentModeId": summary.mode, "sessionUpdate": "current_mode_update"})
        told[summary.id] = (summary.title, summary.mode)
        later(send_all(summary.id, updates))

    app.sharing.on_changed = changed
    app.sharing.on_live_turn = live_turn
    app.sharing.on_live_event = live_event
    app.sharing.asker = elsewhere.get
    app.on_session_info = info


def mode_state(mode: str) -> dict[str, Any]:
    """`modes` of session/new, load and resume, as the SDK dumps its SessionModeState."""
    return {"currentModeId": mode,
            "availableModes": [{"id": m, "name": name, "description": d} for m, (name, d) in MODES.items()]}


async def set_session_mode(agent: Any, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
    """session/set_mode (a method of ToyCoderAgent): an unknown mode is -32602."""
    app: App = agent.app_of(session_id)
    try:
        app.set_mode(session_id, mode_id)
    except ValueError as e:
        raise RequestError.invalid_params({"modeId": str(e)}) from None
    except SessionBusy as e:
        raise RequestError(wire.SESSION_BUSY, str(e), {"sessionId": session_id}) from None
    return SetSessionModeResponse()


async def delete_session(agent: Any, session_id: str, **_: Any) -> None:
    """session/delete (a method of ToyCoderAgent), as toycoder/session/delete: refused while a turn
    runs, here or in another daemon. The request has no cwd: a session not open here is looked for
    in every workspace of the data dir (agent.catalog). An unknown id succeeds silently, as the
    spec says (deleting what is gone is done)."""
    app: App | None = agent.owner.get(session_id)
    if app is None:
        cwd = await asyncio.to_thread(agent.catalog.find, session_id)
        if cwd is None:
            return
        app = agent.app_for(cwd)
    try:
        app.delete_session(session_id)
    except SessionNotFound:
        return  # deleted by another daemon meanwhile
    except SessionBusy as e:
        raise RequestError(wire.SESSION_BUSY, str(e), {"sessionId": session_id}) from None
    agent.owner.pop(session_id, None)
    agent.told.pop(session_id, None)
    agent.told_options.pop(session_id, None)


def route_delete(router: MessageRouter, agent: Any) -> None:
    """Route session/delete through the SDK's router (its params validation and -32602), as a later
    SDK does: 0.12.1 names the method but has no route for it (it answered -32601)."""
    router.route_request(AGENT_METHODS["session_delete"], DeleteSessionRequest, agent, "delete_session",
                         adapt_result=lambda _: {})
