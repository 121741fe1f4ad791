"""The models the provider's server itself lists (its /v1/models), next to the configured roles:
for toycoder/models/list and /model. The list is cached by the model client; asking again is on demand."""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol

from toycoder_daemon.core.errors import ToyCoderError
from toycoder_daemon.core.ports import ModelsInfo
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.sessions.session import Session

log = logging.getLogger(__name__)


class ModelLookup(Protocol):
    """Whatever knows a session's model: a command's host, or App (toycoder/models/list)."""

    def model_for(self, session: Session | None, role: str | None = None) -> ChatModel: ...


async def with_served(host: ModelLookup, info: ModelsInfo, session: Session | None, *, refresh: bool = False,
                      ask_server: bool = True) -> ModelsInfo:
    """`info` with the current provider's served models filled in (left None when the server cannot list them).
    `ask_server=False`: only what the model client already knows (no request)."""
    try:
        chat = host.model_for(session)
    except ToyCoderError as e:  # no key configured, say: the configured names still show
        log.info("cannot ask the provider for its models: %s", e)
        return info
    if ask_server:
        ask = getattr(chat, "server_info", None)  # only real clients can ask (a scripted model cannot)
        listed = await ask(refresh) if ask is not None else None
    else:
        listed = getattr(chat, "known_server_info", None)
    if listed is None:
        return info
    return dataclasses.replace(info, providers=[
        dataclasses.replace(p, served=tuple(listed.models)) if p.name == info.provider else p for p in info.providers])


def unknown_model_warning(info: ModelsInfo) -> str | None:
    """A warning when the server lists its models and the current one is not among them."""
    served = next((p.served for p in info.providers if p.name == info.provider), None)
    if not served or info.model in served:
        return None
    shown = ", ".join(served[:10]) + (", ..." if len(served) > 10 else "")
    return (f"warning: the server of {info.provider!r} does not list {info.model!r} (it lists: {shown}); "
            "kept anyway, since some servers accept other names")
