"""Sessions and the store that holds them (in memory for now; persistence plugs in here)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import SessionNotFound
from ..llm.base import Usage
from ..tools.registry import ToolRegistry

TITLE_MAX = 60


def _now() -> float:
    return time.time()


@dataclass
class Session:
    id: str
    title: str
    tools: ToolRegistry
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The conversation as the model sees it; messages[0] is the system prompt."""
    created_at: float = field(default_factory=_now)
    updated_at: float = field(default_factory=_now)
    provider: str | None = None
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    turn: asyncio.Task | None = None
    turn_seq: int = 0

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    @property
    def message_count(self) -> int:
        return sum(1 for m in self.messages if m.get("role") != "system")

    def title_from(self, text: str) -> None:
        if not self.title:
            line = " ".join(text.split())
            self.title = line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1] + "…"

    def transcript(self) -> list[dict[str, Any]]:
        """Render-ready history: what a client shows when it resumes this session."""
        out: list[dict[str, Any]] = []
        names: dict[str, str] = {}
        for m in self.messages:
            role = m.get("role")
            if role == "system":
                continue
            if role == "assistant":
                if m.get("content"):
                    out.append({"role": "assistant", "text": m["content"]})
                for c in m.get("tool_calls") or ():
                    names[c["id"]] = c["function"]["name"]
                    out.append({"role": "tool_call", "text": c["function"]["arguments"], "toolCallId": c["id"],
                                "name": c["function"]["name"]})
            elif role == "tool":
                cid = m.get("tool_call_id", "")
                out.append({"role": "tool", "text": m.get("content") or "", "toolCallId": cid, "name": names.get(cid)})
            else:
                out.append({"role": role, "text": m.get("content") or ""})
        return out


class SessionStore:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def add(self, session: Session) -> Session:
        self._sessions[session.id] = session
        return session

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def get(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(session_id) from None

    def list(self) -> list[Session]:
        return sorted(self._sessions.values(), key=lambda s: s.updated_at, reverse=True)

    def delete(self, session_id: str) -> Session:
        s = self.get(session_id)
        del self._sessions[session_id]
        return s

    def all(self) -> list[Session]:
        return list(self._sessions.values())
