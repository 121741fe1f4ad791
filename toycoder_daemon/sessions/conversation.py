"""Conversation: the message list of a session, which owns its persistence.

Every mutation goes through a method that writes: `append`/`extend` hand the new messages to the
sink (one appended line each, so a crash loses at most the message being written), `replace_all`
(compaction) rewrites the whole file off the event loop. There is no list API to bypass them.
messages[0] is the system prompt: rendered afresh on load, never stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, overload

from toycoder_daemon.core.messages import Message, SystemMessage


class ConversationSink(Protocol):
    """Where a conversation's stored messages go (a session file; tests use a list)."""

    def append(self, messages: list[Message]) -> None:
        """Add messages at the end, durably enough to survive the daemon being killed."""

    async def rewrite(self, messages: list[Message]) -> None:
        """Replace everything stored with `messages` (atomically; off the event loop)."""


class Conversation(Sequence[Message]):
    def __init__(self, system: str, stored: Iterable[Message] = (), sink: ConversationSink | None = None):
        first: SystemMessage = {"role": "system", "content": system}
        self._items: list[Message] = [first, *stored]
        self._sink = sink

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
        first = self._items[0]
        return first["content"] if first["role"] == "system" else ""

    def stored(self) -> list[Message]:
        """What the session file holds: everything but the system prompt."""
        return [m for m in self._items if m["role"] != "system"]

    def snapshot(self) -> list[Message]:
        """A copy of the whole list (system prompt included), e.g. for compaction to work on."""
        return list(self._items)

    def append(self, message: Message) -> None:
        self._items.append(message)
        if self._sink:
            self._sink.append([message])

    def extend(self, messages: Iterable[Message]) -> None:
        added = list(messages)
        if not added:
            return
        self._items.extend(added)
        if self._sink:
            self._sink.append(added)

    def received(self, messages: list[Message], *, whole: bool = False) -> None:
        """Messages another daemon already stored (so not written again): appended, or with
        `whole` the stored conversation entire (it rewrote the file)."""
        self._items = [self._items[0], *messages] if whole else [*self._items, *messages]

    async def replace_all(self, messages: list[Message]) -> None:
        """The conversation becomes `messages` (a leading system message replaces the prompt;
        without one the current prompt is kept), and the file is rewritten to match."""
        if messages and messages[0]["role"] == "system":
            self._items = list(messages)
        else:
            self._items = [self._items[0], *messages]
        if self._sink:
            await self._sink.rewrite(self.stored())
