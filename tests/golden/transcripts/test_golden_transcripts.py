"""Golden transcripts of both faces: every frame, both directions, through the real daemon subprocess
(`python -m toycoder_daemon`, `--acp`) against the scripted model server, compared exactly after
normalisation with tests/golden/transcripts/<face>/<scenario>.json (transcripts.py beside it says what is
normalised). What a client sees is the contract, whatever implements a face and however the daemon was
started. After a deliberate change: UPDATE_GOLDEN=1, and say why in the commit.

One test per face, over the launches (`LAUNCHES`; each run gets its own HOME, config, key and cwd) and
the scenarios:
- `turns`: initialize, a session, a prompt with a tool call, an edit the client allows and one it
  rejects, a cancel of a running turn and a prompt after it (LSP: also a `$/cancelRequest`), errors (an
  unknown session, bad params, an unknown method, a body that is not JSON), then the end (LSP:
  shutdown and exit; ACP: stdin closes) and the exit status.
- `uninitialized`: a request before `initialize`, then `initialize` (apart: `turns` starts as
  clients do, with `initialize` first, the way a new process answers fastest).
- `editor`: the client's buffers. LSP: unsaved text opened, read by a tool, edited through
  `workspace/applyEdit`, closed. ACP: `fs/read_text_file` and `fs/write_text_file`.
- `load`: a session made by one daemon, listed and loaded (its history replayed) by the next one, and
  continued there.

Order: each script is sequential. It sends a frame only when the frames it waits for are in, and it
waits for everything the daemon sends for a step, so each daemon frame has one place among the
client's. The daemon frames that follow one another without the client in between come in an order the
daemon fixes: ACP's `available_commands_update` is queued after the `session/new` answer; the LSP
`toycoder/cancel` is answered on the spot, the cancelled turn on a later loop step. Every model reply
streams its text as one delta (deltas sharing a network read are coalesced, so several would make the
count depend on timing) and scripts its token counts (the default counts characters, and the system
prompt holds the workspace path). A cancelled reply sends one delta and then stalls, so the turn is
cancelled after exactly that delta. Where the client answers a daemon's request and also sends a
notification (the LSP `didChange` of an applied edit), it sends the notification first, as editors do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from transcripts import FACES, Client, Frame, Launch, Place, Run, compare, normalise
from warm_helpers import ensure_server

from toycoder_daemon.testing.fake_llm import FakeLLM

LAUNCHES = [Launch("cold", {"TOYCODER_WARM": "0"}), Launch("warm", {"TOYCODER_WARM": "1"})]
"""Cold: the daemon runs in the launched process. Warm: this run's fork server (conftest's runtime dir)
forks it, and `transcripts.running` checks that it did."""


def reply(text: str | list[str], *, tool_calls: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    """A model reply whose text streams as one delta per item, with scripted token counts."""
    out: dict[str, Any] = {"text": [text] if isinstance(text, str) else text,
                           "usage": {"prompt_tokens": 100, "completion_tokens": 10}, **more}
    if tool_calls:
        out["tool_calls"] = tool_calls
    return out


def read(path: str) -> list[dict[str, Any]]:
    return [{"name": "read_file", "arguments": {"path": path}}]


def edit(old: str, new: str) -> list[dict[str, Any]]:
    return [{"name": "edit_file", "arguments": {"path": "README.md", "old_string": old, "new_string": new}}]


STALLED = reply(["Thinking", " it over"], chunk_delay=60)  # one delta, then a stall the cancel cuts
TURNS = [  # the model's side of `turns`, both faces
    reply("Let me read it.", tool_calls=read("src/app.py")), reply("It defines add()."),
    reply("", tool_calls=edit("A tiny project.", "A small project.")), reply("Edited."),  # allowed
    reply("", tool_calls=edit("# Demo", "# Notes")), reply("Left it."),  # rejected
    STALLED, reply("Still here."),
]
EDITED = "# Demo\nA small project.\n"
README = "# Demo\nA tiny project.\n"  # conftest's workspace
UNSAVED = "# Demo\nUnsaved text.\n"
LOAD = [reply("", tool_calls=read("src/app.py")), reply("It adds."), reply("Yes.")]


def requested(f: Frame) -> bool:
    return "method" in f and "id" in f


async def serve(c: Client, turn: int, answers: dict[str, Any]) -> Frame:
    """Answer the daemon's requests until the answer to request `turn` arrives, and return that answer.
    `answers` gives each method's result, or a function of the request that returns it."""
    while True:
        f = await c.expect(f"the answer to {turn} or a request for {sorted(answers)}",
                           lambda f: (f.get("id") == turn and not requested(f))
                           or (requested(f) and f["method"] in answers))
        if not requested(f):
            return f
        result = answers[f["method"]]
        c.answer(f, result(f) if callable(result) else result)


