"""One session, many daemons: Neovim, VS Code, a script and an ACP client may all have a session
open; only a running turn (or a settings write) holds its lock (sessions/store.py).
A session deleted in one daemon is dropped by the others that have it open, when their poll finds
its file gone or when they next take its lock (SessionDeleted): they never write it again.

Before a turn a daemon takes the lock and catches up on what others appended (read from its last
offset), answering tool calls a killed daemon left open. Between turns each open session is polled
(one stat per interval) so its clients hear about turns made elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from toycoder_daemon.agent.react import repair_tool_calls
from toycoder_daemon.core.errors import SessionBusy, SessionDeleted
from toycoder_daemon.sessions.session import ChangesOf, Session, TranscriptEntry
from toycoder_daemon.sessions.store import Appended

log = logging.getLogger(__name__)

OnChanged = Callable[[str, list[TranscriptEntry], bool], None]
"""(session id, the new transcript entries, reset: the entries are the whole history)."""


class Sharing:
    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.on_changed: OnChanged = lambda session_id, entries, reset: None
        """Set by the wire face: tell the session's clients."""
        self.on_deleted: Callable[[str], None] = lambda session_id: None
        """Set by the App: another daemon deleted a session this one has open (found by the poll)."""
        self._reading: dict[str, asyncio.Lock] = {}
        self._watches: dict[str, asyncio.Task[None]] = {}

    async def catch_up(self, s: Session) -> Appended | None:
        """Take in what other daemons wrote since we last read; None when nothing was new."""
        if s.file is None or not s.file.changed_elsewhere():
            return None
        async with self._reading.setdefault(s.id, asyncio.Lock()):
            if not s.file.changed_elsewhere():  # read meanwhile by the other caller
                return None
            new = await asyncio.to_thread(s.file.read_new)
        if new.meta:
            s.apply_meta(new.meta)
        if new.messages or new.reset:
            s.messages.received(new.messages, whole=new.reset)
        return new if (new.meta or new.messages or new.reset) else None

    def _tell(self, s: Session, changes: Callable[[], ChangesOf], new: Appended) -> None:
        """The session's clients hear what another daemon added (its turns' `changes` included)."""
        entries = s.transcript(changes(), s.messages.records() if new.reset else new.messages)
        self.on_changed(s.id, entries, new.reset)

    async def begin_turn(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        """Hold the session for a turn of this daemon: SessionBusy while another daemon's (or this
        daemon's own) turn runs; the caller releases `s.file` when the turn ends (release_after).
        `changes`: gives, when news comes, a turn's `changes` entry by turn id (the session's checkpoints
        as they are then), which the news from elsewhere shows."""
        if s.file is None:
            return
        if s.file.held:
            raise SessionBusy(s.id)
        try:
            s.file.acquire()
        except SessionDeleted:  # before the poll found out
            self.unwatch(s.id)
            self.on_deleted(s.id)
            raise
        try:
            new = await self.catch_up(s)
            history = s.messages.history()
            repaired = repair_tool_calls(history)
            if repaired is not history:  # a daemon was killed mid-turn: its open calls get an answer
                log.info("session %s: answered tool calls left open by an interrupted turn", s.id)
                if s.messages.repair(repaired):
                    await s.messages.rewrite()
            if new and (new.messages or new.reset):
                self._tell(s, changes, new)
        except BaseException:
            s.file.release()
            raise

    # ---- watching open sessions -------------------------------------------------------------

    def release_after(self, s: Session, turn: asyncio.Future[object]) -> None:
        if s.file is not None:
            file = s.file
            turn.add_done_callback(lambda _: file.release())

    def watch(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        """Poll `s` while this daemon has it open (from a loop; sync callers' sessions are not polled)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if s.id not in self._watches and s.file is not None:
            self._watches[s.id] = loop.create_task(self._poll(s, changes))

    def unwatch(self, session_id: str) -> None:
        task = self._watches.pop(session_id, None)
        if task:
            task.cancel()
        self._reading.pop(session_id, None)

    def close(self) -> None:
        for session_id in list(self._watches):
            self.unwatch(session_id)

    async def _poll(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if s.file is not None and s.file.gone():  # deleted elsewhere: the watch ends here
                self._watches.pop(s.id, None)
                self._reading.pop(s.id, None)
                self.on_deleted(s.id)
                return
            if s.busy or s.file is None or s.file.held:
                continue  # our own turn: it catches up when it starts
            try:
                new = await self.catch_up(s)
            except (OSError, ValueError) as e:
                log.warning("session %s: could not read what other daemons wrote: %s", s.id, e)
                continue
            if new and (new.messages or new.reset):
                with contextlib.suppress(Exception):  # a face's failure must not stop the watch
                    self._tell(s, changes, new)
