"""The ACP face of a new process while the ACP SDK is not in (its import costs ~0.3-0.7 s of CPU,
`acp.schema` most of it): the first sessions and their prompts are answered without it.

acp_fast.py answers `initialize`; this then reads the next lines from the StdinPump and answers a
plain `session/new` (an absolute directory, no MCP servers), `session/list`, `session/prompt` for
a session opened here (text blocks; the client's capabilities plain enough to read as the SDK
does) and `session/cancel` for one, from the App, written as the SDK writes them (tests compare
them with ToyCoderAgent's). Around them it does what the SDK path does: the App starts (MCP servers)
and the session's commands are announced after session/new, title and mode news go out
(acp_sessions.hook), and the turn itself is acp_turn.run_prompt over acp_early_link.EarlyClient.

The SDK is imported (on a thread) when a line needs it, the first line not handled here (it and
every line after it wait for the SDK, in order), or when the process is idle (QUIET). When it is
in, ToyCoderAgent adopts the Apps and sessions opened here (`adopt`), and an early turn still
running goes on: its frames go through the SDK's connection from then on, the client's responses
to the requests it sent before are routed to it (acp_early_link.Replies), and it writes its answer
when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, BinaryIO

from . import acp_client, acp_sessions, acp_turn, deferred_models, field_docs
from . import protocol_codes as wire
from .acp_content import commands_update, replay
from .acp_early_link import EarlyClient, Replies
from .acp_fast import StdinPump
from .acp_terminal import Terminals
from .app import App
from .background import Background
from .coalesce import OUTPUT
from .errors import ToyCoderError
from .ndjson import MAX_LINE, encode_line
from .outbox import Outbox, written

log = logging.getLogger(__name__)

QUIET = 0.15
"""Seconds with no input and nothing being answered here after which the SDK is imported anyway.
A client that sends its prompt right after session/new (a script, a bench) gets it within this, so
the import does not compete with the turn for the GIL; one that waits for a person to type has the
SDK in (~0.3 s of CPU on its thread) long before they are done, so lines that need it do not wait.
Much shorter would catch the gap between session/new's answer and a prompt sent in reply to it."""


def plain_text(blocks: Any) -> bool:
    """The prompt is text blocks only, as the SDK reads them (others wait for it)."""
    return isinstance(blocks, list) and bool(blocks) and all(
        isinstance(b, dict) and set(b) == {"type", "text"} and b["type"] == "text" and isinstance(b["text"], str)
        for b in blocks)


