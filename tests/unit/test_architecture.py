"""The package's tree keeps the layers of docs/architecture.md: every import between subpackages (lazy
ones inside functions and `if TYPE_CHECKING:` ones included) goes in a direction the table below
allows, no two subpackages need each other, no two modules need each other, only `__init__` and
`__main__` sit at the package root, every subpackage says what it is for, and the third-party
distributions the package imports are exactly those pyproject.toml declares."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers import ROOT

PACKAGE = ROOT / "toycoder_daemon"
NAME = "toycoder_daemon"

BELOW_AGENT = {"core", "config", "llm", "tools"}
CORE = BELOW_AGENT | {"agent", "sessions", "checkpoints", "commands", "prompts"}
ALLOWED: dict[str, set[str]] = {
    # core <- config <- llm, tools <- agent <- sessions, checkpoints, commands, prompts <- app <- faces
    "core": set(),
    "config": {"core"},
    "llm": {"core", "config"},
    "tools": {"core", "config"},
    "agent": BELOW_AGENT,
    "prompts": BELOW_AGENT,
    "sessions": BELOW_AGENT | {"agent"},
    "checkpoints": BELOW_AGENT | {"agent", "sessions"},
    "commands": BELOW_AGENT | {"agent", "sessions", "checkpoints", "prompts"},
    "app": CORE,
    # wire <- rpc <- faces; wire takes field docs from config
    "wire": {"core", "config"},
    "rpc": {"core", "wire"},
    "faces": CORE | {"app", "wire", "rpc"},
    "warm": CORE | {"app", "wire", "rpc", "faces"},  # the fork server preloads the faces
    "root": {"warm"},  # __main__ hands over to the launcher at once
    # a client: it speaks the protocol and imports nothing else of the daemon but core.util.visible,
    # the one escaping of control characters (what the daemon shows is what the client shows)
    "cli": {"wire", "core"},
    "testing": CORE | {"app", "wire", "rpc", "faces", "warm", "cli"},
}
"""What each subpackage may import besides itself (the standard library and third parties aside).
Nothing may import `testing`."""


@dataclass(frozen=True)
class Edge:
    importer: str
    target: str
    path: Path
    line: int


def module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in package.rglob("*.py") if "sample_project" not in p.parts}


def edges(package: Path = PACKAGE) -> Iterator[Edge]:
    """Every import of one of the package's modules, anywhere in a file, with its line."""
    known = modules(package)
    for name, path in known.items():
        parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = (".".join(parts[: len(parts) - node.level + 1] + [node.module or ""]).rstrip(".")
                        if node.level else (node.module or ""))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for t in targets:
                while t and t not in known:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    yield Edge(name, t, path, node.lineno)


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "root"
    assert parts[1] in ALLOWED, f"{module} is in no layer: add its subpackage to ALLOWED and docs/architecture.md"
    return parts[1]


def wrong_directions(package: Path = PACKAGE) -> list[str]:
    wrong = []
    for e in edges(package):
        a, b = layer(e.importer), layer(e.target)
        if b == "root" and e.target == NAME:  # the package itself: __version__
            continue
        if a != b and b not in ALLOWED[a]:
            wrong.append(f"{e.path.relative_to(package.parent)}:{e.line}: {e.importer} ({a}) imports {e.target} ({b})")
    return sorted(wrong)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g.get(v, ())):
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


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {m: set() for m in modules(package)}
    for e in edges(package):
        g[e.importer].add(e.target)
    return g


def subpackage_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for e in edges(package):
        a, b = layer(e.importer), layer(e.target)
        if a != b and e.target != NAME:
            g.setdefault(a, set()).add(b)
    return g


def test_the_graph_is_read() -> None:
    g = module_graph()
    assert "toycoder_daemon.agent.react" in g["toycoder_daemon.app.runtime"]
    assert "toycoder_daemon.tools.base" in g["toycoder_daemon.tools.files.read"]
    assert "toycoder_daemon.llm.openai_client" in g["toycoder_daemon.app.factories"]  # a lazy import counts


def test_imports_go_in_the_allowed_directions() -> None:
    assert wrong_directions() == []


def test_no_cycles_between_subpackages_nor_modules() -> None:
    assert cycles(subpackage_graph()) == []
    assert cycles(module_graph()) == []


def test_nothing_in_the_package_imports_testing() -> None:
    assert [f"{e.path.relative_to(PACKAGE.parent)}:{e.line}" for e in edges()
            if layer(e.target) == "testing" and layer(e.importer) != "testing"] == []


def test_only_init_and_main_at_the_root_and_every_subpackage_says_what_it_is_for() -> None:
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]
    silent = []
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        if init.parent != PACKAGE and "sample_project" not in init.parts and not doc:
            silent.append(str(init.relative_to(PACKAGE)))
    assert silent == []
    top = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert top == set(ALLOWED) - {"root"}, "a subpackage the table does not know, or a table row without one"


