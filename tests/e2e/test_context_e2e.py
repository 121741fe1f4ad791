"""The editor as context (issue 29) through the real daemon process and the scripted model server: a
mention and a context item reach the model request, a refused item is -32602 and the daemon goes on,
and an edit that breaks the file makes the next model request carry the editor's diagnostic. The
in-process tests are unit/faces/lsp/test_context_lsp.py and test_diagnostics_lsp.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import new_session, write_call
from rpc import RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_context_and_diagnostics_through_the_daemon(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def total(x):\n    return x + 1\n")
    d = await start_daemon(caps={"permissionRequest": True, "diagnostics": True},
                           extra="permissions: {allow: [write_file]}\n")

    def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
        # the test's diagnostics producer, as a language server in the editor: `y` is undefined
        uri = params["uris"][0]
        lines = (workspace / "calc.py").read_text().splitlines()
        found = [{"range": {"start": {"line": n, "character": 0}, "end": {"line": n, "character": 1}},
                  "severity": 1, "message": "undefined name 'y'", "source": "pyflakes"}
                 for n, line in enumerate(lines) if "y" in line and "def" not in line]
        return {"items": [{"uri": uri, "diagnostics": found}]}

    d.handlers["toycoder/diagnostics"] = diagnostics
    sid = await new_session(d)
    llm.add({"text": "It adds one."})
    sel = {"type": "selection", "uri": (workspace / "calc.py").as_uri(), "text": "return x + 1",
           "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 16}}}
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "what does @calc.py#L1-2 do?", "context": [sel]})
    sent = llm.requests[-1]["body"]["messages"][-1]["content"]
    assert "Attached file calc.py: lines 1-2 of 2\n     1\tdef total(x):\n     2\t    return x + 1" in sent
    assert "Selected in calc.py (lines 2-2)" in sent

    with pytest.raises(RpcError) as e:
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "x",
                                         "context": [{"type": "file", "uri": "/etc/hostname"}]})
    assert e.value.code == -32602 and "context[0]: /etc/hostname is outside the workspace" in e.value.message

    llm.add(write_call("calc.py", "def total(x):\n    return x + 1\nz = y\n"), {"text": "I will fix it."})
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "add z"})
    observation = llm.requests[-1]["body"]["messages"][-1]
    assert observation["role"] == "tool"
    assert observation["content"].endswith(
        "Editor diagnostics after this edit: calc.py:3 error: undefined name 'y' (pyflakes)")
