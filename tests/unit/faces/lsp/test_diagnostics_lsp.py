"""The editor's diagnostics (issue 29) over the LSP wire, in-process: a client that declares
`experimental.toycoder.diagnostics` answers toycoder/diagnostics (here a diagnostics producer of the
test: it reads the file from disk as a language server would); the edit's new errors end its
observation, what was there before the edit does not; levels; no capability, a slow or malformed
answer: the edit stands without diagnostics; the get_diagnostics tool. The thin subprocess
counterpart is e2e/test_context_e2e.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from helpers import new_session, write_call

from toycoder_daemon.testing.fake_llm import FakeLLM

CAPS = {"permissionRequest": True, "askUser": True, "diagnostics": True}
ALLOW = "permissions: {allow: [write_file, edit_file]}\n"


def producer(asked: list[dict[str, Any]], workspace: Path):  # type: ignore[no-untyped-def]
    """toycoder/diagnostics as a client answers it: `y` used undefined is an error, a line with
    `TODO` a warning (the old TODO on line 1 is there before the edit too)."""

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        items = []
        for uri in params["uris"] or [(workspace / "calc.py").as_uri()]:
            path = Path(unquote(urlparse(uri).path))
            diags = []
            for n, line in enumerate(path.read_text().splitlines() if path.exists() else []):
                if "y" in line.split("=")[-1] and "y =" not in line:
                    diags.append({"range": {"start": {"line": n, "character": 0}, "end": {"line": n, "character": 1}},
                                  "severity": 1, "message": "undefined name 'y'", "source": "pyflakes"})
                for word in ("TODO", "FIXME"):
                    if word in line:
                        diags.append({"range": {"start": {"line": n, "character": 0},
                                                "end": {"line": n, "character": 1}},
                                      "severity": 2, "message": f"a {word} is left", "source": "lint"})
            items.append({"uri": uri, "diagnostics": diags})
        return {"items": items}

    return answer


def _observation(llm: FakeLLM) -> str:
    return [m for m in llm.requests[-1]["body"]["messages"] if m["role"] == "tool"][-1]["content"]


async def test_new_errors_of_an_edit_end_its_observation(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("x = 1  # TODO old\n")
    d = await start_daemon(caps=CAPS, extra=ALLOW)
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/diagnostics"] = producer(asked, workspace)
    # the TODO moves a line down (the same one), the FIXME and the error are new
    llm.add(write_call("calc.py", "v = 0\nx = 1  # TODO old\nz = 2  # FIXME\nw = y + 1\n"), {"text": "fixed?"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "edit it"})
    seen = _observation(llm)
    assert seen.endswith("\n\nEditor diagnostics after this edit: calc.py:3 warning: a FIXME is left (lint)\n"
                         "calc.py:4 error: undefined name 'y' (pyflakes)")
    assert "TODO" not in seen  # there before the edit
    uri = (workspace / "calc.py").as_uri()
    assert asked == [{"uris": [uri], "waitMs": 0}, {"uris": [uri], "waitMs": 1500}]  # before, then after
    result = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_result"][0]
    assert result["status"] == "completed" and "undefined name 'y'" in result["output"]


async def _edit_with(start_daemon, llm: FakeLLM, workspace: Path, extra: str,  # type: ignore[no-untyped-def]
                     content: str) -> list[dict[str, Any]]:
    """A daemon with `extra` config whose model writes calc.py; what its client was asked."""
    d = await start_daemon(caps=CAPS, extra=ALLOW + extra)
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/diagnostics"] = producer(asked, workspace)
    llm.add(write_call("calc.py", content), {"text": "ok"})
    await d.call("toycoder/prompt", {"sessionId": await new_session(d), "text": "edit"})
    return asked


async def test_an_edit_applied_in_the_editors_buffer_is_checked_too(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    """An open file is edited through workspace/applyEdit: no file is written, yet the edit's new error
    (the editor's language server reads the buffer) ends the observation."""
    calc = (workspace / "calc.py").resolve()
    calc.write_text("def add(a, b):\n    return a + b\n")
    d = await start_daemon(init=False, extra=ALLOW)
    await d.call("initialize", {"processId": os.getpid(), "rootUri": workspace.resolve().as_uri(),
                                "capabilities": {"experimental": {"toycoder": CAPS},
                                                 "workspace": {"applyEdit": True}}, "initializationOptions": {}})
    d.notify("initialized", {})
    buffer = [calc.read_text()]
    d.notify("textDocument/didOpen", {"textDocument": {"uri": calc.as_uri(), "languageId": "python", "version": 1,
                                                       "text": buffer[0]}})

    def apply(params: dict[str, Any]) -> dict[str, Any]:  # the editor's buffer takes the edit; the disk does not
        buffer[0] = buffer[0].replace("a + b", "a + y")
        d.notify("textDocument/didChange", {"textDocument": {"uri": calc.as_uri(), "version": 2},
                                            "contentChanges": [{"text": buffer[0]}]})
        return {"applied": True}

    asked: list[int] = []

    def diagnostics(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["waitMs"])
        bad = [{"range": {"start": {"line": 1, "character": 15}, "end": {"line": 1, "character": 16}}, "severity": 1,
                "message": "Undefined name `y`", "source": "Ruff"}] if "y" in buffer[0] else []
        return {"items": [{"uri": calc.as_uri(), "diagnostics": bad}]}

    d.handlers["workspace/applyEdit"] = apply
    d.handlers["toycoder/diagnostics"] = diagnostics
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_string": "a + b",
                                                                "new_string": "a + y"}}]}, {"text": "ok"})
    await d.call("toycoder/prompt", {"sessionId": await new_session(d), "text": "edit"})
    assert calc.read_text() == "def add(a, b):\n    return a + b\n"  # in the buffer only
    assert _observation(llm).endswith("\n\nEditor diagnostics after this edit: calc.py:2 error: Undefined name `y` (Ruff)")
    assert asked == [0, 1500]


