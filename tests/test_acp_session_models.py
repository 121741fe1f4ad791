"""Issue 17: the SDK models a session uses (a prompt, its streamed text, its end, session/list) are
built when the ACP face takes on a workspace (acp_sessions.warm), not by the first prompt, chunk or
list while other sessions stream. The SDK's models are deferred only when it is imported the
daemon's way (acp_early), so that runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from toycoder_daemon import acp_sessions

PROBE = """
import asyncio, json
from toycoder_daemon import deferred_models, field_docs
with field_docs.skipped("acp"), deferred_models.deferred("acp"):
    from toycoder_daemon import acp_sessions
from acp import schema
def built():
    return [getattr(schema, n).__pydantic_complete__ for n in acp_sessions.SESSION_MODELS]
before = built()
asyncio.run(acp_sessions.warm())
print(json.dumps([before, built()]))
"""


def test_warm_builds_the_deferred_session_models() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == [False] * len(acp_sessions.SESSION_MODELS)  # deferred: what warm is for
    assert after == [True] * len(acp_sessions.SESSION_MODELS)


def test_hook_schedules_the_warm_up() -> None:
    scheduled: list[Any] = []
    app: Any = SimpleNamespace(sharing=SimpleNamespace())
    acp_sessions.hook(app, {}, lambda sid, update: None, scheduled.append, lambda entries, a: [], {})
    assert [c.cr_code.co_name for c in scheduled] == ["warm"]
    for c in scheduled:
        c.close()
