"""What the person reads is what runs, and shows no secret (issue 28), through the LSP face in this
process: permission requests and tool-call titles show control characters and bidi overrides as
escapes; URLs never show their userinfo; a piece of a key in a provider's error is redacted from the
answer and the log. The file-name listings: tools/files/test_fs_hostile.py; the terminal client:
cli/test_terminal_render.py."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import new_session, write_call
from rpc import RpcError

from toycoder_daemon.core.util import logs, secrets
from toycoder_daemon.faces.main import _check_config
from toycoder_daemon.testing.fake_llm import FakeLLM

RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""What must never reach a client raw (tab, newline and CRLF's CR are allowed in multi-line text)."""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_permission_request_and_tool_call_title_show_controls_as_escapes(start_daemon, llm: FakeLLM,
                                                                               workspace: Path) -> None:
    d = await start_daemon()
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/requestPermission"] = lambda p: asked.append(p) or {"decision": "reject_once"}
    name = "ok\x1b[2K\rpytest -q\u202e.txt"
    llm.add(write_call(name, "print('hi')\n\x1b[1A\x1b[2K# just a comment\n\u2066evil\u2069\n"),
            {"tool_calls": [{"name": "no\x1b]0;x\x07such", "arguments": {}}]}, {"text": "done"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "write"})
    assert len(asked) == 1
    p = asked[0]
    shown = _strings({k: v for k, v in p.items() if k in ("title", "arguments", "preview")})
    assert [s for s in shown if RAW.search(s.replace("\r\n", "\n"))] == []
    assert "\\x1b[2K\\x0dpytest -q\\u202e.txt" in p["title"]
    assert "+\\x1b[1A\\x1b[2K# just a comment" in p["preview"]["diff"] and "\n" in p["preview"]["diff"]
    titles = [u["update"] for u in d.updates(sid) if u["update"]["kind"] == "tool_call"]
    assert [t["title"] for t in titles] == ["write_file ok\\x1b[2K\\x0dpytest -q\\u202e.txt", "no\\x1b]0;x\\x07such"]
    assert not list(workspace.iterdir()) or not any(RAW.search(f.name) for f in workspace.iterdir())


async def test_models_list_and_check_config_never_show_url_userinfo(tmp_path: Path, llm: FakeLLM,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    host = llm.base_url.split("://", 1)[1]
    extra = (f"  other:\n    api_keys: [k2]\n    base_url: http://bob:S3cretUserinfo99@{host}\n"
             "    models: {default: fake-model, fast: fake-fast}\n")
    cfg = tmp_path / "userinfo.yaml"
    cfg.write_text("providers:\n  openai:\n    api_keys: [k1]\n"
                   f"    base_url: http://alice:S3cretUserinfo77@{host}/v1\n"
                   "    models: {default: fake-model, fast: fake-fast}\n" + extra + "default_provider: openai\n")
    assert _check_config(str(cfg)) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["baseUrl"] for p in out["providers"]] == [f"http://{host}/v1", f"http://{host}"]
    from inproc import start_lsp

    d2 = await start_lsp(cfg)
    try:
        await d2.initialize(tmp_path)
        shown = json.dumps(await d2.call("toycoder/models/list", {}))
        assert "S3cretUserinfo" not in shown and "alice" not in shown and f"http://{host}/v1" in shown
    finally:
        assert await d2.close() == 0


async def test_a_masked_key_in_a_provider_error_is_redacted_in_the_answer_and_the_log(
        tmp_path: Path, start_daemon, llm: FakeLLM) -> None:
    key = "sk-proj-abcdefgh0123456789ABCDEFGHwxyz"
    masked = f"{key[:14]}***{key[-4:]}"
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    log_file = tmp_path / "daemon.log"
    logs.setup("DEBUG", str(log_file))
    try:
        d = await start_daemon(keys=[key])
        llm.add({"status": 400, "error": f"Incorrect API key provided: {masked}. Find yours at ..."})
        sid = await new_session(d)
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32012 and "Incorrect API key provided" in e.value.message
        assert key[:12] not in e.value.message
        logging.getLogger("toycoder_daemon.test").warning("provider said: %s", masked)
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:] = handlers
        root.setLevel(level)
    text = log_file.read_text()
    assert "provider said: ***" in text and key[:12] not in text


def test_any_piece_of_twelve_characters_of_a_key_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-ZYXWVUTSRQ0123456789abcdefghij"
    monkeypatch.setattr(secrets, "_values", {key})
    for start in range(len(key) - 12):
        for size in (12, 13, 20):
            piece = key[start:start + size]
            if len(piece) == size:
                assert secrets.redact(f"<{piece}>") == "<***>", (start, size)
    assert secrets.redact(f"<{key[3:14]}>") == f"<{key[3:14]}>"  # 11 characters: too short to tell
    assert secrets.redact(f"{key[:14]}***{key[-4:]} and {key}") == f"******{key[-4:]} and ***"


def test_an_environment_value_that_contains_a_key_is_kept_from_children(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-proj-EnvKey0123456789abcdef"
    monkeypatch.setattr(secrets, "_values", {key})
    env = secrets.child_env({"CURL_HDR": f"Authorization: Bearer {key}", "EXACT": key, "PATH": "/usr/bin"})
    assert env == {"PATH": "/usr/bin"}


def test_shown_url_drops_the_userinfo() -> None:
    assert secrets.shown_url("https://u:p@host:8443/v1?x=1") == "https://host:8443/v1?x=1"
    assert secrets.shown_url("https://host/v1") == "https://host/v1"
    assert secrets.url_secrets("https://u:p4ss@host/v1") == ["u:p4ss", "p4ss"]


async def test_ask_user_shows_its_question_and_options_with_escapes(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon(caps={"askUser": True})
    asked: list[dict[str, Any]] = []
    d.handlers["toycoder/askUser"] = lambda p: asked.append(p) or {"answer": p["options"][0]}
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": {
        "question": "Run tests?\n\x1b[2Jyes", "options": ["yes\u202e", "no\x07"]}}]}, {"text": "ok"})
    sid = await new_session(d)
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "ask"})
    assert asked and asked[0]["question"] == "Run tests?\n\\x1b[2Jyes" and asked[0]["options"] == ["yes\\u202e", "no\\x07"]
