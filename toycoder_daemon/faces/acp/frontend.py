"""The Frontend port over the Agent Client Protocol: our events as `session/update` notifications,
permission as `session/request_permission`, questions as `elicitation/create` (when offered).

Updates go out in the order they were emitted: each send waits for the previous one, and the
face awaits `drain()` before it answers `session/prompt`. Text deltas are coalesced as in the LSP
face (flushed when the event loop next gets control, or before any other event).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toycoder_daemon.core.ports import (
    CommandRunner,
    Compacted,
    Decision,
    EditApplied,
    Event,
    FileDiagnostics,
    FilesChanged,
    HookRan,
    McpWaiting,
    PermissionRequest,
    PermissionResolved,
    PlanUpdated,
    RetryScheduled,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TrustDecision,
    TrustRequest,
    UsageReport,
)
from toycoder_daemon.faces.acp import client as wire
from toycoder_daemon.faces.acp import fs as acp_fs
from toycoder_daemon.faces.acp.terminal import Terminals, terminal_runner
from toycoder_daemon.rpc.coalesce import TextCoalescer
from toycoder_daemon.rpc.reply_wait import reply_within

if TYPE_CHECKING:
    from toycoder_daemon.app.application import App

log = logging.getLogger(__name__)

KINDS = {"read_file": "read", "list_directory": "read", "glob_search": "search", "grep_search": "search",
         "write_file": "edit", "edit_file": "edit", "run_command": "execute"}
_MCP_WAITS = itertools.count(1)  # tool call ids of MCP waits, unique in the process
OPTIONS = [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
           {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
           {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}]
TRUST_OPTIONS = [{"optionId": "allow_always", "name": "Trust", "kind": "allow_always"},
                 {"optionId": "allow_once", "name": "Once", "kind": "allow_once"},
                 {"optionId": "reject", "name": "Deny", "kind": "reject_once"}]
TRUST_ANSWERS: dict[str, TrustDecision] = {"allow_always": "trust", "allow_once": "once", "reject": "deny"}
_TRUST_CALLS = itertools.count(1)


def tool_kind(name: str, app: App) -> str:
    """ACP's tool kind (the client's icon): sub-agents think, MCP and ask_user are "other"."""
    if name in KINDS:
        return KINDS[name]
    t = app.tools.get(name)
    return "think" if t is not None and t.source == "agent" else "other"


def locations(arguments: Any, root: Path) -> list[dict[str, Any]] | None:
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return [wire.location(str(root / path))] if isinstance(path, str) and path else None


def permission_locations(request: PermissionRequest, root: Path) -> list[dict[str, Any]] | None:
    """Where a permission request points: the absolute path (the schema's, as the `tool_call` for
    the same call says) and the first changed line of the diff preview."""
    preview = request.preview or {}
    path = preview.get("path") or (request.arguments.get("path") if isinstance(request.arguments, dict) else None)
    if not isinstance(path, str) or not path:
        return None
    return [wire.location(str(root / path), first_changed_line(str(preview.get("diff") or "")))]


def first_changed_line(diff: str) -> int | None:
    """The new file's line of the diff's first change: its first hunk's start plus the context
    lines before the first `+`/`-` line. A deletion at the end points at the last line left."""
    lines = iter(diff.splitlines())
    for line in lines:
        hunk = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))?", line)
        if hunk:
            break
    else:
        return None
    start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
    at = start
    for line in lines:
        if line[:1] in ("+", "-"):
            break
        at += line.startswith(" ")  # a context line ("\\ No newline ..." is not one)
    last = start + count - 1  # the hunk's last line in the new file
    return max(1, min(at, last) if count else start)


def diff_content(preview: dict[str, Any] | None, root: Path) -> dict[str, Any] | None:
    """ACP's diff (old and new text) from our unified-diff preview: the hunks' lines, not the whole
    file (the client shows it; it is not applied). A new file has no old text."""
    if not preview or preview.get("kind") != "diff":
        return None
    old: list[str] = []
    new: list[str] = []
    created = in_hunks = False
    for line in preview.get("diff", "").splitlines(keepends=True):
        if not in_hunks and line.startswith("--- "):
            created = line.startswith("--- /dev/null")
        elif line.startswith("@@"):
            if in_hunks:  # a gap between hunks, the same on both sides
                old.append("…\n")
                new.append("…\n")
            in_hunks = True
        elif in_hunks and line[:1] in (" ", "-", "+"):
            if line[0] != "+":
                old.append(line[1:])
            if line[0] != "-":
                new.append(line[1:])
    return wire.diff(str(root / preview.get("path", "")), None if created else "".join(old), "".join(new))


class AcpFrontend:
    def __init__(self, client: wire.RawClient, app: App, session_id: str, *, can_elicit: bool = False,
                 can_write: bool = False, can_read: bool = False, terminals: Terminals | None = None):
        self.client = client
        self.terminals = terminals
        """Set when the client declared `terminal`: run_command runs in its terminals."""
        self.can_write = can_write
        """The client offered fs/write_text_file: every edit goes through it (fs.py)."""
        self.can_read = can_read
        """The client offered fs/read_text_file: tools see its buffers (fs.py)."""
        self.can_elicit = can_elicit
        """The client offered form elicitation (ask_user is then asked as a form)."""
        self.app = app
        self.session_id = session_id
        # a sub-agent's text (it has a parent tool call) is its thinking
        self._text = TextCoalescer(lambda thought, text: self.send(
            wire.chunk(text, "agent_thought_chunk" if thought else "agent_message_chunk")))
        self._tail: asyncio.Future[None] | None = None
        self._names: dict[str, str] = {}
        self._diffs: dict[str, dict[str, Any]] = {}
        self._terminals: dict[str, dict[str, Any]] = {}
        self._mcp_wait = ""

    # ---- updates ------------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._text.add(event.parent_tool_call_id is not None, event.text)
            return
        self.flush()
        update = self._update_for(event)
        if update is not None:
            self.send(update)

    def flush(self) -> None:
        self._text.flush()

    def send(self, update: dict[str, Any]) -> None:
        """Queue a session/update behind the ones before it."""
        prev = self._tail

        async def go() -> None:
            if prev is not None:
                await asyncio.wait({prev})
            try:
                await self.client.notify(wire.SESSION_UPDATE, {"sessionId": self.session_id, "update": update})
            except Exception as e:  # the client went away: nothing to show it on
                log.debug("session/update not sent: %s", e)

        self._tail = asyncio.ensure_future(go())

    async def drain(self) -> None:
        self.flush()
        if self._tail is not None:
            await asyncio.wait({self._tail})

    def _update_for(self, event: Event) -> Any:
        """The session/update for an event (None: nothing to show), one method per event type."""
        mapping = _MAPPINGS.get(type(event))
        if mapping is None:
            raise ValueError(f"no ACP mapping for {type(event).__name__}")
        return mapping(self, event)

    def _tool_call(self, event: ToolCallStarted) -> Any:
        self._names[event.tool_call_id] = event.name
        title = event.title
        if event.parent_tool_call_id:
            title = f"{self._names.get(event.parent_tool_call_id, 'sub-agent')} › {title}"
        return wire.tool_call(
            event.tool_call_id, title, kind=tool_kind(event.name, self.app),
            # pending: awaiting the person's approval (it comes with the permission request); a call
            # that is not asked about (safe, a mode, a rule, "always", refused) starts at once
            status="pending" if event.will_ask else "in_progress",
            raw_input=event.arguments, locations=locations(event.arguments, self.app.workspace.root),
        )

    def _tool_result(self, event: ToolCallFinished) -> Any:
        content = [wire.text_content(event.output)]
        if event.status == "completed" and event.tool_call_id in self._diffs:
            content.insert(0, self._diffs.pop(event.tool_call_id))
        terminal = self._terminals.pop(event.tool_call_id, None)
        # The client keeps showing the released terminal, which holds the raw output: when something
        # was redacted from it (secrets.redact's mark) the final content is our redacted text alone.
        if terminal is not None and "***" not in event.output:
            content.insert(0, terminal)
        return wire.tool_call_update(event.tool_call_id, "completed" if event.status == "completed" else "failed",
                                     content, raw_output={"status": event.status, "output": event.output})

    def _usage(self, event: UsageReport) -> Any:
        if event.parent_tool_call_id:
            return None  # the context window is the main agent's
        s = self.app.live.get(self.session_id)
        used = s.context_mark[0] if s and s.context_mark[0] else event.total_tokens
        size = max(used, self.app.config.session.max_context_tokens)
        return {"used": used, "size": size, "sessionUpdate": "usage_update"}

    def _retry(self, event: RetryScheduled) -> Any:
        return wire.chunk(
            f"\n[model request failed ({event.reason}); retry {event.attempt} in {event.delay_seconds:g}s; "
            "the partial reply above is discarded]\n", "agent_thought_chunk")

    def _mcp_waiting(self, event: McpWaiting) -> Any:
        """A wait for MCP servers as a tool call of its own (ACP has no waiting state): running while
        they start, then completed, or failed naming those that failed and why."""
        if event.state == "waiting":
            self._mcp_wait = f"mcp-start-{next(_MCP_WAITS)}"
            return wire.tool_call(self._mcp_wait, f"Starting MCP servers: {', '.join(event.servers)}", kind="other",
                                  status="in_progress")
        if not self._mcp_wait:
            return None
        errors = {row["name"]: row.get("error") for row in self.app.mcp_status(self.session_id) or []
                  if row.get("status") in ("failed", "stopped")}
        said = [f"{name} failed: {errors.get(name) or 'see /mcp'}" for name in event.failed]
        text = "\n".join(said) or f"MCP servers ready: {', '.join(event.servers)}"
        call, self._mcp_wait = self._mcp_wait, ""
        return wire.tool_call_update(call, "failed" if event.failed else "completed", [wire.text_content(text)])

    def _hook(self, event: HookRan) -> Any:
        """A hook's run as one line of the agent's thought (ACP has no such update)."""
        why = f": {event.reason}" if event.reason else ""
        return wire.chunk(f"\n[hook {event.event} `{event.command}` {event.outcome} ({event.duration_ms} ms){why}]\n",
                          "agent_thought_chunk")

    def _changes(self, event: FilesChanged) -> Any:
        if event.parent_tool_call_id:
            return None
        shown = ", ".join(f"{f.path} ({f.status})" for f in event.files)
        if event.restore_of:  # a restore: what undoes it is /redo, never an /undo that re-applies
            return wire.chunk(f"\n[restored {len(event.files)} file(s): {shown}; /redo re-applies them]\n",
                              "agent_thought_chunk")
        return wire.chunk(f"\n[{len(event.files)} file(s) changed: {shown}; /undo restores them]\n",
                          "agent_thought_chunk")

    def can_apply_edit(self) -> bool:
        return self.can_write

    def writes_all_files(self) -> bool:
        return self.can_write

    async def diagnostics(self, uris: list[str], wait_ms: int) -> list[FileDiagnostics] | None:
        return None  # ACP has no request for an editor's diagnostics

    async def editor_text(self, path: Path) -> str | None:
        if not self.can_read:
            return None
        await self.drain()  # the client hears of the tool call before it is asked for its files
        return await acp_fs.read_text(self.client, self.session_id, path)

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        if not self.can_write:
            return EditApplied(False, "the client cannot write files (no fs.writeTextFile capability)")
        await self.drain()
        refused = await acp_fs.write_text(self.client, self.session_id, path, after,
                                          self._timeout())  # as workspace/applyEdit on the LSP face
        return EditApplied(refused is None, refused)

    def command_runner(self) -> CommandRunner | None:
        return terminal_runner(self.client, self.session_id, self.terminals, self.show_terminal, before=self.drain)

    def show_terminal(self, tool_call_id: str, terminal_id: str) -> None:
        """The running command's terminal in its tool call (the client shows its output live)."""
        self._terminals[tool_call_id] = wire.terminal(terminal_id)
        self.send(wire.tool_call_update(tool_call_id, "in_progress", [self._terminals[tool_call_id]]))

    def _resolved(self, event: PermissionResolved) -> Any:
        """A question answered (here or in another editor; ACP cannot withdraw the request from its
        client): the call's status moves on, `in_progress` (allowed, or a question answered) or
        `failed` (rejected), with who decided in `_meta`."""
        update = wire.tool_call_update(event.tool_call_id, "failed" if event.decision == "reject" else "in_progress")
        kind = update.pop("sessionUpdate")  # last, as the SDK dumps it
        meta = {"toycoder": {"permissionResolved": {"decision": event.decision, "by": event.by}}}
        return {**update, "_meta": meta, "sessionUpdate": kind}

    def _compaction(self, event: Compacted) -> Any:
        how = "summarised" if event.strategy == "summary" else "truncated"
        return wire.chunk(f"[context {how}: {event.before} -> {event.after} messages]\n", "agent_thought_chunk")

    # ---- questions to the person --------------------------------------------------------------

    def _timeout(self) -> float:
        return self.app.config.permissions.timeout_seconds

    async def confirm(self, request: PermissionRequest) -> Decision:
        await self.drain()  # the client knows the tool call before it is asked about it
        preview = request.preview or {}
        content: list[dict[str, Any]] = []
        diff = diff_content(preview, self.app.workspace.root)
        if diff is not None:
            self._diffs[request.tool_call_id] = diff
            content.append(diff)
        elif preview.get("kind") == "command":
            content.append(wire.text_content(f"$ {preview.get('command')}\n(in {preview.get('cwd')})"))
        call = wire.permission_call(request.tool_call_id, request.title, tool_kind(request.tool, self.app),
                                    request.arguments, content,
                                    permission_locations(request, self.app.workspace.root))
        params = {"sessionId": self.session_id, "toolCall": call, "options": OPTIONS}
        try:
            answer = await reply_within(self.client.request("session/request_permission", params), self._timeout())
            choice = wire.permission_choice(answer)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer, client gone: not a yes
            log.info("permission for %s not granted (%s: %s)", request.title, type(e).__name__, e)
            return "reject"
        decision: Decision = choice if choice in ("allow_once", "allow_always") else "reject"  # type: ignore[assignment]
        return decision  # the client hears it as the turn's PermissionResolved (_resolved)

    async def trust_workspace(self, request: TrustRequest) -> TrustDecision:
        """session/request_permission on a "Trust this workspace's settings" call listing what it adds."""
        await self.drain()
        lines = [*(f"hook: {c}" for c in request.hooks), *(f"MCP server: {c}" for c in request.mcp_servers),
                 *(f"allow rule: {r}" for r in request.allow), *(f"agent: {a}" for a in request.agents)]
        call = wire.permission_call(f"workspace-trust-{next(_TRUST_CALLS)}", "Trust this workspace's settings",
                                    "other", {"settingsPath": request.settings_path},
                                    [wire.text_content(f"{request.settings_path} would add:\n" + "\n".join(lines))],
                                    [{"path": request.settings_path}])
        params = {"sessionId": self.session_id, "toolCall": call, "options": TRUST_OPTIONS}
        try:
            answer = await reply_within(self.client.request("session/request_permission", params), self._timeout())
            return TRUST_ANSWERS.get(wire.permission_choice(answer), "unanswered")  # cancelled: no answer
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer, client gone: not a yes, nor a no
            log.info("workspace trust not answered (%s: %s)", type(e).__name__, e)
            return "unanswered"

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        """Form elicitation (an unstable ACP feature) when the client offers it; otherwise None."""
        if not self.can_elicit:
            return None
        await self.drain()
        field: dict[str, Any] = {"title": "Answer", "enum": options} if options else {"title": "Answer"}
        field["type"] = "string"
        params = {"sessionId": self.session_id, "message": question, "mode": "form",
                  "requestedSchema": {"properties": {"answer": field}, "required": ["answer"]}}
        try:
            reply = await reply_within(self.client.request("elicitation/create", params), self._timeout())
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("question not answered (%s: %s)", type(e).__name__, e)
            return None
        content = reply.get("content") if isinstance(reply, dict) and reply.get("action") == "accept" else None
        answer = content.get("answer") if isinstance(content, dict) else None
        return None if answer is None or isinstance(answer, dict) else str(answer)


# text deltas are coalesced in emit(), before this table is consulted
_MAPPINGS: dict[type, Callable[[AcpFrontend, Any], Any]] = {
    ToolCallStarted: AcpFrontend._tool_call,
    ToolCallFinished: AcpFrontend._tool_result,
    UsageReport: AcpFrontend._usage,
    RetryScheduled: AcpFrontend._retry,
    McpWaiting: AcpFrontend._mcp_waiting,
    Compacted: AcpFrontend._compaction,
    FilesChanged: AcpFrontend._changes,
    PlanUpdated: lambda f, e: wire.plan(e.entries),
    HookRan: AcpFrontend._hook,
    PermissionResolved: AcpFrontend._resolved,
}
