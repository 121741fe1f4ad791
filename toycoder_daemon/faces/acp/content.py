"""ACP content and our text, both ways: a prompt's content blocks become the prompt text the core
takes, and a stored transcript becomes the session/update notifications a live client would have
seen (session/load replays it, ending with the session's plan). The slash commands are announced from here too."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from toycoder_daemon.app.application import App
from toycoder_daemon.commands.custom import CommandRow
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


def prompt_parts(blocks: list[Any], root: Path) -> tuple[str, list[dict[str, Any]]]:
    """Content blocks -> our prompt text and its context items (toycoder/prompt's `context`): text as
    is; a resource link as an `@path` mention (attached as the file when the prompt is sent); an
    embedded text resource as the client's text of that file (a selection of all of it), named in
    the text by its path; an image (or an embedded image blob) as an image item. Audio is not read."""
    pieces: list[str] = []
    items: list[dict[str, Any]] = []
    for b in blocks:
        kind = _get(b, "type")
        if kind == "text":
            pieces.append(_get(b, "text"))
        elif kind == "resource_link":
            pieces.append(f"@{shown_uri(_get(b, 'uri'), root)}")
        elif kind == "image":
            items.append({"type": "image", "mimeType": _get(b, "mime_type") or "", "data": _get(b, "data") or ""})
        elif kind == "resource":
            resource = _get(b, "resource")
            uri = _get(resource, "uri")
            if isinstance(text := _get(resource, "text"), str):  # a text resource
                pieces.append(shown_uri(uri, root))
                last = max(0, len(text.splitlines()) - 1)
                items.append({"type": "selection", "uri": uri, "text": text,
                              "range": {"start": {"line": 0, "character": 0}, "end": {"line": last, "character": 1}}})
            elif str(_get(resource, "mime_type") or "").startswith("image/"):
                items.append({"type": "image", "mimeType": _get(resource, "mime_type"), "data": _get(resource, "blob")})
            else:
                pieces.append(f"[{shown_uri(uri, root)}: a binary resource, omitted]")
        else:
            pieces.append(f"[{kind or 'content'} omitted: ToyCoder reads text and images only]")
    text = ""
    for piece in pieces:  # a mention between two text blocks gets a space on each side
        if text and piece and not text[-1].isspace() and not piece[0].isspace():
            text += " "
        text += piece
    return text, items


def commands_update(rows: list[CommandRow]) -> dict[str, Any]:
    """The available_commands_update announcing our slash commands (built-in, custom, MCP prompts)."""
    out = []
    for c in rows:
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
