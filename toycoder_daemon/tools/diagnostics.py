"""The editor's diagnostics (issue 29): the get_diagnostics tool, and what an edit introduced.

The editor's language servers already know whether an edit broke the file. A client that declares
the capability answers toycoder/diagnostics (the Frontend's `diagnostics`); after a successful
edit_file or write_file the agent (agent/react.py) asks for that file, waiting up to
`tools.diagnostics.wait_ms`, and the errors (or warnings) that were not there before the edit
(same message, nearby line) end the tool's observation, so the model fixes them in the same turn.
No capability, no answer in time, an error: no diagnostics, and the edit stands.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

from toycoder_daemon.core.ports import FileDiagnostics, Frontend
from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext, ToolError, tool
from toycoder_daemon.tools.workspace import OutsideWorkspace, Workspace

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
MAX_SHOWN = 200
NEARBY = 3
"""Lines a diagnostic may move (the edit added or removed lines above it) and still be the same one."""
WRITERS = frozenset({"edit_file", "write_file"})
NO_EDITOR = "the editor gives no diagnostics (the client does not report them to ToyCoder)"


def severity(d: dict[str, Any]) -> int:
    value = d.get("severity")
    return value if isinstance(value, int) and value in SEVERITY else 1  # LSP: unset means the client decides


def line_of(d: dict[str, Any]) -> int:
    """The diagnostic's 1-based line."""
    start = (d.get("range") or {}).get("start") or {}
    line = start.get("line") if isinstance(start, dict) else None
    return (line if isinstance(line, int) else 0) + 1


def diagnostic_line(rel: str, d: dict[str, Any]) -> str:
    """`calc.py:3 error: undefined name 'y' (pyflakes)`: how the model reads one LSP Diagnostic."""
    source = f" ({d['source']})" if d.get("source") else ""
    message = " ".join(str(d.get("message", "")).split())
    return f"{rel}:{line_of(d)} {SEVERITY[severity(d)]}: {message}{source}"


def shown_path(workspace: Workspace, uri: str) -> str:
    """A diagnostic's file as the model names it: workspace-relative when inside it."""
    if not uri.startswith("file:"):
        return uri
    from urllib.parse import unquote, urlparse

    p = Path(unquote(urlparse(uri).path))
    return workspace.relative(p) if workspace.contains(p) else str(p)


def _kept(d: dict[str, Any], level: str) -> bool:
    return severity(d) <= (1 if level == "errors" else 2)


def introduced(before: list[FileDiagnostics] | None, after: list[FileDiagnostics],
               level: str) -> list[tuple[str, dict[str, Any]]]:
    """(uri, diagnostic) of `after` at `level` or worse that `before` lacks (same message, within
    NEARBY lines)."""
    old = [(f.uri, d) for f in before or () for d in f.diagnostics]
    out = []
    for f in after:
        for d in f.diagnostics:
            if not isinstance(d, dict) or not _kept(d, level):
                continue
            if any(u == f.uri and o.get("message") == d.get("message") and abs(line_of(o) - line_of(d)) <= NEARBY
                   for u, o in old if isinstance(o, dict)):
                continue
            out.append((f.uri, d))
    return out


class EditCheck:
    """One writing call's diagnostics: `before` it runs, then `note` for its observation after."""

    def __init__(self, frontend: Frontend, workspace: Workspace, wait_ms: int, level: str, path: Any):
        self.frontend, self.workspace, self.wait_ms, self.level = frontend, workspace, wait_ms, level
        self.uri = ""
        self.baseline: list[FileDiagnostics] | None = None
        self.asked = False
        """before() ran: the call is a writer (only then is there an edit to check)."""
        if level != "off" and isinstance(path, str):
            with contextlib.suppress(OutsideWorkspace):  # the tool refuses it itself
                self.uri = workspace.resolve(path).as_uri()

    async def before(self) -> None:
        self.asked = True
        if self.uri:
            self.baseline = await self.frontend.diagnostics([self.uri], 0)
            if self.baseline is None:
                self.uri = ""  # the editor gives none: nothing to ask after the edit either

    async def note(self) -> str:
        """"" or "\\n\\nEditor diagnostics after this edit: ..." for the observation."""
        if not self.uri or not self.asked:
            return ""
        after = await self.frontend.diagnostics([self.uri], self.wait_ms)
        if not after:
            return ""
        new = introduced(self.baseline, after, self.level)
        if not new:
            return ""
        lines = [diagnostic_line(shown_path(self.workspace, uri), d) for uri, d in new[:20]]
        more = f"\n(and {len(new) - 20} more)" if len(new) > 20 else ""
        return secrets.redact("\n\nEditor diagnostics after this edit: " + "\n".join(lines) + more)


@tool(level="safe", title=lambda a: f"get_diagnostics {a.get('path') or '(workspace)'}")
async def get_diagnostics(
    ctx: ToolContext,
    path: Annotated[str | None, "A file, relative to the workspace root; none: every file the editor has diagnostics for"] = None,
) -> str:
    """The editor's current diagnostics (errors, warnings, hints from its language servers) for a file
    or for the whole workspace, errors first, at most 200."""
    uris: list[str] = []
    if path:
        try:
            uris = [ctx.workspace.resolve(path).as_uri()]
        except OutsideWorkspace as e:
            raise ToolError(f"refused: {e}") from None
    found = await ctx.frontend.diagnostics(uris, 0)
    if found is None:
        return NO_EDITOR
    rows = sorted(((severity(d), shown_path(ctx.workspace, f.uri), line_of(d), d) for f in found
                   for d in f.diagnostics if isinstance(d, dict)), key=lambda r: r[:3])
    if not rows:
        return f"no diagnostics for {path}" if path else "no diagnostics in the workspace"
    shown = [diagnostic_line(rel, d) for _, rel, _, d in rows[:MAX_SHOWN]]
    more = f"\n(and {len(rows) - MAX_SHOWN} more not shown)" if len(rows) > MAX_SHOWN else ""
    return "\n".join(shown) + more
