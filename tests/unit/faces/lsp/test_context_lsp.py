"""A prompt's context (issue 29) over the LSP wire, in-process: file, range, selection, diagnostics and
image items, mentions in the text, the refusals (-32602 naming the item), the chips session/load
returns and the images stored once in the data dir. The thin subprocess counterpart is
e2e/test_context_e2e.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from helpers import new_session
from rpc import Daemon, RpcError

from toycoder_daemon.testing.fake_llm import FakeLLM

PNG = base64.b64encode(base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")).decode()


def _last_user(llm: FakeLLM) -> dict:
    return [m for m in llm.requests[-1]["body"]["messages"] if m["role"] == "user"][-1]


async def test_file_item_with_range_reaches_the_model_and_the_transcript(daemon: Daemon, llm: FakeLLM,
                                                                         workspace: Path) -> None:
    (workspace / "calc.py").write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    rng = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 5}}
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "explain", "context": [
        {"type": "file", "uri": (workspace / "calc.py").as_uri(), "range": rng}]})
    content = _last_user(llm)["content"]
    assert content.startswith("explain\n\nAttached file calc.py: lines 2-3 of 4")
    assert "     2\tb = 2" in content and "     3\tc = 3" in content
    assert "a = 1" not in content and "d = 4" not in content  # only the range
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    user = [e for e in loaded["transcript"] if e["role"] == "user"][0]
    assert user["text"] == "explain"  # as typed; the chip says what was attached
    assert user["context"] == [{"type": "file", "label": "calc.py:2-3", "uri": (workspace / "calc.py").as_uri()}]


async def test_open_buffer_is_what_a_file_item_reads(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    path = workspace / "calc.py"
    path.write_text("x = 1\n")
    daemon.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                            "version": 1, "text": "x = 'unsaved'\n"}})
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "look",
                                          "context": [{"type": "file", "uri": path.as_uri()}]})
    assert "x = 'unsaved'" in _last_user(llm)["content"]


async def test_selection_and_diagnostics_items(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    uri = (workspace / "src" / "app.py").as_uri()
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    diag = {"range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 9}}, "severity": 1,
            "message": "undefined name 'y'", "source": "pyflakes"}
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "fix", "context": [
        {"type": "selection", "uri": uri, "text": "return a + b",
         "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 16}}},
        {"type": "diagnostics", "uri": uri, "items": [diag]}]})
    content = _last_user(llm)["content"]
    assert "Selected in src/app.py (lines 2-2):\n     2\treturn a + b" in content
    assert "Editor diagnostics for src/app.py:\nsrc/app.py:2 error: undefined name 'y' (pyflakes)" in content
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    chips = [e for e in loaded["transcript"] if e["role"] == "user"][0]["context"]
    assert [c["type"] for c in chips] == ["selection", "diagnostics"]


async def test_mentions_attach_files_and_ranges(daemon: Daemon, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("a = 1\nb = 2\nc = 3\n")
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid,
                                          "text": "compare @src/app.py with @calc.py#L2-3, mail me@example.com"})
    content = _last_user(llm)["content"]
    assert "Attached file src/app.py: lines 1-2 of 2" in content
    assert "Attached file calc.py: lines 2-3 of 3" in content
    assert "example.com" in content.splitlines()[0]  # not a file: the text stays as typed


@pytest.mark.parametrize(("item", "says"), [
    ({"type": "file", "uri": "/etc/hostname"}, "context[0]: /etc/hostname is outside the workspace"),
    ({"type": "file", "uri": "build/out.txt"}, "context[0]: build/out.txt is hidden by the ignore rules"),
    ({"type": "file", "uri": "big.txt"}, "context[0]: big.txt is over the read limit"),
    ({"type": "file", "uri": "missing.py"}, "context[0]: file not found: missing.py"),
    ({"type": "image", "mimeType": "image/png", "data": "not base64!"}, "context[0]: the image data is not valid base64"),
    ({"type": "image", "mimeType": "image/bmp", "data": PNG}, "context[0]: image type 'image/bmp' is not one of"),
    ({"type": "image", "mimeType": "image/jpeg", "data": PNG}, "context[0]: the data is not a image/jpeg image"),
    ({"type": "image", "mimeType": "image/png",
      "data": base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(5 << 20)).decode()}, "context[0]: the image is over 5 MiB"),
])
async def test_refusals_name_the_item(daemon: Daemon, llm: FakeLLM, workspace: Path, item: dict, says: str) -> None:
    (workspace / ".gitignore").write_text("build/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.txt").write_text("generated\n")
    (workspace / "big.txt").write_text("x" * 80 + "\n" * 3000)
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "look", "context": [item]})
    assert e.value.code == -32602
    assert says in e.value.message
    assert llm.requests == []  # nothing was sent
    loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
    assert loaded["transcript"] == []  # nor recorded
    llm.add({"text": "still here"})
    assert (await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "hi"}))["text"] == "still here"


async def test_mention_outside_the_workspace_is_refused(daemon: Daemon, llm: FakeLLM, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("no\n")
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": f"read @{tmp_path / 'secret.txt'}"})
    assert e.value.code == -32602 and "is outside the workspace" in e.value.message
    assert llm.requests == []
    with pytest.raises(RpcError) as e:  # relative to the workspace, not to the daemon's cwd
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "read @../secret.txt"})
    assert e.value.code == -32602 and "@../secret.txt: ../secret.txt is outside the workspace" in e.value.message


async def test_secret_values_in_an_attached_file_are_redacted(start_daemon, llm: FakeLLM, workspace: Path) -> None:
    daemon = await start_daemon(keys=["sk-test-secret-value-123456"])
    (workspace / ".env").write_text("OPENAI_API_KEY=sk-test-secret-value-123456\n")
    llm.add({"text": "ok"})
    sid = await new_session(daemon)
    await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "see @.env"})
    content = _last_user(llm)["content"]
    assert "OPENAI_API_KEY=" in content and "sk-test-secret-value-123456" not in content


async def test_image_refused_for_a_model_without_vision(daemon: Daemon, llm: FakeLLM) -> None:
    sid = await new_session(daemon)
    with pytest.raises(RpcError) as e:
        await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is this?",
                                              "context": [{"type": "image", "mimeType": "image/png", "data": PNG}]})
    assert e.value.code == -32602 and "the model fake-model does not take images" in e.value.message
    assert llm.requests == []


async def test_image_goes_as_image_url_and_is_stored_once(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    from inproc import start_lsp

    cfg = tmp_path / "vision.yaml"
    cfg.write_text(f"providers:\n  openai:\n    api_keys: [k]\n    base_url: {llm.base_url}\n"
                   "    models: {default: fake-vision, fast: fake-fast}\n    vision_models: [fake-vision]\n"
                   "agent: {auto_title: false, retry_interval: 0.05}\n")
    daemon = await start_lsp(cfg)
    try:
        await daemon.initialize(workspace)
        sid = await new_session(daemon)
        for _ in range(2):
            llm.add({"text": "a pixel"})
            await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is this?",
                                                  "context": [{"type": "image", "mimeType": "image/png", "data": PNG}]})
        parts = _last_user(llm)["content"]
        assert parts[0] == {"type": "text", "text": "what is this?"}
        assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
        data = tmp_path / "data"  # TOYCODER_DATA_DIR (conftest.isolated_env)
        stored = list(data.rglob("images/*"))
        assert len(stored) == 1 and stored[0].read_bytes() == base64.b64decode(PNG)  # once, by content
        others = [p for p in data.rglob("*") if p.is_file() and p.parent.name != "images"]
        assert others and all(PNG.encode() not in p.read_bytes() for p in others)  # never inline
        loaded = await daemon.call("toycoder/session/load", {"sessionId": sid})
        chip = [e for e in loaded["transcript"] if e["role"] == "user"][0]["context"][0]
        assert chip["type"] == "image" and chip["mimeType"] == "image/png" and chip["image"] == stored[0].name
        assert json.dumps(loaded).find(PNG) < 0
    finally:
        assert await daemon.close() == 0


def test_an_unreadable_stored_chip_is_left_out() -> None:
    from toycoder_daemon.faces.lsp.mapping import context_chips

    good = {"type": "file", "label": "calc.py", "uri": "file:///ws/calc.py"}
    assert [c.dump() for c in context_chips((good, {"type": "hologram"}, {"label": 3}))] == [good]
