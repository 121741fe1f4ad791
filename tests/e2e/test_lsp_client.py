"""The daemon under a standard pygls LSP client (pytest-lsp): lifecycle, $/progress, updates, permission."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest_lsp
from helpers import write_config
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from toycoder_daemon.core.modes import available_modes
from toycoder_daemon.testing.fake_llm import FakeLLM


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "toycoder_daemon", "--stdio"]))
async def client(lsp_client: LanguageClient, llm: FakeLLM, workspace: Path, tmp_path: Path):
    cfg = write_config(tmp_path / "lsp-config.yaml", llm)
    lsp_client.toycoder_updates = []  # type: ignore[attr-defined]
    lsp_client.permission_requests = []  # type: ignore[attr-defined]

    @lsp_client.feature("toycoder/update")
    def on_update(params):
        lsp_client.toycoder_updates.append(params)  # type: ignore[attr-defined]

    @lsp_client.feature("toycoder/requestPermission")
    def on_permission(params):
        lsp_client.permission_requests.append(params)  # type: ignore[attr-defined]
        return {"decision": "allow_once"}

    capabilities = types.ClientCapabilities(
        window=types.WindowClientCapabilities(work_done_progress=True),
        experimental={"toycoder": {"permissionRequest": True, "askUser": True}},
    )
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=workspace.as_uri(), initialization_options={"configPath": str(cfg)},
    ))
    lsp_client.init_result = result  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_lifecycle_progress_and_streaming(client: LanguageClient, llm: FakeLLM, workspace: Path) -> None:
    assert client.init_result.server_info.name == "toycoder-daemon"  # type: ignore[attr-defined]
    toycoder = client.init_result.capabilities.experimental["toycoder"]  # type: ignore[attr-defined]
    assert toycoder == {"protocolVersion": 1, "availableModes": available_modes()}
    llm.add(
        {"delay": 0.3, "text": "Writing it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "x\n"}}]},
        {"text": "Done, wrote out.txt."},
    )
    session = await client.protocol.send_request_async("toycoder/session/new", {"title": "lsp"})
    result = await client.protocol.send_request_async(
        "toycoder/prompt", {"sessionId": session.sessionId, "text": "write out.txt"}
    )
    assert result.stopReason == "end_turn" and result.text == "Done, wrote out.txt."
    assert (workspace / "out.txt").read_text() == "x\n"
    permission = client.permission_requests[0]  # type: ignore[attr-defined]
    assert permission.tool == "write_file" and permission.preview.kind == "diff"
    kinds = [u.update.kind for u in client.toycoder_updates]  # type: ignore[attr-defined]
    assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1 and "text_delta" in kinds
    # $/progress (the delay above lets the token be created first): begin ... report ... end
    reports = next(iter(client.progress_reports.values()))
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert any(isinstance(r, types.WorkDoneProgressReport) and "write_file" in (r.message or "") for r in reports)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