async def test_level_errors_leaves_warnings_out_and_off_asks_nothing(start_daemon, llm: FakeLLM,
                                                                     workspace: Path) -> None:
    asked = await _edit_with(start_daemon, llm, workspace, "tools: {diagnostics: {level: errors, wait_ms: 200}}\n",
                             "a = 1  # TODO\n")
    assert "Editor diagnostics" not in _observation(llm) and asked[-1]["waitMs"] == 200
    asked = await _edit_with(start_daemon, llm, workspace, "tools: {diagnostics: {level: errors}}\n", "b = y\n")
    assert _observation(llm).endswith("after this edit: calc.py:1 error: undefined name 'y' (pyflakes)")
    asked = await _edit_with(start_daemon, llm, workspace, "tools: {diagnostics: {level: 'off'}}\n", "c = y\n")
    assert "Editor diagnostics" not in _observation(llm) and asked == []


async def test_no_capability_slow_or_malformed_answers_leave_the_edit_alone(start_daemon, llm: FakeLLM,
                                                                             workspace: Path) -> None:
    plain = await start_daemon(extra=ALLOW)  # no diagnostics capability: never asked
    asked: list[dict[str, Any]] = []
    plain.handlers["toycoder/diagnostics"] = producer(asked, workspace)
    llm.add(write_call("calc.py", "b = y\n"), {"text": "ok"})
    sid = await new_session(plain)
    await plain.call("toycoder/prompt", {"sessionId": sid, "text": "edit"})
    assert asked == [] and _observation(llm) == "created calc.py (1 lines)"

    slow = await start_daemon(caps=CAPS, extra=ALLOW + "tools: {diagnostics: {wait_ms: 100}}\n")
    calls: list[int] = []

    async def late(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params["waitMs"])
        if params["waitMs"]:
            await asyncio.sleep(3)  # past waitMs + the second of grace
        return producer([], workspace)(params)

    slow.handlers["toycoder/diagnostics"] = late
    llm.add(write_call("calc.py", "c = y\n"), {"text": "ok"})
    sid = await new_session(slow)
    await slow.call("toycoder/prompt", {"sessionId": sid, "text": "edit"})
    assert calls == [0, 100] and "Editor diagnostics" not in _observation(llm)
    assert (workspace / "calc.py").read_text() == "c = y\n"

    bad = await start_daemon(caps=CAPS, extra=ALLOW)
    bad.handlers["toycoder/diagnostics"] = lambda p: {"items": "not a list"}
    llm.add(write_call("calc.py", "d = y\n"), {"text": "ok"})
    sid = await new_session(bad)
    await bad.call("toycoder/prompt", {"sessionId": sid, "text": "edit"})
    assert "Editor diagnostics" not in _observation(llm) and (workspace / "calc.py").read_text() == "d = y\n"


async def test_get_diagnostics_tool(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("a = y  # TODO\n")
    d = await start_daemon(caps=CAPS)
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/diagnostics"] = producer(asked, workspace)
    call = {"tool_calls": [{"name": "get_diagnostics", "arguments": {"path": "calc.py"}}]}
    llm.add(call, {"text": "ok"}, {"tool_calls": [{"name": "get_diagnostics", "arguments": {}}]}, {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "problems?"})
    assert _observation(llm) == ("calc.py:1 error: undefined name 'y' (pyflakes)\n"
                                 "calc.py:1 warning: a TODO is left (lint)")
    assert asked[-1] == {"uris": [(workspace / "calc.py").as_uri()], "waitMs": 0}
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "and the workspace?"})
    assert asked[-1]["uris"] == [] and "calc.py:1 error" in _observation(llm)

    none = await start_daemon()
    llm.add(call, {"text": "ok"})
    sid = await new_session(none)
    await none.call("toycoder/prompt", {"sessionId": sid, "text": "problems?"})
    assert _observation(llm) == "the editor gives no diagnostics (the client does not report them to ToyCoder)"
