"""Issue 33, ACP `configOptions`: a `model` select (category model: the provider's roles and the
models its server lists) and a `mode` select (category mode) on session/new, load and resume;
`session/set_config_option` switches them and answers the whole list; /model and /mode send
`config_option_update`. In-process, with the SDK's client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, new_session
from helpers import write_config
from waiting import wait_until_async

from toycoder_daemon.faces.acp import config_options
from toycoder_daemon.testing.fake_llm import FakeLLM


def dumped(opts: Any) -> dict[str, dict[str, Any]]:
    return {o["id"]: o for o in (x.model_dump(mode="json", by_alias=True, exclude_none=True) for x in opts)}


def values(option: dict[str, Any]) -> list[tuple[str, str]]:
    flat = [o for g in option["options"] for o in (g["options"] if "group" in g else [g])]
    return [(o["value"], o["name"]) for o in flat]


@pytest.fixture
def served_llm() -> Any:
    with FakeLLM(model="served-only") as llm:  # its /v1/models lists a model the config does not name
        yield llm


async def test_config_options_on_new_load_resume_and_set(tmp_path: Path, served_llm: FakeLLM,
                                                           workspace: Path) -> None:
    llm = served_llm
    config = write_config(tmp_path / "c.yaml", llm)
    llm.add({"text": "with the served one", "expect": {"model": "served-only"}})
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        opts = dumped(new.config_options)
        model, mode = opts["model"], opts["mode"]
        assert model["category"] == "model" and model["type"] == "select"
        assert model["currentValue"] == "openai:fake-model"
        roles = [("openai:fake-model", "fake-model (default)"), ("openai:fake-fast", "fake-fast (fast)")]
        assert values(model) == roles  # the answer never waits for the provider's list
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "config_option_update")  # it follows once the provider answered
        [served] = editor.updates("config_option_update")
        assert values({o["id"]: o for o in served["configOptions"]}["model"]) == [*roles, ("openai:served-only",
                                                                                           "served-only")]
        assert mode["category"] == "mode" and mode["currentValue"] == "ask"
        assert [v for v, _ in values(mode)] == ["ask", "accept-edits", "read-only"]
        sid = new.session_id

        answer = await conn.set_config_option(config_id="model", session_id=sid, value="openai:served-only")
        assert dumped(answer.config_options)["model"]["currentValue"] == "openai:served-only"
        answer = await conn.set_config_option(config_id="mode", session_id=sid, value="read-only")
        after = dumped(answer.config_options)
        assert after["mode"]["currentValue"] == "read-only" and after["model"]["currentValue"] == "openai:served-only"
        await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert llm.requests[-1]["body"]["model"] == "served-only" and llm.violations == []
        assert editor.updates("config_option_update") == [served]  # the client's own change: answered, not repeated

        for config_id, value in (("nope", "x"), ("model", "no-provider-colon"), ("model", "ghost:m"), ("mode", "wild")):
            with pytest.raises(RequestError) as bad:
                await conn.set_config_option(config_id=config_id, session_id=sid, value=value)
            assert bad.value.code == -32602, (config_id, value)
        with pytest.raises(RequestError) as unknown:
            await conn.set_config_option(config_id="mode", session_id="no-such", value="ask")
        assert unknown.value.code == -32002

    async with acp_face(tmp_path, llm, config=config) as (conn, _, _):
        loaded = await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        opts = dumped(loaded.config_options)
        assert ("openai:served-only", "served-only") in values(opts["model"])  # the chosen model is listed
        assert opts["model"]["currentValue"] == "openai:served-only" and opts["mode"]["currentValue"] == "read-only"
    async with acp_face(tmp_path, llm, config=config, caps=None) as (conn, _, _):
        resumed = await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        assert dumped(resumed.config_options)["mode"]["currentValue"] == "read-only"


async def test_slash_model_and_mode_send_config_option_update(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("/model fast")])
        await editor.wait_for(lambda f: f.get("params", {}).get("update", {}).get("sessionUpdate")
                              == "config_option_update")
        [update] = editor.updates("config_option_update")
        assert {o["id"]: o["currentValue"] for o in update["configOptions"]} == {"model": "openai:fake-fast", "mode": "ask"}
        await conn.prompt(session_id=sid, prompt=[text_block("/mode accept-edits")])
        await editor.wait_for(lambda f: len(editor.updates("config_option_update")) == 2)
        last = editor.updates("config_option_update")[-1]
        assert {o["id"]: o["currentValue"] for o in last["configOptions"]}["mode"] == "accept-edits"
        assert editor.updates("current_mode_update")[-1]["currentModeId"] == "accept-edits"  # as before, too
        await conn.prompt(session_id=sid, prompt=[text_block("/model")])  # showing changes nothing
        await conn.prompt(session_id=sid, prompt=[text_block("/usage")])
        assert len(editor.updates("config_option_update")) == 2


class HeldList:
    """The provider's list of models as the ACP face asks for it, with the first request after
    `hold()` held until `release()`: a slow /v1/models."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.real = config_options.with_served
        self.gate: asyncio.Event | None = None
        self.held: asyncio.Event | None = None
        self.finished = 0
        monkeypatch.setattr(config_options, "with_served", self)
        monkeypatch.setattr(config_options, "SERVED_WAIT", 60)  # held, not timed out

    def hold(self) -> None:
        self.gate = asyncio.Event()

    def release(self) -> None:
        assert self.held is not None
        self.held.set()

    async def __call__(self, app: Any, info: Any, s: Any, **kwargs: Any) -> Any:
        if not kwargs.get("ask_server", True):
            return await self.real(app, info, s, **kwargs)
        try:
            if self.gate is not None:
                self.held, self.gate = self.gate, None
                await self.held.wait()
            return await self.real(app, info, s, **kwargs)
        finally:
            self.finished += 1


async def test_a_slow_list_of_models_neither_repeats_nor_hides_a_change(tmp_path: Path, served_llm: FakeLLM,
                                                                         workspace: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The list asked for after set_config_option's answer comes back after a second change: what
    the client was told stays what it was told. (Built before the request, the old options were
    remembered as told when it came back: the next change, back to them, was never told, and any
    other change was told twice.)"""
    listing = HeldList(monkeypatch)
    config = write_config(tmp_path / "c.yaml", served_llm)
    async with acp_face(tmp_path, served_llm, config=config) as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
        await wait_until_async(lambda: len(editor.updates("config_option_update")) == 1, what="the served list")
        asked = listing.finished
        listing.hold()
        await conn.set_config_option(config_id="mode", session_id=sid, value="read-only")  # its list: held
        answer = await conn.set_config_option(config_id="mode", session_id=sid, value="accept-edits")
        assert dumped(answer.config_options)["mode"]["currentValue"] == "accept-edits"
        # the lists asked for after each answer and after each change's own update (4), but the held one
        await wait_until_async(lambda: listing.finished == asked + 3, what="the other lists")
        listing.release()
        await wait_until_async(lambda: listing.finished == asked + 4, what="the held list")
        assert len(editor.updates("config_option_update")) == 1  # the answers told the changes

        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        await editor.wait_for(lambda f: len(editor.updates("config_option_update")) == 2)
        told = {o["id"]: o["currentValue"] for o in editor.updates("config_option_update")[-1]["configOptions"]}
        assert told == {"model": "openai:fake-model", "mode": "read-only"}
