"""The package uses its libraries only through their public names (issue 26): its AST holds no
underscore name of pygls, lsprotocol, the ACP SDK, pydantic or mcp: no import of a private module or
name, and no private attribute of anything imported from them. Every module goes further: it touches
no private attribute of any object but its own (`self`, its classes, an instance a class makes of
itself; `os._exit` is public), so a library object held in a variable (`conn._conn`,
`server.protocol._request_futures`) is caught too, and so is one of our classes reading another's."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from helpers import ROOT

PACKAGE = ROOT / "toycoder_daemon"
LIBRARIES = ("pygls", "lsprotocol", "acp", "pydantic", "pydantic_core", "mcp")
FACES = sorted((PACKAGE / "faces").rglob("*.py")) + sorted((PACKAGE / "rpc").rglob("*.py"))


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def of_library(module: str) -> bool:
    return module.split(".")[0] in LIBRARIES


def library_reaches(tree: ast.AST) -> Iterator[str]:
    """Private names reached through the libraries in `tree`."""
    bound: set[str] = set()  # local names that stand for a library module or one of its names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if of_library(a.name):
                    if any(private(part) for part in a.name.split(".")):
                        yield f"import {a.name}"
                    bound.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level and of_library(node.module):
            if any(private(part) for part in node.module.split(".")):
                yield f"from {node.module} import ..."
            for a in node.names:
                if private(a.name):
                    yield f"from {node.module} import {a.name}"
                bound.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                yield f"{ast.unparse(node)} (line {node.lineno})"


PUBLIC_UNDERSCORE = {"os._exit"}
"""Underscore names that are public API."""


def foreign_private_attributes(tree: ast.AST) -> Iterator[str]:
    """`x._name` where x is not self, cls, a class the module defines, nor an instance a class's own
    method makes of that class (`child = ToolRegistry(...)` in ToolRegistry.fork)."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    own = {"self", "cls"} | {c.name for c in classes}
    made_here: set[ast.AST] = set()
    for c in classes:
        for method in (n for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            mine = {t.id for a in ast.walk(method) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call)
                    and isinstance(a.value.func, ast.Name) and a.value.func.id == c.name
                    for t in a.targets if isinstance(t, ast.Name)}
            made_here |= {n.value for n in ast.walk(method) if isinstance(n, ast.Attribute)
                          and isinstance(n.value, ast.Name) and n.value.id in mine}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr) and ast.unparse(node) not in PUBLIC_UNDERSCORE
                and node.value not in made_here and not (isinstance(node.value, ast.Name) and node.value.id in own)):
            yield f"{ast.unparse(node)} (line {node.lineno})"


def test_no_private_name_of_the_libraries_in_the_package() -> None:
    found = [f"{p.relative_to(PACKAGE)}: {r}" for p in sorted(PACKAGE.rglob("*.py"))
             for r in library_reaches(ast.parse(p.read_text(encoding="utf-8")))]
    assert found == []


def test_no_module_touches_a_private_attribute_but_its_own() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(FACES) > 10 and set(FACES) <= set(files)
    found = [f"{p.relative_to(PACKAGE)}: {r}" for p in files
             for r in foreign_private_attributes(ast.parse(p.read_text(encoding="utf-8")))]
    assert found == []


def test_the_checks_can_fail() -> None:
    code = ("import pydantic._internal._config as c\n"
            "from acp.core import Connection\n"
            "from mcp import _secret\n"
            "from pygls.protocol import JsonRPCProtocol\n"
            "JsonRPCProtocol._send_handler_result(None)\n"
            "import acp\n"
            "x = acp.schema._private\n"
            "Connection._next_request_id = 3\n"
            "def f(conn):\n"
            "    return conn._conn._handler, self._mine\n"
            "class Pool:\n"
            "    def fork(self):\n"
            "        child = Pool()\n"
            "        child._keys = self._keys\n"
            "        os._exit(0)\n"
            "def outside(pool: Pool):\n"
            "    other = Pool()\n"
            "    return pool._keys, other._keys, os._exists\n")
    reaches = list(library_reaches(ast.parse(code)))
    assert reaches[:2] == ["import pydantic._internal._config", "from mcp import _secret"]
    assert any("acp.schema._private" in r for r in reaches)
    assert any("Connection._next_request_id" in r for r in reaches)
    assert any("JsonRPCProtocol._send_handler_result" in r for r in reaches)
    assert sorted(r.split(" ")[0] for r in foreign_private_attributes(ast.parse(code))) == [
        "Connection._next_request_id", "JsonRPCProtocol._send_handler_result", "acp.schema._private",
        "conn._conn", "conn._conn._handler", "os._exists", "other._keys", "pool._keys"]
