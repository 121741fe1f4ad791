"""The permission gate: config rules first (deny, then allow), then the person decides.

Levels: safe runs; sensitive asks every call; dangerous must first be enabled for the session (the
registry refuses it otherwise), then asks like sensitive. "allow_always" covers exactly that tool
for the rest of that session. No answer, an error or a dismissed prompt is a rejection.

Rules look like `write_file`, `write_file(docs/**)` or `run_command(pytest *)`. The part in
parentheses matches the call's subject: the `command` argument, else the `path` argument (relative
to the workspace). A command that chains, pipes, substitutes or redirects never matches an allow
rule. Deny rules judge the programs a command runs (shell/programs.py), not its text: every simple
command of it, through paths, globs and wrappers, so `ls; /bin/rm x` and `setsid rm x` meet `rm *`.
When a run_command deny rule exists, what that analysis cannot judge with certainty is asked about,
even past allow rules and "always"; so are interpreters given code inline (perl -e, python -c, awk),
and, under a rule on a deleting program (rm, unlink, rmdir, shred), the others and `find -delete`.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toycoder_daemon.core.ports import PermissionRequest
    from toycoder_daemon.tools.base import Tool, ToolContext
    from toycoder_daemon.tools.shell.programs import Invocation

log = logging.getLogger(__name__)

SHELL_META = re.compile(r"[;&|`$<>()\n\r\\]")

EDIT_TOOLS = frozenset({"write_file", "edit_file"})


@dataclass(frozen=True)
class Rule:
    text: str
    tool: str
    pattern: str | None

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = re.fullmatch(r"\s*([\w.-]+)\s*(?:\((.*)\))?\s*", text, re.DOTALL)
        if not m:
            raise ValueError(f"bad permission rule {text!r}: expected NAME or NAME(pattern)")
        return cls(text.strip(), m.group(1), m.group(2).strip() if m.group(2) is not None else None)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """Path glob: `*` and `?` stay within a directory, `**` crosses them; without a `/` the
    pattern matches the file name at any depth."""
    if "/" not in pattern.strip("/"):
        pattern = "**/" + pattern
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out).lstrip("/") + r"\Z")


def command_matches(pattern: str, command: str) -> bool:
    command = " ".join(command.split())
    pattern = " ".join(pattern.split())
    if pattern.endswith(" *") and command == pattern[:-2]:
        return True  # "pytest *" also covers plain "pytest"
    return fnmatch.fnmatchcase(command, pattern)


def _escalates(args: dict[str, Any], ctx: ToolContext) -> bool:
    from toycoder_daemon.tools.shell.sandbox.policy import Policy, escalation

    return escalation(Policy.from_settings(ctx.settings), args) is not None


def program_verdict(pattern: str, inv: Invocation) -> str | None:
    """"deny" when the program and its arguments meet a deny pattern, "ask" when they might or the
    program is not known for certain, else None. The pattern's first word names the program (a
    path in it counts by its basename, like the command's)."""
    from toycoder_daemon.tools.shell.programs import DELETERS

    words = pattern.split()
    if not words:
        return None
    if "/" in words[0] and not any(c in words[0] for c in "*?["):
        words[0] = words[0].rsplit("/", 1)[1]
    if inv.unsure or inv.runs_code:
        return "ask"
    if fnmatch.fnmatchcase(inv.program, words[0]):
        if command_matches(" ".join(words), " ".join([inv.program] + [a.text for a in inv.args])):
            return "deny"
        return None if all(a.certain for a in inv.args) else "ask"  # an expansion might make it match
    if inv.deletes and any(fnmatch.fnmatchcase(d, words[0]) for d in DELETERS):
        return "ask"  # `unlink x` or `find -delete` under a rule on rm
    return None


@dataclass(frozen=True)
class Judgement:
    """One call as the gate judged it (PermissionGate.judge): what its rules say and whether it
    leaves the sandbox. Made once per call; announcing the call, its preview and the check read it
    (with the session's mode and "always" as they are at that moment)."""

    tool: Tool
    rule: tuple[str, Rule] | None
    """("deny"|"allow"|"ask", the rule), or None when no rule applies."""
    escalates: bool
    """run_command asking to leave the sandbox (no sandbox, the network)."""
    subject: tuple[str, str] | None
    """What rules match: ("command", text) or ("path", relative path); None for a path outside the workspace."""


