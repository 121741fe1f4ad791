"""The daemon's model clients: one ChatModel per (provider, model name), made by the factory the
app was given on first use and shared by every session (a client holds its connection pool)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from toycoder_daemon.llm.base import ChatModel

ModelFactory = Callable[[str, str], ChatModel]
"""(provider name, model name) -> a chat model; raises ProviderError when it cannot be made."""


class ModelPool:
    def __init__(self, factory: ModelFactory):
        self.factory = factory
        self._made: dict[tuple[str, str], ChatModel] = {}

    def get(self, provider: str, model: str) -> ChatModel:
        made = self._made.get((provider, model))
        if made is None:
            made = self._made[(provider, model)] = self.factory(provider, model)
        return made

    def made(self, provider: str, model: str) -> ChatModel | None:
        """The model if it was made already (nothing is made to answer)."""
        return self._made.get((provider, model))

    async def aclose(self) -> None:
        for m in self._made.values():
            close = getattr(m, "aclose", None)
            if close:
                with contextlib.suppress(Exception):
                    await close()
