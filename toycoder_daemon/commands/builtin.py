"""The built-in slash commands (the seed's, plus what Claude Code and Codex users expect)."""

from __future__ import annotations

import asyncio
import datetime
from typing import TYPE_CHECKING, Any

from .registry import CommandError, CommandRegistry, CommandResult

if TYPE_CHECKING:
    from ..app import App
    from ..sessions.session import Session

commands = CommandRegistry()


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@commands.add("help", "/help [command]", "List the commands, or explain one.", ["?"])
async def help_(app: App, args: list[str], **_: Any) -> CommandResult:
    if args:
        cmd = commands.get(args[0])
        if cmd is None:
            raise CommandError(f"no command /{args[0].lstrip('/')}")
        aliases = f" (also {', '.join('/' + a for a in cmd.aliases)})" if cmd.aliases else ""
        return CommandResult(f"{cmd.usage}{aliases}\n{cmd.help}")
    width = max(len(c.usage) for c in commands.all())
    lines = [f"{c.usage.ljust(width)}  {c.help}" for c in commands.all()]
    return CommandResult("Commands:\n" + "\n".join(lines))


@commands.add("new", "/new [title]", "Start a new session (and switch to it).")
async def new(app: App, raw: str, **_: Any) -> CommandResult:
    s = app.new_session(raw or None)
    return CommandResult(f"new session {s.id}" + (f": {s.title}" if s.title else ""), {"kind": "switch", "sessionId": s.id})


@commands.add("clear", "/clear", "Start over in a new, empty session (the current one stays in /sessions).")
async def clear(app: App, **_: Any) -> CommandResult:
    s = app.new_session(None)
    return CommandResult(f"cleared: new session {s.id}", {"kind": "switch", "sessionId": s.id})


@commands.add("sessions", "/sessions", "List the sessions of this workspace, newest first.", ["ls"])
async def sessions(app: App, session: Session, **_: Any) -> CommandResult:
    rows = app.list_sessions()
    if not rows:
        return CommandResult("no sessions yet")
    lines = [
        f"{'*' if r['id'] == session.id else ' '} {r['id']}  {_when(r['updatedAt'])}  "
        f"{r['messageCount']:>4} msgs  {r['title'] or '(untitled)'}"
        for r in rows
    ]
    return CommandResult("\n".join(lines) + "\n(/switch ID resumes one; a unique prefix of the id is enough)")


@commands.add("switch", "/switch <id>", "Resume a session by its id (or a unique prefix of it).", ["resume"])
async def switch(app: App, args: list[str], **_: Any) -> CommandResult:
    if len(args) != 1:
        raise CommandError("give one session id")
    ids = [r["id"] for r in app.list_sessions() if r["id"].startswith(args[0])]
    if not ids:
        raise CommandError(f"no session starts with {args[0]!r}")
    if len(ids) > 1:
        raise CommandError(f"{args[0]!r} matches {len(ids)} sessions: {', '.join(ids)}")
    s = app.session(ids[0])
    return CommandResult(f"switched to {s.id}: {s.title or '(untitled)'} ({s.message_count} messages)",
                         {"kind": "switch", "sessionId": s.id})


@commands.add("tools", "/tools", "List the tools with their permission level and state.")
async def tools(app: App, session: Session, **_: Any) -> CommandResult:
    lines = []
    for t in session.tools.list():
        state = "enabled" if session.tools.is_enabled(t.name) else "disabled"
        always = ", always allowed" if t.name in session.tools.gate.always else ""
        lines.append(f"{t.name:<16} {t.level:<10} {state}{always}  [{t.source}]")
    if session.tools.get("run_command") is not None:
        from ..tools.sandbox.probe import status_line

        lines.append(await asyncio.to_thread(status_line, app.config.tools.run_command.sandbox))
    return CommandResult("\n".join(lines))


@commands.add("tool", "/tool enable|disable <name>", "Enable or disable a tool in this session.")
async def tool(app: App, session: Session, args: list[str], **_: Any) -> CommandResult:
    if len(args) != 2 or args[0] not in ("enable", "disable"):
        raise CommandError("say enable or disable, then the tool's name")
    if session.tools.get(args[1]) is None:
        raise CommandError(f"no tool {args[1]!r}; /tools lists them")
    session.set_tool_enabled(args[1], args[0] == "enable")
    level = session.tools.get(args[1]).level  # type: ignore[union-attr]
    asks = " (it will still ask you before each call)" if args[0] == "enable" and level != "safe" else ""
    return CommandResult(f"{args[1]} {args[0]}d for this session{asks}")


@commands.add("model", "/model [[provider:]name]", "Show the model, or switch this session to another "
              "(a name, or the role default/fast).")
async def model(app: App, session: Session, args: list[str], **_: Any) -> CommandResult:
    if args:
        provider, _, name = args[0].rpartition(":")
        info = app.set_model(session.id, provider or None, name)
    else:
        info = app.models_info(session.id)
    current = info["current"]
    lines = [f"current: {current['provider']}:{current['model']}"]
    for p in info["providers"]:
        lines.append(f"  {p['name']}: default={p['models']['default']} fast={p['models']['fast']}"
                     f" ({p['keyCount']} key{'s' if p['keyCount'] != 1 else ''})")
    return CommandResult("\n".join(lines))


@commands.add("compact", "/compact", "Summarise the older part of this conversation now.")
async def compact(app: App, session: Session, frontend: Any, **_: Any) -> CommandResult:
    done = await app.compact(session, frontend, force=True)
    if done is None:
        return CommandResult("nothing to compact yet")
    how = "summarised" if done.strategy == "summary" else f"truncated (the summary failed: {done.error})"
    return CommandResult(f"context {how}: {done.before} -> {done.after} messages")


@commands.add("usage", "/usage", "Tokens used in this session.")
async def usage(app: App, session: Session, **_: Any) -> CommandResult:
    u = session.usage
    return CommandResult(f"tokens this session: {u.prompt_tokens} prompt, {u.completion_tokens} completion, "
                         f"{u.total_tokens} total; {session.message_count} messages")


@commands.add("title", "/title <text>", "Rename this session.", ["rename"])
async def title(app: App, session: Session, raw: str, **_: Any) -> CommandResult:
    if not raw:
        raise CommandError("give the new title")
    session.title = raw[:200]
    session.changed()
    return CommandResult(f"renamed to: {session.title}")


@commands.add("mcp", "/mcp", "List the MCP servers with their status and tool counts.")
async def mcp(app: App, **_: Any) -> CommandResult:
    if not app.mcp:
        return CommandResult("no MCP servers configured (mcp_servers: in config.yaml)")
    lines = []
    for st in app.mcp.status():
        error = f" - {st['error']}" if st.get("error") else ""
        lines.append(f"{st['name']:<16} {st['status']:<9} {st['tools']:>3} tools  ({st['transport']}){error}")
    return CommandResult("\n".join(lines))


@commands.add("quit", "/quit", "Leave the client (the session is kept).", ["exit", "q"])
async def quit_(app: App, **_: Any) -> CommandResult:
    return CommandResult("bye", {"kind": "quit"})
