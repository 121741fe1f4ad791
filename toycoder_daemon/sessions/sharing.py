"""One session, many daemons: Neovim, VS Code, a script and an ACP client may all have a session
open; only a running turn (or a settings write) holds its lock (sessions/store.py).
A session deleted in one daemon is dropped by the others that have it open, when their poll finds
its file gone or when they next take its lock (SessionDeleted): they never write it again.

Before a turn a daemon takes the lock and catches up on what others appended (read from its last
offset), answering tool calls a killed daemon left open. Between turns each open session is polled
(one stat per interval) so its clients hear about turns made elsewhere.

While a turn runs, its events also go live to the other daemons that have the session open
(sessions/live.py): each listens per open session, and the turn's daemon broadcasts. A turn heard
live to its end is not told again when its records land in the file (by its turn id); one whose
stream was cut (this daemon fell behind, or the other died) is told as the whole history (reset),
with what the file has of it (for clients that can only add: the ACP face).
Its permission requests and questions are asked here too, through the frontend the face shows the
turn in (`asker`); the answer goes back to its daemon, which decides (the first answer wins) and
tells every client (PermissionResolved), when this daemon withdraws its own question.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from toycoder_daemon.agent.react import repair_tool_calls
from toycoder_daemon.core.errors import SessionBusy, SessionDeleted
from toycoder_daemon.core.ports import Asker, Event, Frontend, PermissionRequest, PermissionResolved
from toycoder_daemon.sessions.conversation import Mark, Stored, prompt_turns
from toycoder_daemon.sessions.live import Broadcast, Listener, Teed
from toycoder_daemon.sessions.session import ChangesOf, Session, TranscriptEntry
from toycoder_daemon.sessions.store import Appended

log = logging.getLogger(__name__)

GRACE = 1.0
"""Seconds a turn read from the file waits before its clients are told, unless it ends first: its
daemon may be about to stream it live (then it is not told from the file at all)."""

OnChanged = Callable[[str, list[TranscriptEntry], bool, list[TranscriptEntry]], None]
"""(session id, the new transcript entries, reset: the entries are the whole history, untold: the
entries its clients were not told, live or from the file: without reset, the entries; after a cut
live stream, what the file had of the turns not heard whole (for a client that can only add, never
replace); after a rewrite elsewhere, none (what is new is not known))."""
OnLiveTurn = Callable[[str, str, str, bool, str], None]
"""(session id, turn id, the other daemon's client name, running, its prompt)."""
OnLiveEvent = Callable[[str, str, Event], None]
"""(session id, turn id, an event of the turn running in another daemon)."""


def _open_turn(records: list[Stored], ends: dict[str, Any]) -> tuple[int, str] | None:
    """(index, checkpoint id) of the last prompt in `records` whose turn has not ended, if any."""
    for i in range(len(records) - 1, -1, -1):
        r = records[i]
        if not isinstance(r, Mark) and r["role"] == "user" and r.get("turn"):
            turn = str(r.get("turn"))
            return None if turn in ends else (i, turn)
    return None


def _untold(records: list[Stored], heard: set[str]) -> list[Stored]:
    """`records` without those of turns heard live (a turn's records run from its prompt, with any
    context mark written just before it, to the next prompt)."""
    out: list[Stored] = []
    marks: list[Stored] = []
    skipping = False
    for r in records:
        if isinstance(r, Mark):
            marks.append(r)
            continue
        if r["role"] == "user":
            skipping = r.get("turn") in heard
        if not skipping:
            out += marks
            out.append(r)
        marks = []
    return out + ([] if skipping else marks)


class Sharing:
    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.on_changed: OnChanged = lambda session_id, entries, reset, untold: None
        """Set by the wire face: tell the session's clients."""
        self.on_deleted: Callable[[str], None] = lambda session_id: None
        """Set by the App: another daemon deleted a session this one has open (found by the poll)."""
        self.client = ""
        """Set by the wire face: its client's name (clientInfo.name), told to the other daemons."""
        self.on_live_turn: OnLiveTurn = lambda session_id, turn_id, client, running, prompt: None
        """Set by the wire face: a turn started (running) or ended in another daemon."""
        self.on_live_event: OnLiveEvent | None = None
        """Set by the wire face: an event of a turn running in another daemon, as it happens. Unset,
        this daemon does not listen: its clients hear other daemons' turns from the file."""
        self.asker: Callable[[str], Asker | None] = lambda session_id: None
        """Set by the wire face: the frontend that shows the session's turn heard live (its questions
        are asked there); None: this daemon's clients are not asked."""
        self._asking: dict[tuple[str, str], asyncio.Task[None]] = {}
        """(session, call id) -> a question of another daemon's turn open in this daemon's client."""
        self._reading: dict[str, asyncio.Lock] = {}
        self._watches: dict[str, asyncio.Task[None]] = {}
        self._listeners: dict[str, Listener] = {}
        self._broadcasts: dict[str, tuple[Broadcast, int]] = {}
        """Session -> this daemon's turn's broadcast, and how many records the session had before it."""
        self._live: dict[str, str] = {}
        """Session -> the turn of another daemon heard live now (the poll waits for its end)."""
        self._heard: dict[str, set[str]] = {}
        """Turns of other daemons heard live to their end: not told again from the file."""
        self._held: dict[str, list[Stored]] = {}
        """Records read but not told yet: a turn that may be about to be heard live (GRACE)."""
        self._first_seen: dict[tuple[str, str], float] = {}
        self._opened_busy: set[str] = set()
        """Sessions opened while another daemon's turn ran, not shown to a client yet (running_elsewhere)."""
        self._stale: set[str] = set()
        """Sessions whose live stream was cut: their clients get the whole history next."""

    async def catch_up(self, s: Session) -> Appended | None:
        """Take in what other daemons wrote since we last read; None when nothing was new.

        The file's offset moves when the read ends, in its thread, and the session takes the read in
        later, on the loop: the look at the offset waits for a read under way (the poll's, the live
        end's), or a turn starting meanwhile would find nothing new and run without what it read."""
        if s.file is None:
            return None
        async with self._reading.setdefault(s.id, asyncio.Lock()):
            if not s.file.changed_elsewhere():
                return None
            new = await asyncio.to_thread(s.file.read_new)
            if new.meta:
                s.apply_meta(new.meta)
            if new.messages or new.reset:
                s.messages.received(new.messages, whole=new.reset)
        return new if (new.meta or new.messages or new.reset) else None

    def _tell(self, s: Session, changes: Callable[[], ChangesOf], new: Appended | None) -> None:
        """The session's clients hear what another daemon added (its turns' `changes` included),
        but for turns they heard live; everything when a live stream was cut. When this daemon listens,
        a turn that started less than GRACE ago and has not ended waits: its daemon may be about to
        stream it live."""
        rewritten = new is not None and new.reset
        reset = rewritten or s.id in self._stale
        self._stale.discard(s.id)
        held = self._held.pop(s.id, [])
        records = [] if rewritten else _untold(held + (new.messages if new else []), self._heard.get(s.id, set()))
        if reset:
            self.on_changed(s.id, s.transcript(changes(), s.messages.records()), True,
                            s.transcript(changes(), records) if records else [])
            return
        start = _open_turn(records, s.turn_ends) if s.id in self._listeners else None
        if start is not None:
            first = self._first_seen.setdefault((s.id, start[1]), time.monotonic())
            if time.monotonic() - first < GRACE:
                self._held[s.id], records = records[start[0]:], records[:start[0]]
        if records:
            entries = s.transcript(changes(), records)
            self.on_changed(s.id, entries, False, entries)

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
            if (new and (new.messages or new.reset)) or s.id in self._stale:
                self._tell(s, changes, new)
        except BaseException:
            s.file.release()
            raise

    # ---- watching open sessions -------------------------------------------------------------

    def release_after(self, s: Session, turn: asyncio.Future[object]) -> None:
        """When the turn ends: the lock goes, and its broadcast (if any) ends, its records written."""
        live = self._broadcasts.pop(s.id, None)
        if s.file is not None:
            file = s.file
            turn.add_done_callback(lambda _: file.release())
        if live is not None:
            broadcast, start = live
            turn.add_done_callback(lambda _: broadcast.end(prompt_turns(s.messages.records()[start:])))

    def published(self, s: Session, turn_id: str, prompt: str, frontend: Frontend,
                  cancel: Callable[[], object] = lambda: None) -> Frontend:
        """`frontend` for this daemon's turn, whose events also go live to the session's other
        daemons (from a loop; until release_after's turn ends); `cancel`: what a cancel from one of
        their clients does."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return frontend
        own = self._listeners.get(s.id)
        broadcast = Broadcast(s.id, turn_id, self.client or "another editor", prompt, own.path if own else None,
                              cancel)
        broadcast.start()
        self._broadcasts[s.id] = (broadcast, len(s.messages.records()))
        return Teed(frontend, broadcast)

    # ---- hearing other daemons' turns live --------------------------------------------------

    def running_elsewhere(self, s: Session) -> str | None:
        """The turn running in another daemon when this daemon opened the session, if it will hear it
        live: the client opening it is shown the history before that turn (Session.transcript's
        before_turn), and hears the turn from its start (the origin sends what it has streamed so
        far), never as a half turn whose pending call looks interrupted. Its records are held, as a
        poll holds them: told from the file unless heard live to their end (_tell). Asked once,
        when the session is first shown; later (a client reloading) the file's view is shown."""
        if s.id not in self._opened_busy:
            return None
        self._opened_busy.discard(s.id)
        if self.on_live_event is None or s.id not in self._watches or s.id in self._live:
            return None
        records = s.messages.records()
        start = _open_turn(records, s.turn_ends)
        if start is None:
            return None
        self._held[s.id] = records[start[0]:]
        self._first_seen.setdefault((s.id, start[1]), time.monotonic())
        return start[1]

    def cancel_elsewhere(self, session_id: str) -> bool:
        """Cancel the turn heard live in the session (its daemon cancels it); False when none is."""
        listener, turn = self._listeners.get(session_id), self._live.get(session_id)
        return listener is not None and turn is not None and listener.cancel(turn)

    async def _answer(self, listener: Listener, asker: Asker, turn_id: str, call_id: str,
                      question: dict[str, Any]) -> None:
        """Ask this daemon's client the other daemon's question; its answer goes back there. A
        question not answered here (dismissed, timed out, one this client cannot ask) is left to the
        other clients."""
        try:
            if question.get("kind") == "permission":
                answer: Any = await asker.permission(PermissionRequest(**question.get("request") or {}))
            else:
                options = question.get("options")
                answer = await asker.ask(str(question.get("question") or ""),
                                         [str(o) for o in options] if isinstance(options, list) else None)
        except TypeError as e:  # another version's question
            log.info("session %s: a question from another daemon not asked: %s", listener.session_id, e)
            return
        finally:
            self._asking.pop((listener.session_id, call_id), None)
        if answer is not None:
            listener.answer(turn_id, call_id, answer, self.client or "another editor")

    def _withdraw(self, session_id: str, call_id: str | None = None) -> None:
        """Cancel this daemon's client's question about `call_id` (every one of the session: None)."""
        for key in [k for k in self._asking if k[0] == session_id and call_id in (None, k[1])]:
            self._asking.pop(key).cancel()

    async def _listen(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        listener: Listener

        def start(turn_id: str, client: str, prompt: str) -> None:
            self._live[s.id] = turn_id
            self.on_live_turn(s.id, turn_id, client, True, prompt)

        def event(turn_id: str, e: Event) -> None:
            if self._live.get(s.id) == turn_id and self.on_live_event is not None:
                self.on_live_event(s.id, turn_id, e)
            if isinstance(e, PermissionResolved):  # decided: this client's prompt, if still open, goes
                self._withdraw(s.id, e.tool_call_id)

        def ask(turn_id: str, call_id: str, question: dict[str, Any]) -> None:
            asker = self.asker(s.id)
            if self._live.get(s.id) != turn_id or asker is None:
                return
            self._withdraw(s.id, call_id)
            self._asking[(s.id, call_id)] = asyncio.get_running_loop().create_task(
                self._answer(listener, asker, turn_id, call_id, question))

        def end(turn_id: str, whole: bool, recorded: list[str]) -> None:
            self._withdraw(s.id)
            if self._live.get(s.id) != turn_id:
                return
            del self._live[s.id]
            if whole:
                self._heard.setdefault(s.id, set()).update(recorded)
            else:
                log.info("session %s: the live stream of turn %s was cut: reloading from the file", s.id, turn_id)
                self._stale.add(s.id)
            self.on_live_turn(s.id, turn_id, "", False, "")
            if s.id in self._watches:  # what the file has now, at once rather than at the next poll
                asyncio.get_running_loop().create_task(self._refresh(s, changes))

        if self.on_live_event is None:
            return
        listener = Listener(s.id, start, event, end, ask)
        try:
            await listener.start()
        except OSError as e:  # RuntimeDirError too: the session file is then all there is
            log.info("session %s: not listening for other daemons' turns: %s", s.id, e)
            listener.close()
            return
        self._listeners[s.id] = listener

    def watch(self, s: Session, changes: Callable[[], ChangesOf], busy_elsewhere: bool = False) -> None:
        """Poll `s` while this daemon has it open (from a loop; sync callers' sessions are not polled).
        `busy_elsewhere`: it was opened while another daemon held it (a turn runs there)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if s.id not in self._watches and s.file is not None:
            self._watches[s.id] = loop.create_task(self._poll(s, changes))
            if busy_elsewhere:
                self._opened_busy.add(s.id)

    def unwatch(self, session_id: str) -> None:
        task = self._watches.pop(session_id, None)
        if task:
            task.cancel()
        self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        self._withdraw(session_id)
        self._reading.pop(session_id, None)
        listener = self._listeners.pop(session_id, None)
        if listener is not None:
            listener.close()
        self._live.pop(session_id, None)
        self._heard.pop(session_id, None)
        self._stale.discard(session_id)
        self._opened_busy.discard(session_id)
        self._held.pop(session_id, None)
        for key in [k for k in self._first_seen if k[0] == session_id]:
            del self._first_seen[key]

    def close(self) -> None:
        for session_id in list(self._watches):
            self.unwatch(session_id)

    async def _poll(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        await self._listen(s, changes)
        while True:
            await asyncio.sleep(self.interval)
            if s.file is not None and s.file.gone():  # deleted elsewhere: the watch ends here
                self._watches.pop(s.id, None)
                self._forget(s.id)
                self.on_deleted(s.id)
                return
            await self._refresh(s, changes)

    async def _refresh(self, s: Session, changes: Callable[[], ChangesOf]) -> None:
        """Catch up with the file and tell the clients, unless a turn runs here or is heard live."""
        if s.busy or s.file is None or s.file.held or s.id in self._live:
            return  # our own turn: it catches up when it starts; a live one: at its end
        try:
            new = await self.catch_up(s)
        except (OSError, ValueError) as e:
            log.warning("session %s: could not read what other daemons wrote: %s", s.id, e)
            return
        if (new and (new.messages or new.reset)) or s.id in self._stale or s.id in self._held:
            try:
                self._tell(s, changes, new)
            except Exception:  # a face's failure must not stop the watch
                log.exception("session %s: telling the clients failed", s.id)
