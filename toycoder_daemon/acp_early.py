"""The ACP face of a new process while the ACP SDK loads (~0.7-1 s, `acp.schema` most of it): the
first `session/new` and `session/list` are answered without it.

acp_fast.py answers `initialize`; the SDK is then imported on a thread while this reads the next
lines from the StdinPump. A plain `session/new` (an absolute directory, no MCP servers) or
`session/list` is answered here from the App, written as the SDK writes it (tests compare the
bytes with ToyCoderAgent's answers). The first line that is anything else, and every line after
it, is put back in the pump, in order, for the SDK. When the SDK is in, ToyCoderAgent adopts the
Apps and sessions opened here (`adopt`): it wires them as its own, starts the Apps and announces
the sessions' commands, as it does for the ones it opens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from . import deferred_models, field_docs
from . import protocol as wire
from .acp_fast import StdinPump
from .app import App
from .modes import MODES
from .ndjson import MAX_LINE, encode_line
from .outbox import Outbox, written

log = logging.getLogger(__name__)


def mode_state(mode: str) -> dict[str, Any]:
    """acp_sessions.mode_state as the SDK dumps it."""
    return {"currentModeId": mode,
            "availableModes": [{"id": m, "name": name, "description": d} for m, (name, d) in MODES.items()]}


class EarlyAcp:
    """Reads lines from the pump and answers the ones it can, until the first it cannot."""

    def __init__(self, pump: StdinPump, out: BinaryIO | Outbox, config_path: str | None):
        self.pump, self.out, self.config_path = pump, out, config_path
        self.apps: dict[Path, App] = {}
        self.sessions: dict[str, App] = {}
        """Sessions opened here (session/new), and their App."""
        self.ended = False
        """The input ended with nothing left for the SDK."""
        self._buf = bytearray()
        self._answering: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        """Until a line is not ours or the input ends (or it is cancelled: the SDK is in)."""
        try:
            while True:
                end = self._buf.find(b"\n")
                if end < 0:
                    if len(self._buf) > MAX_LINE:
                        return  # the SDK's transport refuses it
                    chunk = await self.pump.read()
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

    async def drain(self) -> None:
        """The answers still being made are written (the input ended; the client may still read)."""
        if self._answering:
            await asyncio.wait(set(self._answering))

    def hand_back(self) -> None:
        """What was read and not answered goes back in front of the pump, for the SDK."""
        self.pump.unread(bytes(self._buf))
        self._buf.clear()

    def _send(self, msg_id: Any, result: dict[str, Any]) -> None:
        self.out.write(encode_line({"jsonrpc": "2.0", "id": msg_id, "result": result}))
        self.out.flush()

    def _app_for(self, cwd: Any) -> App | None:
        """ToyCoderAgent.app_for without the SDK; None for a cwd it would refuse (the SDK says why)."""
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
        return app

    def _handled(self, line: bytes) -> bool:
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return False
        msg_id, method, params = msg.get("id"), msg.get("method"), msg.get("params")
        if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool) or not isinstance(params, dict):
            return False
        if method == "session/new" and set(params) <= {"cwd", "mcpServers"} and params.get("mcpServers") == []:
            app = self._app_for(params.get("cwd"))
            if app is None:
                return False
            s = app.new_session()
            self.sessions[s.id] = app
            self._send(msg_id, {"sessionId": s.id, "modes": mode_state(s.mode)})
            return True
        if method == "session/list" and set(params) <= {"cwd", "cursor"} and all(
                v is None or isinstance(v, str) for v in params.values()):
            if params.get("cwd") is None:
                apps = list(self.apps.values())
            elif (app := self._app_for(params["cwd"])) is not None:
                apps = [app]
            else:
                return False
            task = asyncio.ensure_future(self._list(msg_id, apps))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
            return True
        return False

    async def _list(self, msg_id: Any, apps: list[App]) -> None:
        listed = [(app, await asyncio.to_thread(app.list_sessions)) for app in apps]  # file I/O: off the loop
        rows = []
        for app, summaries in listed:
            for r in summaries:
                row = {"sessionId": r.id, "cwd": str(app.workspace.root), "title": r.title or None,
                       "updatedAt": wire.iso_time(r.updated_at)}
                rows.append({k: v for k, v in row.items() if v is not None})
        self._send(msg_id, {"sessions": rows})


def _import_sdk() -> Any:
    # ~0.2 s of the SDK's ~0.6 s import: docstrings nothing reads; ~0.07 s: models no session uses
    with field_docs.skipped("acp"), deferred_models.deferred("acp"):
        from . import acp

    return acp


async def serve(pump: StdinPump, out: BinaryIO | Outbox, config_path: str | None, *, answered: dict[str, Any] | None,
                on_end: Callable[[], None]) -> int:
    """The ACP face: early answers until the SDK is in, then acp.serve_acp with the rest."""
    early = EarlyAcp(pump, out, config_path)
    if isinstance(out, Outbox):
        pump.gate = out.wait_input  # the backpressure rule from the first read, as serve_lsp has it
    importing = asyncio.ensure_future(asyncio.to_thread(_import_sdk))
    reading = asyncio.ensure_future(early.run())
    await asyncio.wait({importing, reading}, return_when=asyncio.FIRST_COMPLETED)
    if early.ended and not importing.done():  # the input ended before the SDK was needed
        on_end()
        await early.drain()
        await written(out)
        for app in early.apps.values():
            await app.shutdown()
        return 0
    face = await importing
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading
    early.hand_back()
    return int(await face.serve_acp(out, config_path, reader=pump, on_end=on_end, answered=answered,
                                    prepare=lambda agent: agent.adopt(early.apps, early.sessions)))