# ---- the LSP face -------------------------------------------------------------------------------


async def lsp_start(c: Client, root: Path, capabilities: dict[str, Any] | None = None) -> None:
    c.step("initialize")
    await c.call("initialize", {"processId": None, "rootUri": root.resolve().as_uri(), "capabilities": {
        "experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}, **(capabilities or {})}})
    c.notify("initialized", {})


def text_delta(f: Frame) -> bool:
    return bool(f["method"] == "toycoder/update" and f["params"]["update"]["kind"] == "text_delta")


async def lsp_turns(run: Run) -> None:
    run.llm.add(*TURNS, STALLED)
    async with run.daemon() as c:
        await lsp_start(c, run.workspace)

        c.step("a session")
        sid = (await c.call("toycoder/session/new", {}))["result"]["sessionId"]

        c.step("a prompt with a tool call")
        await c.call("toycoder/prompt", {"sessionId": sid, "text": "What does app.py do?"})

        for decision in ("allow_once", "reject"):
            c.step(f"an edit the client answers {decision}")
            turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Edit the readme."})
            await serve(c, turn, {"toycoder/requestPermission": {"decision": decision}})

        c.step("a cancel of a running turn")
        turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Think it over."})
        await c.notification("the first text", text_delta)
        await c.call("toycoder/cancel", {"sessionId": sid})
        await c.reply(turn)

        c.step("the session goes on")
        await c.call("toycoder/prompt", {"sessionId": sid, "text": "Again."})

        c.step("a $/cancelRequest of a running turn")
        turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Think it over."})
        await c.notification("the first text", text_delta)
        c.notify("$/cancelRequest", {"id": turn})
        await c.reply(turn)

        c.step("errors")
        await c.call("toycoder/prompt", {"sessionId": "no-such-session", "text": "hi"})
        await c.call("toycoder/prompt", {"text": "no session id"})
        await c.call("toycoder/nope", {})
        c.send_unparsable("{not json")
        await c.expect("the parse error", lambda f: f.get("error", {}).get("code") == -32700)

        c.step("shutdown and exit")
        await c.call("shutdown", None)
        c.notify("exit", None)
        assert await c.end() == 0
    assert (run.workspace / "README.md").read_text() == EDITED
    assert len(run.llm.requests) == len(TURNS) + 1


async def lsp_uninitialized(run: Run) -> None:
    async with run.daemon() as c:
        c.step("a request before initialize")
        await c.call("toycoder/session/new", {})

        await lsp_start(c, run.workspace)
        await c.call("toycoder/session/list", {})

        c.step("stdin closes")
        assert await c.end() == 0


async def lsp_editor(run: Run) -> None:
    run.llm.add(reply("", tool_calls=read("README.md")),
                reply("", tool_calls=edit("Unsaved text.", "Edited in the buffer.")), reply("Done."),
                reply("", tool_calls=read("README.md")), reply("Back to the disk."))
    uri = (run.workspace / "README.md").resolve().as_uri()
    async with run.daemon() as c:
        await lsp_start(c, run.workspace, {"workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}}})

        c.step("a buffer with unsaved text")
        c.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "markdown", "version": 1,
                                                           "text": UNSAVED}})
        sid = (await c.call("toycoder/session/new", {}))["result"]["sessionId"]

        c.step("a turn reads it and edits it through the editor")

        def apply(f: Frame) -> dict[str, Any]:  # the edit itself is in the transcript
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                "contentChanges": [{"text": "# Demo\nEdited in the buffer.\n"}]})
            return {"applied": True}

        turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Fix the readme."})
        await serve(c, turn, {"toycoder/requestPermission": {"decision": "allow_once"},
                              "workspace/applyEdit": apply})

        c.step("the buffer closes: the disk again")
        c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        await c.call("toycoder/prompt", {"sessionId": sid, "text": "Read it again."})

        c.step("stdin closes")
        assert await c.end() == 0
    assert (run.workspace / "README.md").read_text() == README  # the editor saves its buffer, not the daemon