class EarlyAcp:
    """Reads lines from the pump and answers the ones it can, until the first it cannot."""

    def __init__(self, pump: StdinPump, out: BinaryIO | Outbox, config_path: str | None,
                 answered: dict[str, Any] | None = None):
        self.pump, self.out, self.config_path = pump, out, config_path
        self.apps: dict[Path, App] = {}
        self.sessions: dict[str, App] = {}
        """Sessions opened here (session/new), and their App."""
        self.ended = False
        """The input ended with nothing left for the SDK."""
        self.client = EarlyClient(self._write)
        caps = acp_turn.plain_caps(answered)
        self.caps = caps[0] if caps else None
        """None: the client's capabilities were not plain (or initialize was the SDK's): prompts wait for it."""
        self.terminals = Terminals(usable=True) if caps and caps[1] else None
        self.told: acp_sessions.Told = {}
        self.turns: set[asyncio.Task[None]] = set()
        self._later = Background().run
        self._buf = bytearray()
        self._answering: set[asyncio.Task[None]] = set()
        self._last_input = 0.0

    async def run(self) -> None:
        """Until a line is not ours or the input ends (or it is cancelled: the SDK is in)."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                end = self._buf.find(b"\n")
                if end < 0:
                    if len(self._buf) > MAX_LINE:
                        return  # the SDK's transport refuses it
                    chunk = await self.pump.read()
                    self._last_input = loop.time()
                    if not chunk:
                        self.ended = not self._buf
                        return
                    self._buf += chunk
                    continue
                if not self._handled(bytes(self._buf[:end])):
                    return
                del self._buf[:end + 1]
        except Exception:  # a bug here must not lose input: the SDK gets the rest
            log.exception("early ACP reader failed")

    async def idle(self) -> None:
        """Returns once nothing is being answered here and no input came for QUIET seconds."""
        loop = asyncio.get_running_loop()
        self._last_input = loop.time()
        while (wait := self._last_input + QUIET - loop.time()) > 0 or self._answering:
            await asyncio.sleep(wait if wait > 0 else QUIET)

    async def shutdown(self) -> None:
        """The input ended: every turn ends (as on the SDK path), and what is being answered is
        written (the client may still read)."""
        for app in self.apps.values():
            await app.shutdown()
        if self._answering:
            await asyncio.wait(set(self._answering), timeout=2.0)

    def hand_back(self) -> None:
        """What was read and not answered goes back in front of the pump, for the SDK."""
        self.pump.unread(bytes(self._buf))
        self._buf.clear()

    def _write(self, message: dict[str, Any]) -> None:
        self.out.write(encode_line(message))
        self.out.flush()

    def _send(self, msg_id: Any, result: dict[str, Any]) -> None:
        self._write({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        """As the SDK's connection answers a RequestError."""
        self._write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message, "data": data}})

    def _update(self, session_id: str, update: dict[str, Any]) -> Any:
        return self.client.notify(acp_client.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    def _app_for(self, cwd: Any) -> App | None:
        """ToyCoderAgent.app_for without the SDK; None for a cwd it would refuse (the SDK says why).
        The App is wired and started as ToyCoderAgent.adopt does it."""
        if not isinstance(cwd, str):
            return None
        p = Path(cwd)
        if not p.is_absolute() or not p.is_dir():
            return None
        key = p.resolve()
        app = self.apps.get(key)
        if app is None:
            app = self.apps[key] = App.open(key, self.config_path)
            app.on_notice = lambda level, message: log.warning("%s", message)  # ACP has no message to show
            acp_sessions.hook(app, self.sessions, self._update, self._later, replay, self.told)
            self._later(app.start())
        return app

    def _handled(self, line: bytes) -> bool:
        if not line.strip():
            return True  # the SDK's transport skips blank lines too
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return False
        msg_id, method, params = msg.get("id"), msg.get("method"), msg.get("params")
        if "method" not in msg:
            return "id" in msg and self.client.response(msg)
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if method == "session/cancel" and "id" not in msg and isinstance(params, dict) and set(params) == {"sessionId"} \
                and isinstance(sid, str) and (app := self.sessions.get(sid)) is not None:
            # a task, as the SDK runs it: after a prompt read before it (in the same chunk too) has begun its turn
            self._answer(self._cancel(app, sid))
            return True
        if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool) or not isinstance(params, dict):
            return False
        if method == "session/new" and set(params) <= {"cwd", "mcpServers"} and params.get("mcpServers") == []:
            app = self._app_for(params.get("cwd"))
            if app is None:
                return False
            s = app.new_session()
            self.sessions[s.id] = app
            acp_sessions.opened(self.told, s)
            self._send(msg_id, {"sessionId": s.id, "modes": acp_sessions.mode_state(s.mode)})
            self._later(self._update(s.id, commands_update()))  # after the answer, as ToyCoderAgent does
            return True
        if method == "session/list" and set(params) <= {"cwd", "cursor"} and all(
                v is None or isinstance(v, str) for v in params.values()):
            if params.get("cwd") is None:
                apps = list(self.apps.values())
            elif (app := self._app_for(params["cwd"])) is not None:
                apps = [app]
            else:
                return False
            self._answer(self._list(msg_id, apps))
            return True
        if method == "session/prompt" and self.caps is not None and set(params) == {"sessionId", "prompt"} \
                and isinstance(sid, str) and sid in self.sessions and plain_text(params["prompt"]):
            self.turns.add(self._answer(self._prompt(msg_id, sid, params["prompt"])))
            return True
        return False

    def _answer(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)
        task.add_done_callback(self.turns.discard)
        return task

    @staticmethod
    async def _cancel(app: App, session_id: str) -> None:
        with contextlib.suppress(ToyCoderError):  # as ToyCoderAgent.cancel: nothing to cancel
            app.cancel(session_id)

    async def _list(self, msg_id: Any, apps: list[App]) -> None:
        listed = [(app, await asyncio.to_thread(app.list_sessions)) for app in apps]  # file I/O: off the loop
        rows = []
        for app, summaries in listed:
            for r in summaries:
                row = {"sessionId": r.id, "cwd": str(app.workspace.root), "title": r.title or None,
                       "updatedAt": wire.iso_time(r.updated_at)}
                rows.append({k: v for k, v in row.items() if v is not None})
        self._send(msg_id, {"sessions": rows})

    async def _prompt(self, msg_id: Any, session_id: str, blocks: list[Any]) -> None:
        """ToyCoderAgent.prompt, answered as the SDK answers it (its errors included)."""
        assert self.caps is not None  # _handled leaves prompts to the SDK without them
        try:
            result = await acp_turn.run_prompt(self.sessions[session_id], session_id, blocks, self.client, self.caps,
                                               self.terminals)
        except acp_turn.EmptyPrompt as e:
            self._error(msg_id, -32602, "Invalid params", {"prompt": str(e)})
        except Exception as e:
            if (error := acp_turn.core_error(e)) is None:  # as the SDK's connection answers it
                log.exception("unhandled error in session/prompt")
                error = (wire.INTERNAL_ERROR, "Internal error", {"details": str(e)})
            self._error(msg_id, *error)
        else:
            self._send(msg_id, result)

    def adopted_by(self, agent: Any) -> None:
        """The SDK is in: `agent` (ToyCoderAgent) takes over what was opened here; a turn still
        running sends through its connection from now on and is waited for at the end as its own."""
        self.client.sdk = agent.raw
        agent.raw.ids_after(self.client.next_id)
        agent.told.update(self.told)
        if self.terminals is not None:
            agent.terminals = self.terminals  # one per connection: a failure stops their use for all turns
        agent.adopt(self.apps, self.sessions, started=True, turns=[t for t in self.turns if not t.done()])


