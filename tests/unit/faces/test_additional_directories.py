"""Issue 33, additionalDirectories on both faces: extra roots the file tools, search and the sandbox
treat like the workspace, under the same permission rules, kept with the session (a load in a new
daemon still has them) and listed in SessionInfo. ACP `session/new {additionalDirectories}` and the
LSP face's `toycoder/session/new {additionalDirectories}`, in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp_client import acp_face

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.shell.sandbox import probe


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def outputs(editor: Any) -> list[str]:
    return [u["rawOutput"]["output"] for u in editor.updates("tool_call_update") if u.get("rawOutput")]


@pytest.fixture
def extra(tmp_path: Path) -> Path:
    d = (tmp_path / "shared-lib").resolve()
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "util.py").write_text("def helper():\n    return 'EXTRA-MARK'\n")
    return d


async def test_acp_tools_search_and_sandbox_treat_them_like_the_workspace(tmp_path: Path, llm: FakeLLM,
                                                                          workspace: Path, extra: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("not yours\n")
    llm.add(call("read_file", path=str(extra / "pkg" / "util.py")),
            call("grep_search", pattern="EXTRA-MARK", path=str(extra)),
            call("glob_search", pattern="*.py", path=str(extra)),
            call("list_directory", path=str(extra / "pkg")),
            call("edit_file", path=str(extra / "pkg" / "util.py"), old_string="EXTRA-MARK", new_string="EDITED"),
            call("read_file", path=str(elsewhere / "secret.txt")),
            call("run_command", command=f"echo made > {extra}/from_cmd.txt; echo out > {elsewhere}/from_cmd.txt"),
            {"text": "done"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        with pytest.raises(RequestError) as bad:
            await conn.new_session(cwd=str(workspace), mcp_servers=[], additional_directories=["relative/dir"])
        assert bad.value.code == -32602 and "additionalDirectories" in str(bad.value.data)
        sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[],
                                      additional_directories=[str(extra)])).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("/tool enable run_command")])
        await conn.prompt(session_id=sid, prompt=[text_block("use the library")])
        out = outputs(editor)
        assert "EXTRA-MARK" in out[0]
        assert f"{extra}/pkg/util.py:2:" in out[1]  # an additional directory's results are absolute
        assert f"{extra}/pkg/util.py" in out[2]
        assert "util.py" in out[3]
        assert "edited" in out[4] and "EDITED" in (extra / "pkg" / "util.py").read_text()
        assert "refused" in out[5] and "outside the workspace" in out[5] and str(extra) in out[5]
        assert (extra / "from_cmd.txt").exists(), out[6:]
        assert (extra / "from_cmd.txt").read_text() == "made\n"  # writable for the sandbox too
        if probe.support().landlock:  # where the sandbox confines writes: outside both roots is refused
            assert not (elsewhere / "from_cmd.txt").exists()
        # the same permission rules: the edit and the command were asked about, as in the workspace
        asked = [a["toolCall"]["kind"] for a in editor.requests("session/request_permission")]
        assert asked == ["edit", "execute"]
        [listed] = (await conn.list_sessions(cwd=str(workspace))).sessions
        assert listed.additional_directories == [str(extra)]
    async with acp_face(tmp_path, llm) as (conn, editor, _):  # kept with the session
        llm.add(call("read_file", path=str(extra / "pkg" / "util.py")), {"text": "again"})
        await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        await conn.prompt(session_id=sid, prompt=[text_block("read it again")])
        assert "EDITED" in outputs(editor)[-1]


async def test_lsp_session_new_takes_them(start_daemon, llm: FakeLLM, extra: Path) -> None:
    llm.add(call("read_file", path=str(extra / "pkg" / "util.py")),
            {"text": "ok", "expect": {"last_tool_contains": "EXTRA-MARK"}})
    d = await start_daemon()
    info = await d.call("toycoder/session/new", {"additionalDirectories": [str(extra)]})
    assert info["additionalDirectories"] == [str(extra)]
    await d.call("toycoder/prompt", {"sessionId": info["sessionId"], "text": "read the library"})
    assert llm.violations == []
    [listed] = (await d.call("toycoder/session/list", {}))["sessions"]
    assert listed["additionalDirectories"] == [str(extra)]
    from rpc import RpcError

    with pytest.raises(RpcError) as bad:
        await d.call("toycoder/session/new", {"additionalDirectories": [str(extra / "missing")]})
    assert bad.value.code == -32602 and "additionalDirectories" in bad.value.message