async def lsp_load(run: Run) -> None:
    run.llm.add(*LOAD)
    async with run.daemon() as c:
        await lsp_start(c, run.workspace)
        c.step("a session with a turn")
        sid = (await c.call("toycoder/session/new", {}))["result"]["sessionId"]
        await c.call("toycoder/prompt", {"sessionId": sid, "text": "What does app.py do?"})
        c.step("stdin closes")
        assert await c.end() == 0
    async with run.daemon() as c:
        await lsp_start(c, run.workspace)
        c.step("the next daemon lists and loads it")
        await c.call("toycoder/session/list", {})
        await c.call("toycoder/session/load", {"sessionId": sid})
        c.step("and goes on")
        await c.call("toycoder/prompt", {"sessionId": sid, "text": "Sure?"})
        c.step("stdin closes")
        assert await c.end() == 0


# ---- the ACP face -------------------------------------------------------------------------------


def update(kind: str) -> Callable[[Frame], bool]:
    return lambda f: f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind


def prompt(s: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": s}]


def chosen(option: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option}}


async def acp_start(c: Client, *, fs: bool = False) -> None:
    c.step("initialize")
    await c.call("initialize", {"protocolVersion": 1, "clientCapabilities": {
        "fs": {"readTextFile": fs, "writeTextFile": fs}, "terminal": False}})


async def acp_new_session(c: Client, workspace: Path) -> str:
    sid = (await c.call("session/new", {"cwd": str(workspace.resolve()), "mcpServers": []}))["result"]["sessionId"]
    await c.notification("the commands", update("available_commands_update"))
    return str(sid)


async def acp_turns(run: Run) -> None:
    run.llm.add(*TURNS)
    async with run.daemon() as c:
        await acp_start(c)

        c.step("a session")
        sid = await acp_new_session(c, run.workspace)

        c.step("a prompt with a tool call")
        await c.call("session/prompt", {"sessionId": sid, "prompt": prompt("What does app.py do?")})

        for option in ("allow_once", "reject_once"):
            c.step(f"an edit the client answers {option}")
            turn = c.request("session/prompt", {"sessionId": sid, "prompt": prompt("Edit the readme.")})
            await serve(c, turn, {"session/request_permission": chosen(option)})

        c.step("a cancel of a running turn")
        turn = c.request("session/prompt", {"sessionId": sid, "prompt": prompt("Think it over.")})
        await c.notification("the first text", update("agent_message_chunk"))
        c.notify("session/cancel", {"sessionId": sid})
        await c.reply(turn)

        c.step("the session goes on")
        await c.call("session/prompt", {"sessionId": sid, "prompt": prompt("Again.")})

        c.step("errors")
        await c.call("session/prompt", {"sessionId": "no-such-session", "prompt": prompt("hi")})
        await c.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
        await c.call("session/nope", {})
        c.send_unparsable("{not json")
        await c.expect("the parse error", lambda f: f.get("error", {}).get("code") == -32700)

        c.step("stdin closes")
        assert await c.end() == 0
    assert (run.workspace / "README.md").read_text() == EDITED
    assert len(run.llm.requests) == len(TURNS)


