"""Another package's pydantic models built when first used rather than when imported.

The ACP SDK defines ~270 models and builds each one's validator at import; a session uses a few
dozen. Imported inside `deferred("acp")`, they are built as with `defer_build=True`: pydantic builds
a model the first time it validates or dumps one, with the same result. Reaches into pydantic's
internals: with a pydantic that lacks the hook, nothing changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@contextlib.contextmanager
def deferred(package: str) -> Iterator[None]:
    """While inside, model classes defined in `package` (its modules) defer their build; every other
    model is built as before."""
    try:
        from pydantic._internal import _config

        original = _config.ConfigWrapper.__dict__["for_model"]
        build = original.__func__
    except (ImportError, KeyError, AttributeError):
        yield
        return

    def for_model(cls: type, bases: Any, namespace: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        wrapper = build(cls, bases, namespace, *args, **kwargs)
        if _in(str(namespace.get("__module__", "")), package):
            wrapper.config_dict["defer_build"] = True
        return wrapper

    setattr(_config.ConfigWrapper, "for_model", classmethod(for_model))  # noqa: B010 (mypy: no method-assign)
    try:
        yield
    finally:
        setattr(_config.ConfigWrapper, "for_model", original)  # noqa: B010