class PermissionGate:
    def __init__(self, allow: list[str] | None = None, deny: list[str] | None = None):
        self.allow = [Rule.parse(r) for r in allow or ()]
        """Config rules that let a call run without asking."""
        self.deny = [Rule.parse(r) for r in deny or ()]
        """Config rules that always refuse a call."""
        self.always: set[str] = set()
        """Tools the person answered "allow_always" for, in this session."""
        self.mode = "ask"
        """The session's mode (MODES); sub-agents share their session's gate, so its mode too."""

    def fork(self) -> PermissionGate:
        child = PermissionGate()
        child.allow, child.deny = self.allow, self.deny
        return child

    # ---- rules --------------------------------------------------------------------------------

    def _subject(self, tool: Tool | None, args: dict[str, Any], ctx: ToolContext) -> tuple[str, str] | None:
        # Only an argument the tool declares counts: a stray key the model adds must not steer a rule.
        declared = tool.schema()["function"]["parameters"].get("properties", {}) if tool else {}
        if "command" in declared and isinstance(args.get("command"), str):
            return "command", args["command"]
        if "path" in declared and isinstance(args.get("path"), str):
            try:
                return "path", ctx.workspace.relative(ctx.workspace.resolve(args["path"]))
            except Exception:
                return None  # outside the workspace: no rule may allow it (the tool refuses anyway)
        return None

    def _matches(self, rule: Rule, tool: str, subject: tuple[str, str] | None, *, for_deny: bool) -> bool:
        if rule.tool != tool:
            return False
        if rule.pattern is None:
            return True
        if subject is None:
            return False
        kind, value = subject
        if kind == "path":
            return bool(glob_regex(rule.pattern).match(value))
        if for_deny:  # commands are judged by the programs they run: see _rule_verdict
            return False
        return not SHELL_META.search(value) and command_matches(rule.pattern, value)

    def judge(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> Judgement:
        """The rules' verdict on the call and whether it escalates: the analysis (a command's programs,
        the sandbox policy), done once for the call."""
        subject = self._subject(tool, args, ctx)
        return Judgement(tool, self._rule_verdict(tool, subject, ctx),
                         tool.name == "run_command" and _escalates(args, ctx), subject)

    def _rule_verdict(self, tool: Tool, subject: tuple[str, str] | None, ctx: ToolContext) -> tuple[str, Rule] | None:
        """("deny", rule), ("allow", rule), ("ask", rule) when a deny rule cannot judge the command,
        or None when no rule applies."""
        for rule in self.deny:
            if self._matches(rule, tool.name, subject, for_deny=True):
                return "deny", rule
        command_rules = [r for r in self.deny if r.tool == tool.name and r.pattern is not None]
        if subject and subject[0] == "command" and command_rules:
            # the shell analysis (~7 ms to import) only for a command under a deny rule
            from toycoder_daemon.tools.shell.programs import Invocation, invocations

            try:
                programs = invocations(subject[1], ctx.workspace.root)
            except Exception as e:  # a fault in the analysis must not let the command through
                log.warning("cannot analyse a command (%s: %s): asking", type(e).__name__, e)
                programs = [Invocation("", unsure="the analysis failed")]
            verdicts = [(program_verdict(r.pattern or "", inv), r) for r in command_rules for inv in programs]
            for wanted in ("deny", "ask"):  # "ask" goes even past allow rules and "always"
                found = next((r for v, r in verdicts if v == wanted), None)
                if found:
                    return wanted, found
        for rule in self.allow:
            if self._matches(rule, tool.name, subject, for_deny=False):
                return "allow", rule
        return None

    def steer(self, j: Judgement, decision: str) -> Judgement:
        """A PreToolUse hook's "allow" or "ask" (agent/hooks/). Allow skips the question, but never a
        deny rule, a command a deny rule cannot judge, the mode's refusal or leaving the sandbox
        (those are checked as before); ask asks even where a rule or "always" would let it run."""
        if j.rule and j.rule[0] in ("deny", "ask"):
            return j
        if decision == "ask":
            return replace(j, rule=("ask", Rule("PreToolUse hook", j.tool.name, None)))
        if decision == "allow":
            return replace(j, rule=("allow", Rule("PreToolUse hook", j.tool.name, None)))
        return j

    # ---- the gate -----------------------------------------------------------------------------

    def must_ask(self, j: Judgement) -> bool:
        if j.rule and j.rule[0] == "ask":
            return True
        if j.escalates:
            return True  # leaving the sandbox is the person's call every time, past rules and "always"
        if j.tool.level == "safe" or j.tool.name in self.always:
            return False
        if self.mode == "accept-edits" and j.tool.name in EDIT_TOOLS and j.subject:
            return False  # a path inside the workspace (outside it, the subject is None and it asks)
        return j.rule is None

    def refusal(self, j: Judgement) -> str | None:
        """Why the call is refused without asking (a deny rule, the read-only mode), else None. The
        registry checks this before it prepares a preview: a refused call reads nothing for one."""
        if j.rule and j.rule[0] == "deny":
            return f"denied: the configuration forbids this ({j.rule[1].text})"
        if self.mode == "read-only" and j.tool.level != "safe":
            return (f"denied: the session is in read-only mode: no file writes and no commands ({j.tool.name}). "
                    "Read, search and plan; the user can switch modes with /mode.")
        return None

    def will_ask(self, j: Judgement) -> bool:
        """Whether `check` will ask the person about this call (not refused first, not let through)."""
        return self.refusal(j) is None and self.must_ask(j)

    async def check(self, j: Judgement, request: PermissionRequest, ctx: ToolContext) -> str | None:
        """None to go ahead, or the observation telling the model why not."""
        refused = self.refusal(j)
        if refused is not None:
            return refused
        if not self.must_ask(j):
            return None
        try:
            decision = await ctx.frontend.confirm(request)
        except Exception as e:  # an editor that fails to answer has not said yes
            log.warning("permission request for %s failed: %s", j.tool.name, e)
            decision = "reject"
        if decision == "allow_always":
            self.always.add(j.tool.name)
            return None
        if decision == "allow_once":
            return None
        return f"denied: the user did not allow {request.title}. Do not retry the same action; ask or try another way."
