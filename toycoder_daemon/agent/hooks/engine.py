"""Running the hooks of one event: match, run them all at once, read each one's verdict, merge.

A hook is a shell command fed the event as JSON on stdin, run in the workspace with the environment
run_command's commands get (no secrets) plus TOYCODER_PROJECT_DIR and TOYCODER_SESSION_ID, in its
own process group, killed with everything it started at its timeout, its stdout and stderr kept up
to OUTPUT_CAP each. Exit 0 may print a JSON decision; exit 2 blocks with stderr as the reason; any
other end (exit code, signal, timeout, JSON that does not parse, an unknown decision) is a failure,
which blocks the events in FAILS_CLOSED unless `hooks_on_error: continue`. Any deny wins.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from toycoder_daemon.core.ports import Event, Frontend, HookRan
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.settings import ToolSettings

log = logging.getLogger(__name__)

OUTPUT_CAP = 64 * 1024
"""Bytes of a hook's stdout, and of its stderr, that are kept."""
KILL_GRACE = 0.3
"""Seconds between TERM and KILL at a hook's timeout (it must be gone within a second of it)."""
FAILS_CLOSED = frozenset({"PreToolUse", "UserPromptSubmit", "Stop", "SubagentStop"})
"""Events whose failed hook blocks (under the default `hooks_on_error: block`)."""
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
DECISIONS = {"allow": "allow", "approve": "allow", "deny": "deny", "block": "block", "ask": "ask"}
"""What a hook may decide (Claude Code's older "approve" is "allow")."""
SHOWN_REASON = 2000
"""Characters of a reason an update carries."""

Source = Literal["user", "workspace"]


@dataclass(frozen=True)
class HookSpec:
    event: str
    matcher: str
    command: str
    timeout: float
    source: Source
    origin: str
    """Where it is configured (the config file, or the workspace's settings file)."""

    def matches(self, subject: str | None) -> bool:
        """The matcher is a regex on the whole subject; an MCP tool `mcp__<server>__<tool>` is also
        `mcp:<server>:<tool>` (the issue's and a pasted config's spelling)."""
        if self.matcher in ("", "*") or subject is None:
            return True
        names = [subject]
        if subject.startswith("mcp__") and subject.count("__") >= 2:
            names.append("mcp:" + subject[5:].replace("__", ":", 1))
        try:
            return any(re.fullmatch(self.matcher, name) is not None for name in names)
        except re.error:  # checked when the config is read; a bad one matches nothing
            return False


def specs_from(hooks: Mapping[Any, Sequence[Any]], source: Source, origin: str) -> list[HookSpec]:
    """The hook commands of a `hooks` section (config.model.HookMatcher lists), in order."""
    return [HookSpec(event, m.matcher, h.command, h.timeout, source, origin)
            for event, matchers in hooks.items() for m in matchers for h in m.hooks]


@dataclass(frozen=True)
class HookPolicy:
    """The user's config about hooks (a workspace cannot loosen these)."""

    on_error: Literal["block", "continue"] = "block"
    max_continuations: int = 3
    workspace_sandbox: bool = True


@dataclass
class Result:
    spec: HookSpec
    outcome: Literal["ok", "blocked", "failed", "timeout"]
    duration_ms: int
    decision: str | None = None
    reason: str = ""
    context: str = ""
    shown: str = ""
    """Plain text it printed, for the person."""


@dataclass
class Verdict:
    """The merged answer of an event's hooks."""

    decision: Literal["block", "ask", "allow"] | None = None
    """block: a deny, a block, exit 2 or a failure that fails closed; any one of them wins."""
    reasons: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return self.decision == "block"

    @property
    def reason(self) -> str:
        return "; ".join(r for r in self.reasons if r) or "no reason given"

    @property
    def additional_context(self) -> str:
        return "\n".join(c for c in self.context if c)


def _text(data: bytes, cut: int) -> str:
    text = secrets.redact(data.decode("utf-8", errors="replace"))
    return text + (f"\n[... {cut} more bytes cut]" if cut else "")


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= SHOWN_REASON else text[:SHOWN_REASON] + "…"


