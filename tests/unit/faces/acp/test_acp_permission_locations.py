"""ACP permission requests say where they point: the absolute path (as the schema says, and as the
`tool_call` for the same call) and the first changed line."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import text_block
from acp_client import acp_face, new_session

from toycoder_daemon.faces.acp.frontend import first_changed_line
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.tools.files.edit import unified_diff


async def test_permission_request_carries_an_absolute_location_with_the_line(tmp_path: Path, llm: FakeLLM,
                                                                           workspace: Path) -> None:
    (workspace / "src" / "long.py").write_text("".join(f"line{i} = {i}\n" for i in range(1, 21)))
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "src/long.py", "old_string": "line15 = 15\n", "new_string": "line15 = 150\n"}}]}, {"text": "done"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("change line 15")])
        [asked] = editor.requests("session/request_permission")
        # the changed line, not the hunk's start (3 lines of context earlier)
        assert asked["toolCall"]["locations"] == [{"path": str(workspace / "src" / "long.py"), "line": 15}]
        [call] = [u for u in editor.updates("tool_call") if u["toolCallId"] == asked["toolCall"]["toolCallId"]]
        assert call["locations"][0]["path"] == asked["toolCall"]["locations"][0]["path"]
    assert "line15 = 150\n" in (workspace / "src" / "long.py").read_text()


LINES = "".join(f"line{i}\n" for i in range(1, 21))


@pytest.mark.parametrize("after, line", [
    (LINES.replace("line15\n", "line15 changed\n"), 15),
    (LINES.replace("line1\n", "line0\nline1\n", 1), 1),  # an insertion before the first line
    (LINES.replace("line7\nline8\n", ""), 7),  # a deletion points where the lines were
    (LINES.replace("line20\n", ""), 19),  # ... at the end: the last line left
    (LINES.replace("line4\n", "y\n").replace("line18\n", "x\n"), 4),  # two hunks: the first
    (LINES.rstrip("\n"), 20),  # only the final newline goes
    ("", 1),  # emptied
])
def test_the_first_changed_line_of_a_diff(after: str, line: int) -> None:
    assert first_changed_line(unified_diff("f.txt", LINES, after)) == line


def test_a_new_file_points_at_its_first_line_and_no_hunk_at_none() -> None:
    assert first_changed_line(unified_diff("f.txt", "", "a\nb\n", existed=False)) == 1
    assert first_changed_line("not a diff") is None
