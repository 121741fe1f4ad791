"""ACP content and our text, both ways: a prompt's content blocks become the prompt text the core
takes, and a stored transcript becomes the session/update notifications a live client would have
seen (session/load replays it, ending with the session's plan). The slash commands are announced from here too."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from toycoder_daemon.app.application import App
from toycoder_daemon.commands.builtin import commands
from toycoder_daemon.core.util import safejson
from toycoder_daemon.core.util.visible import visible
from toycoder_daemon.faces.acp import client as wire
from toycoder_daemon.faces.acp.frontend import locations, tool_kind
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.tools.plan.tool import session_plan


def shown_uri(uri: str, root: Path) -> str:
    """A file URI inside the workspace as a relative path (what the model's tools take)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return uri
    p = Path(unquote(parsed.path))
    return str(p.relative_to(root)) if p == root or root in p.parents else str(p)


def _get(value: Any, key: str) -> Any:
    """A field of the SDK's content block models (None where that kind of block has none)."""
    return getattr(value, key, None)


def prompt_text(blocks: list[Any], root: Path) -> str:
    """Content blocks -> our prompt text: text as is, resources as `@path` mentions, and the text of
    embedded resources appended as context. Images and audio are not read (text-only agent)."""
    pieces: list[str] = []
    context: list[str] = []
    for b in blocks:
        kind = _get(b, "type")
        if kind == "text":
            pieces.append(_get(b, "text"))
        elif kind == "resource_link":
            pieces.append(f"@{shown_uri(_get(b, 'uri'), root)}")
        elif kind == "resource":
            resource = _get(b, "resource")
            pieces.append(f"@{shown_uri(_get(resource, 'uri'), root)}")
            if isinstance(text := _get(resource, "text"), str):  # a text resource (a blob has none)
                context.append(f'<context uri="{_get(resource, "uri")}">\n{text}\n</context>')
        else:
            pieces.append(f"[{kind or 'content'} omitted: ToyCoder reads text only]")
    text = ""
    for piece in pieces:  # a mention between two text blocks gets a space on each side
        if text and piece and not text[-1].isspace() and not piece[0].isspace():
            text += " "
        text += piece
    return text + ("\n\n" + "\n\n".join(context) if context else "")


def commands_update() -> dict[str, Any]:
    """The available_commands_update announcing our slash commands."""
    out = []
    for c in commands.all():
        hint = c.usage.partition(" ")[2]
        out.append({"name": c.name, "description": c.help, **({"input": {"hint": hint}} if hint else {})})
    return {"availableCommands": out, "sessionUpdate": "available_commands_update"}


def replay(transcript: list[TranscriptEntry], app: App) -> list[dict[str, Any]]:
    """A stored conversation as the session/update notifications a client would have seen."""
    updates: list[dict[str, Any]] = []
    for entry in transcript:
        role, text = entry.role, entry.text or ""
        if role == "user":
            updates.append(wire.chunk(text, "user_message_chunk"))
        elif role == "assistant":
            updates.append(wire.chunk(text))
        elif role == "tool_call":
            name = entry.name or "tool"
            try:
                args: Any = safejson.loads(text)  # deep stored arguments must not stop the load
            except ValueError:
                args = text
            t = app.tools.get(name)
            title = t.describe_call(args) if t and isinstance(args, dict) else visible(name)
            updates.append(wire.tool_call(entry.tool_call_id or "", title, tool_kind(name, app), "in_progress",
                                          args, locations(args, app.workspace.root)))
        elif role == "tool":
            status = entry.status or "completed"
            updates.append(wire.tool_call_update(entry.tool_call_id or "",
                                                 "completed" if status == "completed" else "failed",
                                                 [wire.text_content(text)]))
        elif role == "compaction":  # where earlier turns were summarised for the model: a divider
            updates.append(wire.chunk("[earlier turns summarised for the model]\n", "agent_thought_chunk"))
        elif role == "plan":  # the session's plan as the history ends: the client shows it again
            updates.append(wire.plan(entry.plan))
    return updates


def plan_now(s: Session) -> list[dict[str, Any]]:
    """session/resume's one update: the session's plan, when it has one (a client that shows the
    history from its own store may not have kept the checklist; a plan update replaces it whole)."""
    plan = session_plan(s.messages, s.planners)
    return [wire.plan(plan.entries)] if plan and plan.entries else []