def read_output(spec: HookSpec, stdout: str) -> Result:
    """An exit-0 hook's stdout: a JSON decision (ours, or Claude Code's hookSpecificOutput), or plain
    text for the person. A JSON object that does not parse or decides something unknown is a failure."""
    body = stdout.strip()
    if not body.startswith("{"):
        return Result(spec, "ok", 0, shown=body)
    try:
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        specific = data.get("hookSpecificOutput") or {}
        if not isinstance(specific, dict):
            raise ValueError("hookSpecificOutput is not an object")
        raw = data.get("decision", specific.get("permissionDecision"))
        reason = data.get("reason", specific.get("permissionDecisionReason", ""))
        context = data.get("additionalContext", specific.get("additionalContext", ""))
        for name, value in (("decision", raw), ("reason", reason), ("additionalContext", context)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} is not a string")
        decision = DECISIONS.get(raw) if raw is not None else None
        if raw is not None and decision is None:
            raise ValueError(f"unknown decision {str(raw)[:40]!r} (allow, deny, ask or block)")
    except ValueError as e:  # json.JSONDecodeError is one
        return Result(spec, "failed", 0, reason=f"its output is not a valid decision: {e}")
    blocked = decision in ("deny", "block")
    return Result(spec, "blocked" if blocked else "ok", 0, decision, reason or "", context or "")


def merge(results: list[Result], policy: HookPolicy, event: str) -> Verdict:
    """Any block (or deny, or a failure that fails closed) wins, then ask, then allow."""
    verdict = Verdict()
    closed = policy.on_error == "block" and event in FAILS_CLOSED
    blocks: list[str] = []
    asks: list[str] = []
    allows: list[str] = []
    ranked: tuple[tuple[Literal["block", "ask", "allow"], list[str]], ...] = (
        ("block", blocks), ("ask", asks), ("allow", allows))
    for r in results:
        if r.context:
            verdict.context.append(r.context)
        if r.outcome in ("failed", "timeout"):
            if closed:
                blocks.append(f"hook {r.spec.command} failed: {r.reason}")
        elif r.outcome == "blocked":
            blocks.append(r.reason or f"hook {r.spec.command} blocked it")
        elif r.decision == "ask":
            asks.append(r.reason)
        elif r.decision == "allow" and r.spec.source != "workspace":  # a repository's hook can only take away
            allows.append(r.reason)
    for decision, reasons in ranked:
        if reasons:
            verdict.decision, verdict.reasons = decision, reasons
            break
    return verdict


class HookBook:
    """The hooks in effect for one workspace (the user's, and a trusted workspace's), and how to run them."""

    def __init__(self, root: Path, tool_settings: ToolSettings, policy: HookPolicy,
                 specs: Callable[[], list[HookSpec]]):
        self.root, self.tool_settings, self.policy, self.specs = root, tool_settings, policy, specs

    def of(self, event: str) -> list[HookSpec]:
        return [s for s in self.specs() if s.event == event]

    def _settings(self, spec: HookSpec) -> tuple[ToolSettings, dict[str, Any]]:
        """A workspace's hook runs in run_command's sandbox (no network, writes in the workspace) unless
        the user said otherwise, and never without it: where this machine cannot sandbox, it fails
        (`required`). The user's own hooks run as the user."""
        if spec.source == "workspace" and self.policy.workspace_sandbox:
            rc = replace(self.tool_settings.run_command, sandbox="required", network=False)
            return replace(self.tool_settings, run_command=rc), {"sandbox": True, "network": False}
        return self.tool_settings, {"sandbox": False}

    async def run_one(self, spec: HookSpec, payload: dict[str, Any], env: dict[str, str]) -> Result:
        from toycoder_daemon.tools.shell.run_command import run_fed
        from toycoder_daemon.tools.shell.sandbox import command as sandboxing

        started = time.monotonic()
        settings, args = self._settings(spec)

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            run = await sandboxing.prepare(settings, self.root, spec.command, args)
        except sandboxing.SandboxRefused as e:
            return Result(spec, "failed", took(), reason=str(e))
        except OSError as e:  # mkdtemp on a full /tmp, a cgroup that cannot be made
            return Result(spec, "failed", took(), reason=f"it could not be prepared ({e.strerror or e})")
        try:
            run.env.update(env)
            done = await run_fed(run, json.dumps(payload, default=str).encode(), spec.timeout, OUTPUT_CAP,
                                 grace=KILL_GRACE)
        except OSError as e:
            return Result(spec, "failed", took(), reason=f"it could not start ({e.strerror or e})")
        except (ValueError, TypeError) as e:  # e.g. a NUL in the command: a failure (fail closed), not a crash
            return Result(spec, "failed", took(), reason=f"it could not start ({type(e).__name__}: {e})")
        finally:
            await run.cleanup()
        stderr = _text(done.stderr, done.stderr_cut)
        if done.timed_out:
            return Result(spec, "timeout", took(), reason=f"timed out after {spec.timeout:g}s (killed)")
        if done.exit_code is None:
            return Result(spec, "failed", took(), reason="it was killed by a signal")
        if done.exit_code == 2:
            return Result(spec, "blocked", took(), "block", stderr.strip() or "exit code 2")
        if done.exit_code != 0:
            tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
            return Result(spec, "failed", took(), reason=f"exit code {done.exit_code}"
                          + (f": {tail[0]}" if tail else ""))
        if done.stdout_cut and done.stdout.lstrip().startswith(b"{"):
            return Result(spec, "failed", took(), reason=f"its output is over {OUTPUT_CAP} bytes")
        result = read_output(spec, _text(done.stdout, done.stdout_cut))
        result.duration_ms = took()
        return result


