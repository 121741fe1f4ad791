"""The built-in slash commands (the seed's, plus what Claude Code and Codex users expect)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping
from typing import Any

from toycoder_daemon.commands.context import CommandContext
from toycoder_daemon.commands.registry import CommandError, CommandRegistry, CommandResult
from toycoder_daemon.commands.served import unknown_model_warning, with_served
from toycoder_daemon.core.errors import ConfigError, SessionNotFound, ToyCoderError
from toycoder_daemon.core.modes import MODES

commands = CommandRegistry()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@commands.add("help", "/help [command]", "List the commands, or explain one.", ["?"])
async def help_(c: CommandContext) -> CommandResult:
    if c.args:
        cmd = commands.get(c.args[0])
        if cmd is None:
            row = next((r for r in c.host.command_rows()[0] if r.name == c.args[0].lstrip("/")), None)
            if row is not None:
                return CommandResult(f"{row.usage}  [{row.source}]\n{row.help}")
            raise CommandError(f"no command /{c.args[0].lstrip('/')}")
        aliases = f" (also {', '.join('/' + a for a in cmd.aliases)})" if cmd.aliases else ""
        return CommandResult(f"{cmd.usage}{aliases}\n{cmd.help}")
    rows, hidden = c.host.command_rows()
    width = max(len(r.usage) for r in rows)
    lines = [f"{r.usage.ljust(width)}  {r.help}" + (f"  [{r.source}]" if r.source != "builtin" else "") for r in rows]
    lines += [f"warning: the built-in /{h.name} wins over the custom command in {h.path}" for h in hidden]
    return CommandResult("Commands:\n" + "\n".join(lines))


@commands.add("new", "/new [title]", "Start a new session (and switch to it).")
async def new(c: CommandContext) -> CommandResult:
    s = c.sessions.new_session(c.raw or None)
    return CommandResult(f"new session {s.id}" + (f": {s.title}" if s.title else ""),
                         {"kind": "switch", "sessionId": s.id})


@commands.add("clear", "/clear", "Start over in a new, empty session (the current one stays in /sessions).")
async def clear(c: CommandContext) -> CommandResult:
    s = c.sessions.new_session(None)
    return CommandResult(f"cleared: new session {s.id}", {"kind": "switch", "sessionId": s.id})


@commands.add("sessions", "/sessions", "List the sessions of this workspace, newest first.", ["ls"])
async def sessions(c: CommandContext) -> CommandResult:
    rows = c.sessions.list_sessions()
    if not rows:
        return CommandResult("no sessions yet")
    lines = [
        f"{'*' if r.id == c.session.id else ' '} {r.id}  {_when(r.updated_at)}  "
        f"{r.message_count:>4} {'msg ' if r.message_count == 1 else 'msgs'}  {r.title or '(untitled)'}"
        for r in rows
    ]
    return CommandResult("\n".join(lines) + "\n(/switch ID resumes one; a unique prefix of the id is enough)")


@commands.add("switch", "/switch <id>", "Resume a session by its id (or a unique prefix of it).", ["resume"])
async def switch(c: CommandContext) -> CommandResult:
    if len(c.args) != 1:
        raise CommandError("give one session id")
    ids = [r.id for r in c.sessions.list_sessions() if r.id.startswith(c.args[0])]
    if not ids:  # lists leave out sessions without messages: those by their whole id
        try:
            ids = [(await c.sessions.load(c.args[0])).id]
        except SessionNotFound:
            raise CommandError(f"no session starts with {c.args[0]!r}") from None
    if len(ids) > 1:
        raise CommandError(f"{c.args[0]!r} matches {len(ids)} sessions: {', '.join(ids)}")
    s = await c.sessions.load(ids[0])
    return CommandResult(f"switched to {s.id}: {s.title or '(untitled)'} ({_count(s.message_count, 'message')})",
                         {"kind": "switch", "sessionId": s.id})


@commands.add("tools", "/tools", "List the tools with their permission level and state.")
async def tools(c: CommandContext) -> CommandResult:
    await c.host.settle_mcp(c.frontend.emit)  # the tools a turn would offer: the MCP servers' too (a first prompt)
    lines = []
    for t in c.session.tools.list():
        state = "enabled" if c.session.tools.is_enabled(t.name) else "disabled"
        always = ", always allowed" if t.name in c.session.tools.gate.always else ""
        lines.append(f"{t.name:<16} {t.level:<10} {state}{always}  [{t.source}]")
    if c.session.tools.get("run_command") is not None:
        from toycoder_daemon.tools.shell.sandbox.probe import status_line

        lines.append(await asyncio.to_thread(status_line, c.host.settings.run_command.sandbox))
    return CommandResult("\n".join(lines))


@commands.add("hooks", "/hooks", "List the hooks in effect and where each comes from.")
async def hooks(c: CommandContext) -> CommandResult:
    specs, workspace = c.host.hooks_in_effect()
    lines = [f"{s.event:<16} {s.matcher or '*':<20} {s.command}  (timeout {s.timeout:g}s; {s.source}: {s.origin})"
             for s in specs] or ["no hooks in effect"]
    if workspace:
        lines.append(workspace)
    return CommandResult("\n".join(lines))


@commands.add("tool", "/tool enable|disable <name>", "Enable or disable a tool in this session.")
async def tool(c: CommandContext) -> CommandResult:
    if len(c.args) != 2 or c.args[0] not in ("enable", "disable"):
        raise CommandError("say enable or disable, then the tool's name")
    t = c.session.tools.get(c.args[1])
    if t is None:
        raise CommandError(f"no tool {c.args[1]!r}; /tools lists them")
    c.session.set_tool_enabled(c.args[1], c.args[0] == "enable")
    asks = " (it will still ask you before each call)" if c.args[0] == "enable" and t.level != "safe" else ""
    return CommandResult(f"{c.args[1]} {c.args[0]}d for this session{asks}")


@commands.add("model", "/model [[provider:]name]", "Show the model, or switch this session to another "
              "(a name, or the role default/fast).")
async def model(c: CommandContext) -> CommandResult:
    if c.args:
        provider, _, name = c.args[0].rpartition(":")
        try:
            info = c.host.set_model(provider or None, name)
        except ConfigError as e:  # a typo, answered as text like every command's (not -32013: broken config)
            raise CommandError(str(e)) from None
    else:
        info = c.host.models_info()
    info = await with_served(c.host, info, c.session, refresh=not c.args)  # showing asks the server again
    warning = unknown_model_warning(info) if c.args else None
    lines = [warning] if warning else []
    lines.append(f"current: {info.provider}:{info.model}")
    for p in info.providers:
        lines.append(f"  {p.name}: default={p.models['default']} fast={p.models['fast']}"
                     f" ({p.key_count} key{'s' if p.key_count != 1 else ''})")
        if p.served is not None:
            lines.append(f"    its server lists: {', '.join(p.served) or 'no model'}")
    return CommandResult("\n".join(lines))


@commands.add("compact", "/compact", "Summarise the older part of this conversation now.")
async def compact(c: CommandContext) -> CommandResult:
    done = await c.host.compact(c.frontend, force=True)
    if done is None:
        return CommandResult("nothing to compact yet")
    if done.cut:
        return CommandResult(f"context made room: nothing old enough to summarise, so the largest message was cut "
                             f"by {done.cut} characters to fit the model's context window")
    how = "summarised" if done.strategy == "summary" else f"truncated (the summary failed: {done.error})"
    return CommandResult(f"context {how}: {done.before} -> {done.after} messages")


@commands.add("usage", "/usage", "Tokens used in this session.")
async def usage(c: CommandContext) -> CommandResult:
    u = c.session.usage
    if u.unreported and not u.total_tokens:
        return CommandResult(f"tokens this session: unknown (the server reports no usage); "
                             f"{c.session.message_count} messages")
    missing = f" (and {u.unreported} replies the server reported no usage for)" if u.unreported else ""
    return CommandResult(f"tokens this session: {u.prompt_tokens} prompt, {u.completion_tokens} completion, "
                         f"{u.total_tokens} total{missing}; {_count(c.session.message_count, 'message')}")


@commands.add("title", "/title <text>", "Rename this session.", ["rename"])
async def title(c: CommandContext) -> CommandResult:
    if not c.raw:
        raise CommandError("give the new title")
    c.session.set_title(c.raw[:200], "user")  # the model does not rename it after this
    return CommandResult(f"renamed to: {c.session.title}")


@commands.add("mode", "/mode [ask|accept-edits|read-only]", "Show or set this session's permission mode.")
async def mode(c: CommandContext) -> CommandResult:
    if not c.args:
        rows = [f"{'*' if m == c.session.mode else ' '} {m:<13} {d}" for m, (_, d) in MODES.items()]
        return CommandResult("Modes:\n" + "\n".join(rows))
    try:
        c.session.set_mode(c.args[0])
    except ValueError as e:
        raise CommandError(str(e)) from None
    return CommandResult(f"mode: {c.session.mode} ({MODES[c.session.mode][1]})")


@commands.add("mcp", "/mcp", "List the MCP servers with their status and tool counts.")
async def mcp(c: CommandContext) -> CommandResult:
    rows = c.host.mcp_status()
    if rows is None:
        return CommandResult("no MCP servers configured (mcp_servers: in config.yaml)")
    lines = []
    for st in rows:
        error = f" - {st['error']}" if st.get("error") else ""
        origin = ", from the client" if st.get("origin") == "client" else ""
        lines.append(f"{st['name']:<16} {st['status']:<9} {st['tools']:>3} tools  ({st['transport']}{origin}){error}")
    return CommandResult("\n".join(lines))


def _files(files: list[dict[str, Any]]) -> str:
    def counts(f: dict[str, Any]) -> str:
        return f" +{f['added']} -{f['removed']}" if f["added"] is not None else ""

    return ", ".join(f"{f['path']} {f['status']}{counts(f)}" for f in files)


@commands.add("checkpoints", "/checkpoints", "List the turns that changed files (newest last); /restore takes "
              "their ids.")
async def checkpoints(c: CommandContext) -> CommandResult:
    rows = c.host.checkpoints.rows()
    if not rows:
        return CommandResult("no checkpoints yet: no turn of this session changed a file")
    lines = [f"{r['turnId']}  {_when(r['createdAt'])}  {r['prompt'] or '(no prompt)'}\n    {_files(r['files'])}"
             for r in rows]
    return CommandResult("\n".join(lines) + "\n(/restore ID puts the files back as they were before that turn; "
                         "/undo restores the last one)")


def _restored(result: Mapping[str, Any], what: str) -> CommandResult:
    done = f"restored {', '.join(result['restored'])}" if result["restored"] else "nothing restored"
    lines = [f"{done} ({what})"]
    lines += [f"not restored: {x['path']}: {x['reason']}" for x in result["conflicts"]]
    if any("force" in x["reason"] for x in result["conflicts"]):
        lines.append("(add --force to overwrite them)")
    lines.append(result["note"])
    return CommandResult("\n".join(lines))


async def _restore(c: CommandContext, ref: str, what: str) -> CommandResult:
    force = "--force" in c.args
    try:
        result = await c.host.checkpoints.restore(ref, None, force, c.frontend, c.turn_id or None)
    except ToyCoderError as e:
        raise CommandError(str(e)) from None
    return _restored(result, what)


@commands.add("undo", "/undo [--force]", "Put back the files the last turn not yet undone wrote; again goes "
              "one more turn back (/redo re-applies).")
async def undo(c: CommandContext) -> CommandResult:
    turn, _ = c.host.checkpoints.undo_redo()
    if turn is None:
        return CommandResult("nothing to undo: no turn of this session changed a file that is not undone")
    row = next(r for r in c.host.checkpoints.rows() if r["turnId"] == turn)
    return await _restore(c, turn, f"undid {turn}: {row['prompt'] or '(no prompt)'}")


@commands.add("redo", "/redo [--force]", "Re-apply the files of the turn the last /undo (or restore) undid.")
async def redo(c: CommandContext) -> CommandResult:
    _, undone = c.host.checkpoints.undo_redo()
    if undone is None:
        return CommandResult("nothing to redo: no undo since the last turn that changed files")
    row = next(r for r in c.host.checkpoints.rows() if r["turnId"] == undone)
    return await _restore(c, undone, f"redid {row.get('restoreOf') or undone}")


@commands.add("restore", "/restore <turn> [--force]", "Put the files back as they were before a turn (its id, "
              "a unique prefix, or its number; later turns are undone too).")
async def restore(c: CommandContext) -> CommandResult:
    refs = [a for a in c.args if a != "--force"]
    if len(refs) != 1:
        raise CommandError("give one turn (see /checkpoints)")
    return await _restore(c, refs[0], f"back to before turn {refs[0]}")


@commands.add("quit", "/quit", "Leave the client (the session is kept).", ["exit", "q"])
async def quit_(c: CommandContext) -> CommandResult:
    return CommandResult("bye", {"kind": "quit"})
