"""ACP permission requests say where they point: the path relative to the root (clients join it
with their cwd) and the first changed line."""

from __future__ import annotations

from pathlib import Path

from acp import text_block
from test_acp import acp_face, new_session

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_permission_request_carries_a_relative_location_with_the_line(tmp_path: Path, llm: FakeLLM,
                                                                           workspace: Path) -> None:
    (workspace / "src" / "long.py").write_text("".join(f"line{i} = {i}\n" for i in range(1, 21)))
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "src/long.py", "old_string": "line15 = 15\n", "new_string": "line15 = 150\n"}}]}, {"text": "done"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("change line 15")])
        [asked] = editor.requests("session/request_permission")
        assert asked["toolCall"]["locations"] == [{"path": "src/long.py", "line": 12}]  # 3 lines of context
    assert "line15 = 150\n" in (workspace / "src" / "long.py").read_text()