def _import_sdk() -> Any:
    # ~0.2 s of the SDK's ~0.6 s import: docstrings nothing reads; ~0.07 s: models no session uses
    with field_docs.skipped("acp"), deferred_models.deferred("acp"):
        from . import acp

    return acp


async def serve(pump: StdinPump, out: BinaryIO | Outbox, config_path: str | None, *, answered: dict[str, Any] | None,
                on_end: Callable[[], None]) -> int:
    """The ACP face: early answers until the SDK is in, then acp.serve_acp with the rest."""
    if isinstance(out, Outbox):
        pump.gate = out.wait_input  # the backpressure rule from the first read, as serve_lsp has it
        OUTPUT.set(out)  # an early turn waits for room in the queue as any turn does
    early = EarlyAcp(pump, out, config_path, answered)
    reading = asyncio.ensure_future(early.run())
    idle = asyncio.ensure_future(early.idle())
    await asyncio.wait({reading, idle}, return_when=asyncio.FIRST_COMPLETED)
    idle.cancel()
    importing = None
    if not early.ended:  # a line needs the SDK, or the process is idle: the import starts
        importing = asyncio.ensure_future(asyncio.to_thread(_import_sdk))
        await asyncio.wait({importing, reading}, return_when=asyncio.FIRST_COMPLETED)
    if early.ended and (importing is None or not importing.done()):  # the input ended before the SDK was needed
        on_end()
        await early.shutdown()
        await written(out)
        return 0
    assert importing is not None
    face = await importing
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading
    early.hand_back()
    return int(await face.serve_acp(out, config_path, reader=Replies(pump.read, early.client), on_end=on_end,
                                    answered=answered, prepare=early.adopted_by))
