"""Conversation: a session's history, which owns its persistence, and the model's view of it.

The history is every message the person saw, in order; it is never cut. Compaction (and cutting a
message too large for the model's window) does not remove anything: it adds a `Mark`, which says
where the model's context now starts: the mark's `head` (the summary, and what compaction kept
verbatim), then the history from its `start`. Iterating a Conversation gives the model's view
(system prompt, head, history[start:]); `history()` gives what the person sees.

Every mutation goes through a method that writes: `append`/`extend` hand the new messages to the
sink (one appended line each, so a crash loses at most the message being written), `replace_all`
appends a mark (one line). Only a repair that inserts into the middle of the history (answers to
tool calls a killed daemon left open, before later messages) rewrites the whole file, off the event
loop. There is no list API to bypass them. messages[0] is the system prompt: rendered afresh on
load, never stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload

from toycoder_daemon.core.messages import Message, SystemMessage


@dataclass(frozen=True)
class Mark:
    """From here on the model's context is `head`, then the stored history from index `start`.
    `info`: what made it ({"strategy": "summary" | "truncate", "before", "after"} for a compaction,
    {"strategy": "trim"} for a message cut to fit the window)."""

    start: int
    head: tuple[Message, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def compaction(self) -> bool:
        return self.info.get("strategy") in ("summary", "truncate")

    @property
    def summary(self) -> str:
        """The summary the model got instead of the earlier turns ("" when they were truncated)."""
        return str(self.info.get("summary") or "")


Stored = Message | Mark
"""One record of a session file's history: a message, or a mark where the model's context moved."""


def prompt_turns(records: list[Stored]) -> list[str]:
    """The turn ids of the prompts among `records` (a turn's prompt, or a restore's note)."""
    return [str(r.get("turn")) for r in records if not isinstance(r, Mark) and r["role"] == "user" and r.get("turn")]


class ConversationSink(Protocol):
    """Where a conversation's stored messages go (a session file; tests use a list)."""

    def append(self, messages: list[Message]) -> None:
        """Add messages at the end, durably enough to survive the daemon being killed."""

    def mark(self, mark: Mark) -> None:
        """Add a mark at the end."""

    async def rewrite(self, records: list[Stored]) -> None:
        """Replace everything stored with `records` (atomically; off the event loop)."""


class Conversation(Sequence[Message]):
    def __init__(self, system: str, stored: Iterable[Stored] = (), sink: ConversationSink | None = None):
        self._system: SystemMessage = {"role": "system", "content": system}
        self._records: list[Stored] = []
        self._history: list[Message] = []
        self._mark: Mark | None = None
        self._items: list[Message] = [self._system]
        self._sink = sink
        self._take(stored)

    def _take(self, records: Iterable[Stored]) -> None:
        """Records (read from the file, or written by another daemon) added at the end, unwritten."""
        for r in records:
            self._records.append(r)
            if isinstance(r, Mark):
                self._mark = r
                self._items = [self._system, *r.head, *self._history[r.start:]]
            else:
                self._history.append(r)
                self._items.append(r)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._items[index]

    @property
    def system(self) -> str:
        return self._system["content"]

    def history(self) -> list[Message]:
        """Every stored message, compacted ones included: what the person saw."""
        return list(self._history)

    def stored(self) -> list[Message]:
        """The model's view without the system prompt (what the file held before marks existed)."""
        return self._items[1:]

    def records(self) -> list[Stored]:
        """Messages and marks in the order they were written (what the file holds)."""
        return list(self._records)

    def snapshot(self) -> list[Message]:
        """A copy of the model's view (system prompt included), e.g. for compaction to work on."""
        return list(self._items)

    def append(self, message: Message) -> None:
        self._records.append(message)
        self._history.append(message)
        self._items.append(message)
        if self._sink:
            self._sink.append([message])

    def extend(self, messages: Iterable[Message]) -> None:
        added = list(messages)
        if not added:
            return
        self._records.extend(added)
        self._history.extend(added)
        self._items.extend(added)
        if self._sink:
            self._sink.append(added)

    def received(self, records: list[Stored], *, whole: bool = False) -> None:
        """Records another daemon already stored (so not written again): appended, or with
        `whole` the stored history entire (it rewrote the file)."""
        if whole:
            self._records, self._history, self._mark, self._items = [], [], None, [self._system]
        self._take(records)

    async def replace_all(self, messages: list[Message], **info: Any) -> None:
        """The model's view becomes `messages` (a leading system message replaces the prompt; without
        one the current prompt is kept); the history stays whole. The messages that end `messages`
        and are the history's own last ones (the same objects) stay where they are; what comes
        before them is the new mark's head. One line is appended to the file: the mark (`info`
        in it says what made it)."""
        if messages and messages[0]["role"] == "system":
            self._system = messages[0]
            messages = messages[1:]
        kept = 0
        while (kept < len(messages) and kept < len(self._history)
               and messages[-1 - kept] is self._history[-1 - kept]):
            kept += 1
        mark = Mark(len(self._history) - kept, tuple(messages[:len(messages) - kept]), dict(info))
        self._take([mark])
        if self._sink:
            self._sink.mark(mark)

    def repair(self, history: list[Message]) -> bool:
        """The history becomes `history`: the current one with messages added (answers to tool
        calls left open). Added only at the end, they are appended; inserted earlier, marks keep
        pointing at the same messages, and True says the file must be rewritten (`rewrite`)."""
        old = self._history
        if len(history) >= len(old) and all(a is b for a, b in zip(history, old, strict=False)):
            self.extend(history[len(old):])
            return False
        where = {id(m): i for i, m in reversed(list(enumerate(history)))}  # an old message -> its new index

        def moved(index: int) -> int:
            return where.get(id(old[index]), index) if index < len(old) else len(history)

        records: list[Stored] = []
        written = taken = 0
        for r in self._records:
            if isinstance(r, Mark):  # it stays after the messages it came after
                end = moved(taken - 1) + 1 if taken else 0
                records.extend(history[written:end])
                written = end
                records.append(Mark(moved(r.start), r.head, r.info))
            else:
                taken += 1
        records.extend(history[written:])
        self.received(records, whole=True)
        return True

    async def rewrite(self) -> None:
        """The file rewritten with what the conversation holds (after a `repair` that inserted)."""
        if self._sink:
            await self._sink.rewrite(self.records())
