"""Field docstrings as field descriptions, filled in only where docs and schemas are generated.

pydantic's `use_attribute_docstrings` reads and parses every model's source when the class is
created: ~25 ms of a new daemon's ~250 ms of imports, for descriptions only the generated files
(docs/protocol.schema.json, protocol.ts, docs/config.md) carry. `document` gives the same result
on demand: the string right under an annotated field, cleaned as a docstring, unless the field
already has a description.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable
from typing import Any, get_args

from pydantic import BaseModel


def _parse(source: str) -> ast.Module:
    # CPython 3.11 keeps ast.parse's recursion depth in one counter shared by the interpreter's threads
    # (another thread's parse: traceback carets, inspect.signature of a builtin), which fails a good
    # parse now and then with "AST constructor recursion depth mismatch" (python/cpython#106905 and
    # kin); a second parse of the same text is exact.
    try:
        return ast.parse(source)
    except SystemError:
        return ast.parse(source)


def _class_docs(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    node = _parse(source).body[0]
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for field, text in zip(node.body, node.body[1:], strict=False):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and isinstance(text, ast.Expr)
                and isinstance(text.value, ast.Constant) and isinstance(text.value.value, str)):
            docs[field.target.id] = inspect.cleandoc(text.value.value)
    return docs


def reachable(models: Iterable[type[BaseModel]]) -> list[type[BaseModel]]:
    """The models and every model their fields use, dependencies first."""
    out: dict[type[BaseModel], None] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in out:
                return
            out[tp] = None  # placed now (cycles end here), moved after its dependencies below
            for f in tp.model_fields.values():
                visit(f.annotation)
            del out[tp]
            out[tp] = None
        for arg in get_args(tp):
            visit(arg)

    for m in models:
        visit(m)
    return list(out)


_documented: set[type[BaseModel]] = set()


def document(models: Iterable[type[BaseModel]]) -> None:
    """Descriptions from field docstrings for these models and those they use; their schemas are
    rebuilt (dependencies first) so JSON Schema carries them. Done once per model."""
    todo = [m for m in reachable(models) if m not in _documented]
    for model in todo:
        sources: dict[type, dict[str, str]] = {}
        for name, field in model.model_fields.items():
            # the docstring of the class that declares the field, as pydantic reads it
            owner = next((c for c in model.__mro__ if name in c.__dict__.get("__annotations__", {})), None)
            if owner is None or field.description is not None:
                continue
            if owner not in sources:
                sources[owner] = _class_docs(owner)
            if name in sources[owner]:
                field.description = sources[owner][name]
    for model in todo:
        model.model_rebuild(force=True)
        _documented.add(model)
