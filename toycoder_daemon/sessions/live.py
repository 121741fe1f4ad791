"""A running turn, live in every daemon that has its session open.

Each daemon listens on one unix socket per session it has open (Listener),
`<runtime dir>/live/<session id>/<pid>-<n>.sock`, in directories of ours with mode 0700. While a
turn runs, the daemon running it (the origin) connects to every other listener of the session
(Broadcast: when the turn starts and every RESCAN seconds; one that connects later gets the turn's
lines so far first, while they are under LIMIT bytes) and writes one JSON object per line: `start` {turn, client, prompt}, then
`event` {turn, event} for each of the turn's events, then `end` {turn, recorded} (`recorded`: the
checkpoint ids its prompt records carry in the session file, by which observers recognise them). Both ends check that the
peer has our uid (SO_PEERCRED).

Questions go to every client: a permission request or an ask_user question of the turn is also
written as `ask` {turn, id (the call's), question}; an observer asks its client and writes back
`answer` {turn, id, answer, by}. The origin owns the decision: the first answer, its own client's or
an observer's, decides; the origin then emits PermissionResolved (an event like the others, so every
client hears it), and the questions still open are withdrawn (its own client's request cancelled;
an observer cancels its client's when it hears the event). An observer may also write `cancel`
{turn}: its client cancelled the turn.

The origin never waits for an observer: what one has not read stays in its connection's buffer,
up to LIMIT bytes; an observer further behind is cut off (its connection aborted). An observer
whose stream ends without `end` (cut off, or the origin died) falls back to the session file.

While no observer is connected (the usual case) the backlog keeps the turn's text deltas as they
are, only counting the bytes their lines would take, and they are encoded once, when an observer
connects: a streamed reply is thousands of deltas, and encoding each for nobody was a quarter to a
third of a turn's CPU. An observer gets the same bytes either way, and the backlog is dropped at the
same point.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import json.encoder
import logging
import os
import re
import socket
import stat
import typing
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toycoder_daemon.core.ports import (
    ChangedFile,
    CommandRunner,
    Decision,
    EditApplied,
    Event,
    FileDiagnostics,
    FilesChanged,
    Frontend,
    PermissionRequest,
    PermissionResolved,
    PlanEntry,
    PlanUpdated,
    Resolution,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from toycoder_daemon.core.util import rundir

log = logging.getLogger(__name__)

LIMIT = 1 << 20
"""Bytes an observer may be behind before it is cut off (never buffered without bound)."""
RESCAN = 0.25
"""Seconds between the origin's looks for observers that opened the session since the turn began."""
LINE_LIMIT = 16 << 20
"""The longest line an observer reads (one event: a tool's whole output)."""
CONNECT_TIMEOUT = 0.5

_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_names = itertools.count(1)

_EVENTS: dict[str, type[Any]] = {
    str(next(f.default for f in dataclasses.fields(cls) if f.name == "kind")): cls
    for cls in typing.get_args(Event)}
"""Event classes by their `kind` (what crosses the socket): every kind of core.ports.Event."""


def event_to_json(event: Event) -> dict[str, Any]:
    return dataclasses.asdict(event)


def event_from_json(data: Any) -> Event | None:
    """The event, or None for what this version does not know (another version's origin)."""
    if not isinstance(data, dict) or (cls := _EVENTS.get(data.get("kind", ""))) is None:
        return None
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    args = {k: v for k, v in data.items() if k in names}
    try:
        if cls is FilesChanged:
            args["files"] = tuple(ChangedFile(**f) for f in args.get("files", ()))
        elif cls is PlanUpdated:
            args["entries"] = tuple(PlanEntry(**e) for e in args.get("entries", ()))
        for k in ("changed_paths", "servers", "failed"):
            if isinstance(args.get(k), list):
                args[k] = tuple(args[k])
        return cls(**args)  # type: ignore[no-any-return]
    except TypeError:
        return None


DECISIONS: tuple[Resolution, ...] = ("allow_once", "allow_always", "reject")


def permission_question(request: PermissionRequest) -> dict[str, Any]:
    return {"kind": "permission", "request": dataclasses.asdict(request)}