@dataclass
class Hooks:
    """One session's view of the hooks: what every hook's input carries, and where updates go."""

    book: HookBook
    session_id: str
    transcript_path: Callable[[], str]
    mode: Callable[[], str]
    subagent: bool = False
    """Inside a sub-agent: its end is SubagentStop."""

    def for_subagent(self) -> Hooks:
        return replace(self, subagent=True)

    @property
    def max_continuations(self) -> int:
        return self.book.policy.max_continuations

    def has(self, event: str) -> bool:
        return bool(self.book.of(event))

    async def run(self, event: str, emit: Callable[[Event], None], fields: dict[str, Any],
                  subject: str | None = None) -> Verdict:
        """Run the event's hooks that match `subject` (the tool's name; SessionStart's source; PreCompact's
        trigger) in parallel; each run is shown (HookRan), and their verdicts merged."""
        specs = [s for s in self.book.of(event) if s.matches(subject)]
        if not specs:
            return Verdict()
        payload = {"hook_event_name": event, "session_id": self.session_id, "cwd": str(self.book.root),
                   "transcript_path": self.transcript_path(), "permission_mode": self.mode(), **fields}
        env = {"TOYCODER_PROJECT_DIR": str(self.book.root), "TOYCODER_SESSION_ID": self.session_id}
        tool_input = fields.get("tool_input")
        if isinstance(tool_input, dict) and isinstance(tool_input.get("path"), str):
            env["TOYCODER_FILE"] = str(self.book.root / tool_input["path"])
        # every hook's own outcome: one that raises must not end the event with its siblings unwatched
        outcomes = await asyncio.gather(*(self.book.run_one(s, payload, env) for s in specs), return_exceptions=True)
        results: list[Result] = []
        for spec, outcome in zip(specs, outcomes, strict=True):
            if isinstance(outcome, Result):
                results.append(outcome)
            elif isinstance(outcome, Exception):
                log.error("%s hook %r: %s", event, spec.command, outcome, exc_info=outcome)
                results.append(Result(spec, "failed", 0, reason=f"it could not run ({type(outcome).__name__})"))
            else:
                raise outcome  # CancelledError and the like: the event is being stopped
        for r in results:
            reason = r.reason if r.outcome != "ok" else r.shown
            if r.outcome in ("failed", "timeout"):
                log.warning("%s hook %r %s: %s", event, r.spec.command, r.outcome, r.reason)
            emit(HookRan(event, r.spec.command, r.outcome, r.duration_ms, _short(reason) or None, r.spec.source))
        return merge(results, self.book.policy, event)

    # ---- the events the ReAct loop raises ------------------------------------------------------

    async def pre_tool(self, frontend: Frontend, name: str, args: Any) -> Verdict:
        return await self.run("PreToolUse", frontend.emit, {"tool_name": name, "tool_input": args}, name)

    async def post_tool(self, frontend: Frontend, name: str, args: Any, status: str, output: str) -> Verdict:
        return await self.run("PostToolUse", frontend.emit, {
            "tool_name": name, "tool_input": args, "tool_response": {"status": status, "output": output}}, name)

    async def stop(self, frontend: Frontend, active: bool) -> Verdict:
        return await self.run("SubagentStop" if self.subagent else "Stop", frontend.emit,
                              {"stop_hook_active": active})
