"""App turns in-process: streaming, cancel, a busy session, model switching, provider errors, and a
session that survives a new App on the same store. The subprocess tiers (test_turns_e2e.py) keep
the wire path of each."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from inproc_app import InProc, SharedScript, eventually

from toycoder_daemon.app import application
from toycoder_daemon.core.errors import ProviderError, SessionBusy
from toycoder_daemon.core.ports import ToolCallFinished


async def test_streamed_text_equals_final_text(inproc) -> None:
    p: InProc = inproc()
    p.script.add({"text": "Hello there, friend.", "chunk_size": 3})
    sid = p.new_session()
    out = await p.prompt(sid, "hi")
    assert out.result.stop_reason == "end_turn" and out.turn_id == f"{sid}-1"
    assert p.frontend.streamed_text(sid) == out.result.text == "Hello there, friend."
    assert p.app.session(sid).title == "hi"


async def test_cancel_mid_stream_keeps_the_session_usable(inproc) -> None:
    p: InProc = inproc()
    p.script.add({"text": ["Once upon", " a time"], "chunk_delay": 3600})
    sid = p.new_session()
    turn = p.start_prompt(sid, "tell a story")
    await eventually(lambda: bool(p.frontend.of(sid, "text_delta")), "the first delta")
    with pytest.raises(SessionBusy):
        await p.prompt(sid, "and another")
    assert p.app.cancel(sid) and not p.app.cancel(p.new_session())
    out = await asyncio.wait_for(turn, 10)
    assert out.result.stop_reason == "cancelled"
    p.script.add({"text": "ok"})
    assert (await p.prompt(sid, "again")).result.text == "ok"
    sent = [(m["role"], m["content"]) for m in p.script.calls[-1]["messages"][1:]]
    assert sent == [("user", "tell a story"), ("assistant", "Once upon\n[interrupted by the user]"), ("user", "again")]


async def test_cancel_during_a_tool_batch_answers_every_call(inproc) -> None:
    p: InProc = inproc({"tools": {"enabled": ["run_command"]}})
    p.frontend.default_decision = "allow_once"
    p.script.add({"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 30"}},
                                 {"name": "read_file", "arguments": {"path": "README.md"}}]})
    sid = p.new_session()
    turn = p.start_prompt(sid, "go")
    await eventually(lambda: bool(p.frontend.requests), "the run_command permission question")
    await eventually(lambda: bool(p.frontend.of(sid, "tool_call")), "the call to start")
    p.app.cancel(sid)
    assert (await asyncio.wait_for(turn, 10)).result.stop_reason == "cancelled"
    statuses = [e.status for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]
    assert statuses == ["cancelled"]
    tools = [m for m in p.app.session(sid).messages if m["role"] == "tool"]
    assert [m["content"].split(":")[0] for m in tools] == ["cancelled", "cancelled"]


async def test_model_switching_reaches_the_model(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    info = p.app.set_model(sid, None, "fast")
    assert (info.provider, info.model) == ("openai", "fake-fast")
    p.script.add({"text": "quick"})
    await p.prompt(sid, "hi")
    assert p.script.calls[-1]["model"] == "fake-fast"
    p.app.set_model(sid, "openai", "big-one")
    p.script.add({"text": "slow"})
    await p.prompt(sid, "hi again")
    assert p.script.calls[-1]["model"] == "big-one"
    assert p.app.models_info(sid).model == "big-one"


async def test_provider_error_leaves_a_valid_conversation(inproc) -> None:
    p: InProc = inproc()
    p.script.add({"tool_calls": [{"name": "list_directory"}]}, {"status": 500, "error": "upstream down"})
    sid = p.new_session()
    with pytest.raises(ProviderError, match="upstream down"):
        await p.prompt(sid, "go")
    p.script.add({"text": "back"})
    assert (await p.prompt(sid, "retry")).result.text == "back"
    assert p.script.violations == []


async def test_no_api_key_is_a_provider_error_before_the_turn(tmp_path: Path, workspace: Path) -> None:
    from toycoder_daemon.app.application import App
    from toycoder_daemon.config.model import Config
    from toycoder_daemon.sessions.store import SessionStore

    app = App(workspace, Config.model_validate({"providers": {"openai": {"api_keys": []}}}),
              store=SessionStore(tmp_path / "d", workspace))
    sid = app.new_session().id
    with pytest.raises(ProviderError, match="no API key"):
        await app.prompt(sid, "hi", lambda s, t: None)  # type: ignore[arg-type,return-value]
    assert app.session(sid).turn_seq == 0
    await app.shutdown()


async def test_a_session_survives_a_new_app_on_the_same_store(tmp_path: Path, workspace: Path) -> None:
    script = SharedScript()
    first = InProc(workspace, tmp_path / "data", {"tools": {"enabled": ["run_command"]}}, script)
    sid = first.new_session()
    script.add({"text": "one", "usage": {"prompt_tokens": 7, "completion_tokens": 1}})
    await first.prompt(sid, "remember this")
    await first.command(sid, "/tool disable read_file")
    await first.close()  # releases the lock

    second = InProc(workspace, tmp_path / "data", None, script)
    try:
        s = await second.app.load(sid)
        assert [m["content"] for m in s.messages][1:] == ["remember this", "one"]
        assert s.usage.total_tokens == 8 and not s.tools.is_enabled("read_file")
        script.add({"text": "two"})
        await second.prompt(sid, "and now?")
        assert [m["content"] for m in script.calls[-1]["messages"][1:]] == ["remember this", "one", "and now?"]
        rows = [json.loads(line) for line in s.file.path.read_text().splitlines()]  # type: ignore[union-attr]
        assert [r["m"]["content"] for r in rows if r["t"] == "msg"] == ["remember this", "one", "and now?", "two"]
    finally:
        await second.close()


async def test_tool_settings_come_from_the_config(inproc, workspace: Path) -> None:
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 6)))
    p: InProc = inproc({"tools": {"read_default_lines": 2}})
    p.script.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "long.txt"}}]}, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "read")
    out = [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)][0].output
    assert out.startswith("long.txt: lines 1-2 of 5") and "line 3" not in out


async def test_a_broken_config_still_opens_and_reports(tmp_path: Path, workspace: Path) -> None:
    from toycoder_daemon.app.application import App
    from toycoder_daemon.core.errors import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {max_steps: 0}\n")
    app = App.open(workspace, str(bad))
    try:
        assert app.config_error is not None and "max_steps" in str(app.config_error)
        sid = app.new_session().id  # sessions still work: the face can show the error
        with pytest.raises(ConfigError, match="max_steps"):
            await app.prompt(sid, "hi", lambda s, t: None)  # type: ignore[arg-type,return-value]
        helped = await app.prompt(sid, "/help", lambda s, t: None)  # type: ignore[arg-type,return-value]
        assert helped.result.stop_reason == "command" and "Commands:" in helped.result.text
    finally:
        await app.shutdown()


async def test_concurrent_loads_share_one_open(tmp_path: Path, workspace: Path) -> None:
    script = SharedScript()
    a = InProc(workspace, tmp_path / "data", None, script)
    sid = a.new_session("twice")
    await a.close()
    b = InProc(workspace, tmp_path / "data", None, script)
    try:
        first, second = await asyncio.gather(b.app.load(sid), b.app.load(sid))
        assert first is second and first.title == "twice"
    finally:
        await b.close()


async def test_the_streaming_client_loads_when_a_session_opens_not_at_start(inproc, monkeypatch) -> None:
    """App.start leaves the model client's imports (a thread holding the GIL for ~0.1 s) for later:
    they delayed the requests right after initialize. A session opening (a prompt may come next)
    starts them at once, else `preload_after` does."""
    loaded: list[list[str | None]] = []
    monkeypatch.setattr(application, "_preload_llm", loaded.append)
    p: InProc = inproc()
    p.app.preload_after = 3600
    await p.app.start()
    await p.app.files.files()  # the loop has run on a while (a whole listing, its threads)
    assert p.app.preloading is not None and not p.app.preload_began and loaded == []
    p.new_session()
    await eventually(lambda: bool(loaded), "the preload, once a session opened")


async def test_a_failing_preload_is_logged_once(inproc, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(urls: list[str | None]) -> None:
        raise OSError("no CA store here")

    monkeypatch.setattr(application, "_preload_llm", broken)
    p: InProc = inproc()
    p.app.preload_after = 0
    with caplog.at_level(logging.WARNING, logger="toycoder_daemon"):
        await p.app.start()
        first = p.app.preloading
        assert first is not None
        await asyncio.wait([first])
        await p.app.start()  # the LSP face's `initialized` twice, say: no second preload
        assert p.app.preloading is first
        p.new_session()
        p.new_session()
        assert await p.app.complete_mentions(None, "x", 5) is not None
    said = [r for r in caplog.records if "no CA store here" in r.getMessage()]
    assert len(said) == 1 and not first.exception()
