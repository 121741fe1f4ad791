"""Golden transcripts of both faces: every frame, both directions, through the real daemon subprocess
(`python -m toycoder_daemon`, `--acp`) against the scripted model server, compared exactly after
normalisation with tests/golden/transcripts/<face>/<scenario>.json (tests/transcripts.py says what is
normalised). What a client sees is the contract, whatever implements a face and however the daemon was
started. After a deliberate change: UPDATE_GOLDEN=1, and say why in the commit.

One test per face, over the launches (`LAUNCHES`: each with its own HOME, config, key and cwd) and the
scenarios:
- `turns`: initialize, a session, a prompt with a tool call, an edit the client allows and one it
  rejects, a cancel of a running turn and a prompt after it, errors (an unknown session, bad params, an
  unknown method, a body that is not JSON), then the end (LSP: shutdown and exit; ACP: stdin closes)
  and the exit status.
- `uninitialized`: a request before `initialize`, then `initialize`. (Apart because `turns` starts as
  clients do, with `initialize` first.)

Order: each script is sequential. It sends a frame only when the frames it waits for are in, and it
waits for everything the daemon sends for a step, so each daemon frame has one place among the
client's. The daemon frames that follow one another without the client in between come in an order the
daemon fixes: ACP's `available_commands_update` is queued after the `session/new` answer; the LSP
`toycoder/cancel` is answered on the spot, the cancelled turn on a later loop step. Every model reply
streams its text as one delta (deltas sharing a network read are coalesced, so several would make the
count depend on timing), and scripts its token counts (the default counts characters, and the system
prompt holds the workspace path). The cancelled reply sends one delta and then stalls, so the turn is
cancelled after exactly that delta.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from transcripts import FACES, Client, Frame, Launch, Place, compare, normalise, running

from toycoder_daemon.testing.fake_llm import FakeLLM

LAUNCHES = [Launch("cold", {"TOYCODER_WARM": "0"})]


def reply(text: str | list[str], *, tool_calls: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    """A model reply whose text streams as one delta per item, with scripted token counts."""
    out: dict[str, Any] = {"text": [text] if isinstance(text, str) else text,
                           "usage": {"prompt_tokens": 100, "completion_tokens": 10}, **more}
    if tool_calls:
        out["tool_calls"] = tool_calls
    return out


def edit(old: str, new: str) -> list[dict[str, Any]]:
    return [{"name": "edit_file", "arguments": {"path": "README.md", "old_string": old, "new_string": new}}]


TURNS = [  # the model's side of `turns`, both faces
    reply("Let me read it.", tool_calls=[{"name": "read_file", "arguments": {"path": "src/app.py"}}]),
    reply("It defines add()."),
    reply("", tool_calls=edit("A tiny project.", "A small project.")), reply("Edited."),  # allowed
    reply("", tool_calls=edit("# Demo", "# Notes")), reply("Left it."),  # rejected
    reply(["Thinking", " it over"], chunk_delay=60),  # one delta, then a stall the cancel cuts
    reply("Still here."),
]
EDITED = "# Demo\nA small project.\n"


# ---- the LSP face -------------------------------------------------------------------------------


def initialize_params(workspace: Path) -> dict[str, Any]:
    return {"processId": None, "rootUri": workspace.resolve().as_uri(),
            "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}}}


async def lsp_turns(c: Client, workspace: Path, llm: FakeLLM) -> None:
    llm.add(*TURNS)
    c.step("initialize")
    await c.call("initialize", initialize_params(workspace))
    c.notify("initialized", {})

    c.step("a session")
    sid = (await c.call("toycoder/session/new", {}))["result"]["sessionId"]

    c.step("a prompt with a tool call")
    await c.call("toycoder/prompt", {"sessionId": sid, "text": "What does app.py do?"})

    for decision in ("allow_once", "reject"):
        c.step(f"an edit the client answers {decision}")
        turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Edit the readme."})
        c.answer(await c.daemon_request("toycoder/requestPermission"), {"decision": decision})
        await c.reply(turn)

    c.step("a cancel of a running turn")
    turn = c.request("toycoder/prompt", {"sessionId": sid, "text": "Think it over."})
    await c.notification("the first text", lambda f: f["params"]["update"]["kind"] == "text_delta")
    await c.call("toycoder/cancel", {"sessionId": sid})
    await c.reply(turn)

    c.step("the session goes on")
    await c.call("toycoder/prompt", {"sessionId": sid, "text": "Again."})

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
    assert (workspace / "README.md").read_text() == EDITED
    assert len(llm.requests) == len(TURNS)


async def lsp_uninitialized(c: Client, workspace: Path, llm: FakeLLM) -> None:
    c.step("a request before initialize")
    await c.call("toycoder/session/new", {})

    c.step("initialize")
    await c.call("initialize", initialize_params(workspace))
    c.notify("initialized", {})
    await c.call("toycoder/session/list", {})

    c.step("stdin closes")
    assert await c.end() == 0


# ---- the ACP face -------------------------------------------------------------------------------


def update(kind: str) -> Callable[[Frame], bool]:
    return lambda f: f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind


def text(s: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": s}]


ACP_INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                                               "terminal": False}}


async def acp_turns(c: Client, workspace: Path, llm: FakeLLM) -> None:
    llm.add(*TURNS)
    c.step("initialize")
    await c.call("initialize", ACP_INITIALIZE)

    c.step("a session")
    sid = (await c.call("session/new", {"cwd": str(workspace.resolve()), "mcpServers": []}))["result"]["sessionId"]
    await c.notification("the commands", update("available_commands_update"))

    c.step("a prompt with a tool call")
    await c.call("session/prompt", {"sessionId": sid, "prompt": text("What does app.py do?")})

    for option in ("allow_once", "reject_once"):
        c.step(f"an edit the client answers {option}")
        turn = c.request("session/prompt", {"sessionId": sid, "prompt": text("Edit the readme.")})
        c.answer(await c.daemon_request("session/request_permission"),
                 {"outcome": {"outcome": "selected", "optionId": option}})
        await c.reply(turn)

    c.step("a cancel of a running turn")
    turn = c.request("session/prompt", {"sessionId": sid, "prompt": text("Think it over.")})
    await c.notification("the first text", update("agent_message_chunk"))
    c.notify("session/cancel", {"sessionId": sid})
    await c.reply(turn)

    c.step("the session goes on")
    await c.call("session/prompt", {"sessionId": sid, "prompt": text("Again.")})

    c.step("errors")
    await c.call("session/prompt", {"sessionId": "no-such-session", "prompt": text("hi")})
    await c.call("session/new", {"cwd": "relative/dir", "mcpServers": []})
    await c.call("session/nope", {})
    c.send_unparsable("{not json")
    await c.expect("the parse error", lambda f: f.get("error", {}).get("code") == -32700)

    c.step("stdin closes")
    assert await c.end() == 0
    assert (workspace / "README.md").read_text() == EDITED
    assert len(llm.requests) == len(TURNS)


async def acp_uninitialized(c: Client, workspace: Path, llm: FakeLLM) -> None:
    c.step("a request before initialize")
    await c.call("session/new", {"cwd": str(workspace.resolve()), "mcpServers": []})
    await c.notification("the commands", update("available_commands_update"))

    c.step("initialize")
    await c.call("initialize", ACP_INITIALIZE)
    await c.call("session/list", {})

    c.step("stdin closes")
    assert await c.end() == 0


Scenario = Callable[[Client, Path, FakeLLM], Awaitable[None]]
SCENARIOS: dict[str, dict[str, Scenario]] = {
    "lsp": {"turns": lsp_turns, "uninitialized": lsp_uninitialized},
    "acp": {"turns": acp_turns, "uninitialized": acp_uninitialized},
}


# ---- the tests ----------------------------------------------------------------------------------


@pytest.fixture(params=LAUNCHES, ids=lambda launch: launch.name)
def launch(request: pytest.FixtureRequest) -> Launch:
    return request.param  # type: ignore[no-any-return]


async def record(face: str, scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    place = Place(tmp_path / f"launch-{launch.name}", workspace)
    place.write_config(llm)
    async with running(FACES[face], launch, place) as client:
        await SCENARIOS[face][scenario](client, workspace, llm)
    seen = repr(client.log)
    assert place.key not in seen, "the API key reached a frame"
    assert llm.violations == []
    assert all(r["headers"].get("authorization") == f"Bearer {place.key}" for r in llm.requests), \
        "every model request carries this launch's key"
    compare(face, scenario, normalise(client.log, place), tmp_path)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS["lsp"]))
async def test_lsp_transcript(scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    await record("lsp", scenario, launch, tmp_path, workspace, llm)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS["acp"]))
async def test_acp_transcript(scenario: str, launch: Launch, tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    await record("acp", scenario, launch, tmp_path, workspace, llm)