async def acp_uninitialized(run: Run) -> None:
    async with run.daemon() as c:
        c.step("a request before initialize")  # refused, as on the LSP face
        await c.call("session/new", {"cwd": str(run.workspace.resolve()), "mcpServers": []})

        await acp_start(c)
        await c.call("session/list", {})

        c.step("stdin closes")
        assert await c.end() == 0


async def acp_editor(run: Run) -> None:
    run.llm.add(reply("", tool_calls=read("README.md")),
                reply("", tool_calls=edit("Unsaved text.", "Edited by the client.")), reply("Done."))
    written: list[str] = []

    def write(f: Frame) -> dict[str, Any]:
        written.append(f["params"]["content"])
        return {}

    async with run.daemon() as c:
        await acp_start(c, fs=True)
        c.step("a session")
        sid = await acp_new_session(c, run.workspace)

        c.step("a turn reads and edits a file through the client")
        turn = c.request("session/prompt", {"sessionId": sid, "prompt": prompt("Fix the readme.")})
        await serve(c, turn, {"fs/read_text_file": {"content": UNSAVED},
                              "session/request_permission": chosen("allow_once"),
                              "fs/write_text_file": write})

        c.step("stdin closes")
        assert await c.end() == 0
    assert written == ["# Demo\nEdited by the client.\n"]
    assert (run.workspace / "README.md").read_text() == README  # the client writes, not the daemon


async def acp_load(run: Run) -> None:
    run.llm.add(*LOAD)
    cwd = str(run.workspace.resolve())
    async with run.daemon() as c:
        await acp_start(c)
        c.step("a session with a turn")
        sid = await acp_new_session(c, run.workspace)
        await c.call("session/prompt", {"sessionId": sid, "prompt": prompt("What does app.py do?")})
        c.step("stdin closes")
        assert await c.end() == 0
    async with run.daemon() as c:
        await acp_start(c)
        c.step("the next daemon lists and loads it")
        await c.call("session/list", {"cwd": cwd})
        await c.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        await c.notification("the commands", update("available_commands_update"))
        c.step("and goes on")
        await c.call("session/prompt", {"sessionId": sid, "prompt": prompt("Sure?")})
        c.step("stdin closes")
        assert await c.end() == 0


SCENARIOS: dict[str, dict[str, Callable[[Run], Awaitable[None]]]] = {
    "lsp": {"turns": lsp_turns, "uninitialized": lsp_uninitialized, "editor": lsp_editor, "load": lsp_load},
    "acp": {"turns": acp_turns, "uninitialized": acp_uninitialized, "editor": acp_editor, "load": acp_load},
}


# ---- the tests ----------------------------------------------------------------------------------


@pytest.fixture(params=LAUNCHES, ids=lambda launch: launch.name)
def launch(request: pytest.FixtureRequest, warm_runtime_dir: Path) -> Launch:
    if request.param.warm:
        ensure_server(warm_runtime_dir)
    return request.param  # type: ignore[no-any-return]


async def record(face: str, scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    place = Place(tmp_path / f"launch-{launch.name}", workspace)
    place.write_config(llm)
    run = Run(FACES[face], launch, place, llm)
    await SCENARIOS[face][scenario](run)
    assert place.key not in repr(run.log), "the API key reached a frame"
    assert not [text for text in run.stderr if place.key in text], "the API key reached the log"
    assert llm.violations == []
    assert all(r["headers"].get("authorization") == f"Bearer {place.key}" for r in llm.requests), \
        "every model request carries this launch's key"
    compare(face, scenario, normalise(run.log, place), tmp_path)


@pytest.mark.parametrize("scenario", list(SCENARIOS["lsp"]))
async def test_lsp_transcript(scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    await record("lsp", scenario, launch, tmp_path, workspace, llm)


@pytest.mark.parametrize("scenario", list(SCENARIOS["acp"]))
async def test_acp_transcript(scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    await record("acp", scenario, launch, tmp_path, workspace, llm)
