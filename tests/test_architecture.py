"""The import graph of toycoder_daemon keeps the layers of docs/architecture.md: every import, lazy
(inside a function) and TYPE_CHECKING ones included, goes in an allowed direction, and no two
modules need each other."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "toycoder_daemon"

# The groups, lowest first, and what each may import besides itself (docs/architecture.md).
GROUPS: dict[str, tuple[str, ...]] = {
    "base": ("toycoder_daemon", "toycoder_daemon.ports", "toycoder_daemon.messages", "toycoder_daemon.errors",
             "toycoder_daemon.secrets", "toycoder_daemon.environ_scrub", "toycoder_daemon.atomic", "toycoder_daemon.logs",
             "toycoder_daemon.coalesce", "toycoder_daemon.background", "toycoder_daemon.safejson",
             "toycoder_daemon.modes", "toycoder_daemon.field_docs", "toycoder_daemon.warm.idle",
             "toycoder_daemon.warm.proc_identity"),
    "wire": ("toycoder_daemon.protocol", "toycoder_daemon.protocol_base", "toycoder_daemon.protocol_codes",
             "toycoder_daemon.protocol_checkpoints",
             "toycoder_daemon.protocol_sessions",
             "toycoder_daemon.protocol_ts"),
    "llm": ("toycoder_daemon.llm",),
    "config": ("toycoder_daemon.config",),
    "prompts": ("toycoder_daemon.prompts",),
    "tools": ("toycoder_daemon.tools",),
    "agent": ("toycoder_daemon.agent",),
    "sessions": ("toycoder_daemon.sessions",),
    "checkpoints": ("toycoder_daemon.checkpoints",),
    "commands": ("toycoder_daemon.commands",),
    "app": ("toycoder_daemon.app", "toycoder_daemon.app_models", "toycoder_daemon.app_runtime", "toycoder_daemon.factories", "toycoder_daemon.undo",
            "toycoder_daemon.shared_sessions", "toycoder_daemon.session_mcp"),
    "faces": ("toycoder_daemon.server", "toycoder_daemon.editor_frontend", "toycoder_daemon.acp",
              "toycoder_daemon.acp_frontend", "toycoder_daemon.acp_client", "toycoder_daemon.acp_sessions",
              "toycoder_daemon.acp_fs", "toycoder_daemon.acp_terminal", "toycoder_daemon.acp_content", "toycoder_daemon.acp_mcp", "toycoder_daemon.stdio",
              "toycoder_daemon.rpc_io", "toycoder_daemon.__main__", "toycoder_daemon.daemon", "toycoder_daemon.warm", "toycoder_daemon.lsp_mapping",
              "toycoder_daemon.pygls_adapter", "toycoder_daemon.ndjson", "toycoder_daemon.rpc_checks", "toycoder_daemon.outbox",
              "toycoder_daemon.reply_wait", "toycoder_daemon.lsp_calls",
              "toycoder_daemon.acp_turn"),
    "testing": ("toycoder_daemon.testing",),
    "terminal": ("toycoder_daemon.terminal",),
}
CORE = {"base", "llm", "config", "prompts", "tools", "agent", "sessions", "checkpoints", "commands"}
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "wire": {"base"},
    "llm": {"base"},
    "config": {"base"},
    "prompts": {"base"},
    "tools": {"base"},
    "agent": {"base", "llm", "tools"},
    "sessions": {"base", "llm", "tools"},
    "checkpoints": {"base"},
    "commands": {"base", "llm", "tools", "sessions"},
    "app": CORE,
    "faces": CORE | {"app", "wire"},
    "testing": {"base", "llm"},
    "terminal": {"base", "wire"},  # a client: it speaks the protocol, it never imports the daemon's core
}

def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "sample_project" not in p.parts}


def imported(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """Every toycoder_daemon module `path` imports, anywhere in the file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).rstrip(".") \
                if node.level else (node.module or "")
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                yield t


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, set(known))) for name, path in known.items()}


def group_of(module: str) -> str:
    best = ""
    found = None
    for group, prefixes in GROUPS.items():
        for p in prefixes:
            matches = module == p or (module.startswith(p + ".") and p != "toycoder_daemon")
            if matches and len(p) > len(best):
                best, found = p, group
    assert found is not None, f"{module} is in no layer: add it to GROUPS and docs/architecture.md"
    return found


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    g = graph()
    assert "toycoder_daemon.agent.react" in g["toycoder_daemon.app_runtime"]
    assert "toycoder_daemon.tools.base" in g["toycoder_daemon.tools.files"]
    assert "toycoder_daemon.llm.openai_client" in g["toycoder_daemon.factories"]  # a lazy import counts


def test_imports_go_in_the_allowed_directions() -> None:
    wrong = []
    for importer, targets in graph().items():
        for target in targets:
            a, b = group_of(importer), group_of(target)
            if a != b and b not in ALLOWED[a]:
                wrong.append(f"{importer} ({a}) imports {target} ({b})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_checks_can_fail() -> None:
    # the cycle finder and the direction table catch what they are meant to catch
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "agent" not in ALLOWED["tools"] and "app" not in ALLOWED["commands"]
    assert group_of("toycoder_daemon.tools.files") == "tools" and group_of("toycoder_daemon") == "base"