def ask_question(question: str, options: list[str] | None) -> dict[str, Any]:
    return {"kind": "ask", "question": question, "options": options}


def session_dir(session_id: str, create: bool) -> str:
    """The session's directory of listeners (RuntimeDirError when it cannot be used)."""
    if not _SAFE_ID.fullmatch(session_id):
        raise rundir.RuntimeDirError(f"session id {session_id!r} cannot name a directory")
    path = os.path.join(rundir.runtime_dir(create), "live")
    for p in (path, os.path.join(path, session_id)):
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(p, 0o700)
        rundir.check_private_dir(p, "live dir")
    return os.path.join(path, session_id)


def _ours(sock: socket.socket | None) -> bool:
    return sock is not None and rundir.peer(sock)[1] == os.geteuid()


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


# ---- the origin -------------------------------------------------------------------------------

class Broadcast:
    """One turn's stream to the session's other daemons (see the module doc)."""

    def __init__(self, session_id: str, turn_id: str, client: str, prompt: str, own: str | None,
                 on_cancel: Callable[[], object] = lambda: None):
        self.session_id, self.turn_id = session_id, turn_id
        self.on_cancel = on_cancel
        """An observer's client cancelled the turn (a `cancel` line back on its connection)."""
        self._hearing: set[asyncio.Task[None]] = set()
        self.client = client
        """This daemon's client's name (who answered, when it did)."""
        self._start = _line({"t": "start", "turn": turn_id, "client": client, "prompt": prompt})
        self._own = own
        """This daemon's own listener for the session (not an observer)."""
        self._writers: dict[str, asyncio.StreamWriter] = {}
        self._backlog: list[bytes | TextDelta] | None = []
        """The turn's lines so far, for an observer that connects later (None: over LIMIT, dropped);
        a text delta sent while no observer was connected is kept unencoded (see the module doc)."""
        self._backlog_size = 0
        """The bytes of the backlog's lines, the unencoded deltas' counted as they will encode."""
        self._unencoded = False
        """The backlog holds unencoded deltas."""
        self._frames: dict[str | None, tuple[bytes, bytes]] = {}
        """Parent call id -> a text delta's line before and after its encoded text."""
        self._partial: set[str] = set()
        """Observers that connected after the backlog was dropped: they missed a part."""
        self._tried: set[str] = set()
        self._ended = False
        self.cut = 0
        """Observers cut off for being too far behind."""
        self._scan: asyncio.Task[None] | None = None
        self._waiting: dict[str, Callable[[Any, str], None]] = {}
        """Call id -> what an observer's answer to its open question does."""
        self._asks: dict[str, bytes] = {}
        """Call id -> the `ask` line of a question still open: an observer that connects later gets
        it after the backlog (a question decided before it came is not asked there)."""

    def start(self) -> None:
        self._scan = asyncio.get_running_loop().create_task(self._scanning())

    async def _scanning(self) -> None:
        while not self._ended:
            try:
                await self._connect_new()
            except rundir.RuntimeDirError as e:
                log.info("session %s: no live stream: %s", self.session_id, e)
                return
            await asyncio.sleep(RESCAN)

    async def _connect_new(self) -> None:
        directory = session_dir(self.session_id, create=False)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith(".sock") or path == self._own or path in self._tried:
                continue
            self._tried.add(path)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
                    continue
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), CONNECT_TIMEOUT)
                except ConnectionRefusedError:  # its daemon died without removing it
                    os.unlink(path)
                    continue
                except (OSError, asyncio.TimeoutError):
                    continue
                if self._ended or not _ours(writer.get_extra_info("socket")):
                    writer.transport.abort()
                    continue
                self._writers[path] = writer
                task = asyncio.get_running_loop().create_task(self._hear(reader))
                self._hearing.add(task)
                task.add_done_callback(self._hearing.discard)
                if self._backlog is None:
                    self._partial.add(path)
                self._write(path, writer, b"".join([self._start, *self._encoded_backlog(), *self._asks.values()]))

    async def _hear(self, reader: asyncio.StreamReader) -> None:
        """What an observer says back: `cancel` (its client cancelled the turn) or `answer` (its
        client answered an open question)."""
        with contextlib.suppress(OSError, ValueError, asyncio.LimitOverrunError):
            while line := await reader.readline():
                msg = json.loads(line)
                if not isinstance(msg, dict) or msg.get("turn") != self.turn_id:
                    continue
                if msg.get("t") == "cancel":
                    log.info("session %s: turn %s cancelled from another daemon", self.session_id, self.turn_id)
                    self.on_cancel()
                elif msg.get("t") == "answer" and (answered := self._waiting.get(str(msg.get("id")))) is not None:
                    answered(msg.get("answer"), str(msg.get("by") or "another editor"))

    async def first_answer(self, call_id: str, question: dict[str, Any], own: Awaitable[Any],
                           valid: Callable[[Any], bool], decided: Callable[[Any, str], None]) -> Any:
        """Ask `question` (about the call `call_id`) in every observer's client while `own` (this
        daemon's client's answer, named `client`) runs; the first answer decides: `decided(answer,
        by)` is called with it (the observers hear of it) before the other askers are withdrawn.
        An observer's answer counts when `valid`. A dead or silent observer changes nothing."""
        loop = asyncio.get_running_loop()
        first: asyncio.Future[tuple[Any, str]] = loop.create_future()

        def answer(value: Any, by: str) -> None:
            if not first.done():
                first.set_result((value, by))

        mine = asyncio.ensure_future(own)

        def own_answered(task: asyncio.Future[Any]) -> None:
            if first.done():
                return
            if task.cancelled():  # not by us (we cancel it once `first` is done): as without the tee
                first.cancel()
            elif (error := task.exception()) is not None:
                first.set_exception(error)
            else:
                first.set_result((task.result(), self.client))

        mine.add_done_callback(own_answered)
        self._waiting[call_id] = lambda value, by: answer(value, by) if valid(value) else None
        ask = self._asks[call_id] = _line({"t": "ask", "turn": self.turn_id, "id": call_id, "question": question})
        for path, writer in list(self._writers.items()):
            self._write(path, writer, ask)
        try:
            value, by = await first
            decided(value, by)
            return value
        finally:
            self._waiting.pop(call_id, None)
            self._asks.pop(call_id, None)
            mine.cancel()  # this daemon's client's request, when an observer answered first: withdrawn

    def _write(self, path: str, writer: asyncio.StreamWriter, data: bytes) -> None:
        """Never waits: an observer more than LIMIT behind is cut off."""
        if writer.transport.is_closing():
            self._writers.pop(path, None)
        elif writer.transport.get_write_buffer_size() + len(data) > LIMIT:
            log.info("session %s: an observer fell %d bytes behind: cut off", self.session_id, LIMIT)
            self.cut += 1
            writer.transport.abort()
            self._writers.pop(path, None)
        else:
            writer.write(data)

    def send(self, event: Event) -> None:
        if self._ended:
            return
        if not self._writers:  # nobody hears it now: only the backlog may need it
            if self._backlog is None:
                return
            if type(event) is TextDelta:
                self._unencoded = True
                self._keep(event, self._delta_size(event))
                return
        data = self._event_line(event)
        if self._backlog is not None:
            self._keep(data, len(data))
        for path, writer in list(self._writers.items()):
            self._write(path, writer, data)

    def _event_line(self, event: Event) -> bytes:
        if type(event) is TextDelta:
            head, tail = self._frame(event.parent_tool_call_id)
            return head + json.encoder.encode_basestring(event.text).encode("utf-8", "surrogatepass") + tail
        return _line({"t": "event", "turn": self.turn_id, "event": event_to_json(event)})

    def _frame(self, parent: str | None) -> tuple[bytes, bytes]:
        """The line of a text delta of `parent` before and after its encoded text: an empty delta's
        line cut around its `""`. The delta's text is encoded as json.dumps encodes a string
        (ensure_ascii=False), so its line is _line's byte for byte, for ~1 µs instead of ~10."""
        frame = self._frames.get(parent)
        if frame is None:
            empty = _line({"t": "event", "turn": self.turn_id, "event": event_to_json(TextDelta("", parent))})
            # the only unescaped `"text":""` in it: a quote inside a JSON string is escaped
            cut = empty.index(b'"text":""') + len(b'"text":')
            frame = self._frames[parent] = (empty[:cut], empty[cut + len(b'""'):])
        return frame

    def _keep(self, item: bytes | TextDelta, size: int) -> None:
        assert self._backlog is not None
        self._backlog.append(item)
        self._backlog_size += size
        if self._backlog_size > LIMIT:
            self._backlog = None
            self._unencoded = False

    def _delta_size(self, event: TextDelta) -> int:
        """len(self._event_line(event)), without making the line."""
        head, tail = self._frame(event.parent_tool_call_id)
        text = json.encoder.encode_basestring(event.text)
        return len(head) + len(tail) + (len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass")))

    def _encoded_backlog(self) -> list[bytes]:
        """The backlog's lines, its unencoded deltas encoded now, once (an observer connects)."""
        if self._backlog is None:
            return []
        if self._unencoded:
            self._backlog = [self._event_line(e) if isinstance(e, TextDelta) else e for e in self._backlog]
            self._unencoded = False
        return typing.cast(list[bytes], self._backlog)

    def end(self, recorded: list[str]) -> None:
        """The turn ended (its records are in the session file, its prompt under the checkpoint ids
        `recorded`): tell the observers, let go."""
        if self._ended:
            return
        for path, writer in list(self._writers.items()):
            self._write(path, writer, _line({"t": "end", "turn": self.turn_id, "recorded": recorded,
                                             "partial": path in self._partial}))
        self._ended = True
        if self._scan is not None:
            self._scan.cancel()
        for task in self._hearing:
            task.cancel()
        for writer in self._writers.values():
            writer.close()  # what is buffered is still sent
        self._writers.clear()


class Teed:
    """The turn's Frontend, whose events also go to the broadcast."""

    def __init__(self, inner: Frontend, broadcast: Broadcast):
        self.inner, self.broadcast = inner, broadcast
        self._asking: list[ToolCallStarted] = []
        """The ask_user calls running (the call a question belongs to: the last one started)."""

    def __getattr__(self, name: str) -> Any:
        """The inner frontend's optional ports (WorkspaceTruster, ...): isinstance checks of those
        runtime protocols see what the inner one offers."""
        return getattr(self.inner, name)

    def emit(self, event: Event) -> None:
        if isinstance(event, ToolCallStarted) and event.name == "ask_user":
            self._asking.append(event)
        elif isinstance(event, ToolCallFinished):
            self._asking = [c for c in self._asking if c.tool_call_id != event.tool_call_id]
        self.broadcast.send(event)
        self.inner.emit(event)

    def _resolved(self, call_id: str, parent: str | None, decision: Resolution, by: str) -> None:
        self.emit(PermissionResolved(call_id, decision, by, parent))

    async def confirm(self, request: PermissionRequest) -> Decision:
        """Asked in every client that has the session open; the first answer decides."""
        decision: Decision = await self.broadcast.first_answer(
            request.tool_call_id, permission_question(request), self.inner.confirm(request),
            lambda answer: answer in DECISIONS,
            lambda answer, by: self._resolved(request.tool_call_id, None, answer, by))
        return decision

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        """As confirm; an observer's dismissal is not an answer (this daemon's client's is)."""
        call = self._asking[-1] if self._asking else None
        if call is None:  # not from an ask_user call: nothing to name it by
            return await self.inner.ask(question, options)
        answer: str | None = await self.broadcast.first_answer(
            call.tool_call_id, ask_question(question, options), self.inner.ask(question, options),
            lambda answer: isinstance(answer, str),
            lambda answer, by: self._resolved(call.tool_call_id, call.parent_tool_call_id,
                                              "dismissed" if answer is None else "answered", by))
        return answer

    def can_apply_edit(self) -> bool:
        return self.inner.can_apply_edit()

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        return await self.inner.apply_edit(path, before, after)

    async def editor_text(self, path: Path) -> str | None:
        return await self.inner.editor_text(path)

    def writes_all_files(self) -> bool:
        return self.inner.writes_all_files()

    def command_runner(self) -> CommandRunner | None:
        return self.inner.command_runner()

    async def diagnostics(self, uris: list[str], wait_ms: int) -> list[FileDiagnostics] | None:
        return await self.inner.diagnostics(uris, wait_ms)


# ---- an observer ------------------------------------------------------------------------------

OnStart = Callable[[str, str, str], None]
"""(turn id, the origin's client name, the prompt)."""
OnEvent = Callable[[str, Event], None]
OnAsk = Callable[[str, str, dict[str, Any]], None]
"""(turn id, the call asked about, the question: permission_question or ask_question)."""
OnEnd = Callable[[str, bool, list[str]], None]
"""(turn id, whole: the stream reached the turn's end (False: cut off, or the origin died), the
checkpoint ids its records carry in the session file)."""


class Listener:
    """This daemon's socket for one session it has open: origins connect while their turns run."""

    def __init__(self, session_id: str, on_start: OnStart, on_event: OnEvent, on_end: OnEnd,
                 on_ask: OnAsk = lambda turn, call, question: None):
        self.session_id = session_id
        self.on_start, self.on_event, self.on_end, self.on_ask = on_start, on_event, on_end, on_ask
        self.path: str | None = None
        self._server: asyncio.Server | None = None
        self._origins: dict[str, asyncio.StreamWriter] = {}
        """Turn id -> the connection its origin streams it on (for a cancel back)."""
        self._conns: set[asyncio.StreamWriter] = set()
        """Every origin's connection: closed with the listener (Server.close leaves them open)."""
        self._closed = False

    async def start(self) -> None:
        """Listen (RuntimeDirError or OSError when it cannot: the session file is then all there is)."""
        directory = session_dir(self.session_id, create=True)
        path = os.path.join(directory, f"{os.getpid()}-{next(_names)}.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead daemon of our pid's (pids are reused)
        self._server = await asyncio.start_unix_server(self._serve, path, limit=LINE_LIMIT)
        os.chmod(path, 0o600)
        self.path = path

    def cancel(self, turn_id: str) -> bool:
        """Ask the turn's origin to cancel it; False when it is not streaming here."""
        return self._back(turn_id, {"t": "cancel", "turn": turn_id})

    def answer(self, turn_id: str, call_id: str, answer: Any, by: str) -> bool:
        """This daemon's client answered the origin's question about `call_id`."""
        return self._back(turn_id, {"t": "answer", "turn": turn_id, "id": call_id, "answer": answer, "by": by})

    def _back(self, turn_id: str, msg: dict[str, Any]) -> bool:
        writer = self._origins.get(turn_id)
        if writer is None or writer.transport.is_closing():
            return False
        writer.write(_line(msg))
        return True

    def close(self) -> None:
        """Stop listening and hearing: the turns streaming here are told nothing more (no on_end:
        the session is no longer open here, or is open again with another listener)."""
        self._closed = True
        for writer in self._conns:
            writer.transport.abort()
        if self._server is not None:
            self._server.close()
            self._server = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closed or not _ours(writer.get_extra_info("socket")):
            writer.transport.abort()
            return
        self._conns.add(writer)
        turn: str | None = None
        whole = False
        recorded: list[str] = []
        try:
            while (line := await reader.readline()) and not self._closed:
                try:
                    msg = json.loads(line)
                except ValueError:
                    break
                kind = msg.get("t") if isinstance(msg, dict) else None
                if kind == "start" and turn is None and isinstance(msg.get("turn"), str):
                    turn = msg["turn"]
                    self._origins[turn] = writer
                    self.on_start(turn, str(msg.get("client") or ""), str(msg.get("prompt") or ""))
                elif kind == "event" and turn is not None and msg.get("turn") == turn:
                    event = event_from_json(msg.get("event"))
                    if event is not None:
                        self.on_event(turn, event)
                elif (kind == "ask" and turn is not None and msg.get("turn") == turn
                      and isinstance(msg.get("question"), dict)):
                    self.on_ask(turn, str(msg.get("id")), msg["question"])
                elif kind == "end" and turn is not None and msg.get("turn") == turn:
                    whole = msg.get("partial") is not True
                    recorded = [r for r in msg.get("recorded") or () if isinstance(r, str)]
                    break
        except (OSError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.transport.abort()
            self._conns.discard(writer)
            if turn is not None:
                self._origins.pop(turn, None)
                if not self._closed:
                    self.on_end(turn, whole, recorded)