def test_an_upward_import_fails_naming_file_and_line(tmp_path: Path) -> None:
    # on a throwaway copy of the package: core reaching up into app, and tools into agent
    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert wrong_directions(copy) == []
    errors = copy / "core" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef later():\n    from toycoder_daemon.app import application\n")
    line = len(errors.read_text().splitlines())
    base = copy / "tools" / "base.py"
    base.write_text(base.read_text() + "\nif False:\n    from ..agent import react\n")
    assert wrong_directions(copy) == [
        f"{NAME}/core/errors.py:{line}: toycoder_daemon.core.errors (core) imports toycoder_daemon.app.application (app)",
        f"{NAME}/tools/base.py:{len(base.read_text().splitlines())}: toycoder_daemon.tools.base (tools) imports "
        "toycoder_daemon.agent.react (agent)",
    ]


def test_the_cycle_finder_can_fail() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


NOT_IMPORTED = {"ripgrep": "ships the rg binary that tools/search runs"}
"""Declared distributions the package uses without importing them, and why."""


def third_party_imports(package: Path = PACKAGE) -> dict[str, str]:
    """The top-level names the package imports (statements anywhere in a file, and importlib.import_module
    of a literal), the standard library and the package itself aside: name -> first place."""
    found: dict[str, str] = {}
    for path in modules(package).values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names = [node.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top != NAME and top not in sys.stdlib_module_names:
                    found.setdefault(top, f"{path.relative_to(package.parent)}:{node.lineno}")
    return found


def normalized(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def imported_distributions(package: Path = PACKAGE) -> dict[str, str]:
    """The distributions behind third_party_imports (an import name no installed distribution provides,
    such as a backport this Python does not need, stands for a distribution of its own name)."""
    provides = importlib.metadata.packages_distributions()
    return {normalized(dist): where for name, where in third_party_imports(package).items()
            for dist in provides.get(name, [name])}


def declared_distributions() -> set[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    return {normalized(re.match(r"[A-Za-z0-9._-]+", req)[0]) for req in project["dependencies"]}


def dependency_mismatches(imported: dict[str, str], declared: set[str]) -> list[str]:
    return ([f"{where}: imports {dist}, which pyproject.toml does not declare" for dist, where in sorted(imported.items())
             if dist not in declared]
            + [f"pyproject.toml declares {dist}, which the package never imports" for dist in sorted(declared)
               if dist not in imported and dist not in NOT_IMPORTED])


def test_declared_dependencies_are_the_imported_ones() -> None:
    imported = imported_distributions()
    assert {"pygls", "httpx2", "httpcore2", "orjson", "pyyaml"} <= set(imported)  # lazy and import_module ones count
    assert dependency_mismatches(imported, declared_distributions()) == []


def test_an_undeclared_or_unused_dependency_is_named(tmp_path: Path) -> None:
    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "llm" / "titles_sdk.py").write_text("def title():\n    import openai.types\n")
    assert dependency_mismatches(imported_distributions(copy), declared_distributions() | {"left-over"}) == [
        f"{NAME}/llm/titles_sdk.py:2: imports openai, which pyproject.toml does not declare",
        "pyproject.toml declares left-over, which the package never imports",
    ]


def error_codes(package: Path = PACKAGE) -> tuple[dict[int, list[str]], list[str]]:
    """JSON-RPC and LSP error codes (-32899..-32000) in the package: value -> the module constants defined as
    that literal, and every other place the literal is written."""
    defined: dict[int, list[str]] = {}
    elsewhere: list[str] = []
    for name, path in modules(package).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {id(node.value): node for node in tree.body if isinstance(node, ast.Assign)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
                    and isinstance(node.operand.value, int) and 32000 <= node.operand.value <= 32899):
                assign = constants.get(id(node))
                if assign is None:
                    elsewhere.append(f"{path.relative_to(package.parent)}:{node.lineno}")
                else:
                    defined.setdefault(-node.operand.value, []).extend(f"{name}.{ast.unparse(t)}" for t in assign.targets)
    return defined, elsewhere


def test_each_error_code_is_one_constant() -> None:
    defined, elsewhere = error_codes()
    assert elsewhere == []
    assert defined[-32800] == [f"{NAME}.wire.codes.REQUEST_CANCELLED"]
    # one number, two protocols: LSP's "server not initialized" and ACP's "resource not found"
    assert defined.pop(-32002) == [f"{NAME}.wire.codes.SERVER_NOT_INITIALIZED", f"{NAME}.faces.acp.client.RESOURCE_NOT_FOUND"]
    assert {code: names for code, names in defined.items() if len(names) > 1} == {}


def test_a_second_error_code_constant_is_found(tmp_path: Path) -> None:
    copy = tmp_path / NAME
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "faces" / "lsp" / "cancelled.py").write_text("REQUEST_CANCELLED = -32800\n\ndef f():\n    return {'code': -32601}\n")
    defined, elsewhere = error_codes(copy)
    assert defined[-32800] == [f"{NAME}.wire.codes.REQUEST_CANCELLED", f"{NAME}.faces.lsp.cancelled.REQUEST_CANCELLED"]
    assert elsewhere == [f"{NAME}/faces/lsp/cancelled.py:4"]
