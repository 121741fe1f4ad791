"""The package uses its libraries only through their public names (issue 26): its AST holds no
underscore name of pygls, lsprotocol, the ACP SDK, pydantic or mcp: no import of a private module or
name, and no private attribute of anything imported from them. The faces go further: they touch no
private attribute of any object but their own (`self`, their classes; `os._exit` is public), so a
library object held in a variable (`conn._conn`, `server.protocol._request_futures`) is caught too."""

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


def foreign_private_attributes(tree: ast.AST) -> Iterator[str]:
    """`x._name` where x is not self, cls or a class the module defines."""
    own = {"self", "cls", "os"} | {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr) and not (
                isinstance(node.value, ast.Name) and node.value.id in own):
            yield f"{ast.unparse(node)} (line {node.lineno})"


def test_no_private_name_of_the_libraries_in_the_package() -> None:
    found = [f"{p.relative_to(PACKAGE)}: {r}" for p in sorted(PACKAGE.rglob("*.py"))
             for r in library_reaches(ast.parse(p.read_text(encoding="utf-8")))]
    assert found == []


def test_the_faces_touch_no_private_attribute_but_their_own() -> None:
    assert len(FACES) > 10
    found = [f"{p.relative_to(PACKAGE)}: {r}" for p in FACES
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
            "    return conn._conn._handler, self._mine\n")
    reaches = list(library_reaches(ast.parse(code)))
    assert reaches[:2] == ["import pydantic._internal._config", "from mcp import _secret"]
    assert any("acp.schema._private" in r for r in reaches)
    assert any("Connection._next_request_id" in r for r in reaches)
    assert any("JsonRPCProtocol._send_handler_result" in r for r in reaches)
    assert sorted(r.split(" ")[0] for r in foreign_private_attributes(ast.parse(code))) == [
        "Connection._next_request_id", "JsonRPCProtocol._send_handler_result", "acp.schema._private",
        "conn._conn", "conn._conn._handler"]
