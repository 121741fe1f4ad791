"""Issue 33, text the client serves (ACP fs/read_text_file), on the face in-process with clients that
behave as the real ones measured: CodeCompanion answers "" for a missing file (a new file must stay
new: `created`, `oldText: null`, undo deletes it); avante serves text without the final newline
(the disk's text is the base, so the edit keeps it). The tool seam: tools/files/test_editor_text.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, ReadTextFileResponse, WriteTextFileResponse
from acp_client import Editor, acp_face, new_session

from toycoder_daemon.testing.fake_llm import FakeLLM

BOTH = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
CALC = "def add(a, b):\n    return a + b\n"


class WritingEditor(Editor):
    """A client that writes the disk on fs/write_text_file and serves files through `serve`."""

    def __init__(self, serve: Any) -> None:
        super().__init__()
        self.serve = serve
        self.written: list[tuple[str, str]] = []

    async def read_text_file(self, session_id: str, path: str, **_: Any) -> ReadTextFileResponse:
        return ReadTextFileResponse(content=self.serve(Path(path)))

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> WriteTextFileResponse:
        self.written.append((path, content))
        Path(path).write_text(content)
        return WriteTextFileResponse()


def codecompanion(p: Path) -> str:
    return p.read_text() if p.exists() else ""  # "" for a file it does not have


def avante(p: Path) -> str:
    return p.read_text().rstrip("\n")


async def test_a_missing_file_served_as_empty_is_created_and_undo_deletes_it(tmp_path: Path, llm: FakeLLM,
                                                                            workspace: Path) -> None:
    new = (workspace / "notes.md").resolve()
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# Notes\n"}}]},
            {"text": "done"})
    editor = WritingEditor(codecompanion)
    async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, editor, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("write notes")])
        assert editor.written == [(str(new), "# Notes\n")] and new.read_text() == "# Notes\n"
        [asked] = editor.requests("session/request_permission")
        [diff] = [c for c in asked["toolCall"]["content"] if c.get("type") == "diff"]
        assert diff.get("oldText") is None and diff["path"] == str(new)  # null: omitted, as the SDK dumps it
        outputs = [u["rawOutput"]["output"] for u in editor.updates("tool_call_update") if u.get("rawOutput")]
        assert any("created notes.md" in o for o in outputs), outputs
        await conn.prompt(session_id=sid, prompt=[text_block("/undo")])
        assert not new.exists()  # undone: deleted, not left empty


async def test_text_served_without_the_final_newline_keeps_the_disks(tmp_path: Path, llm: FakeLLM,
                                                                     workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    for disk in (CALC, CALC.replace("\n", "\r\n")):  # avante's missing newline, and CRLF on disk
        calc.write_bytes(disk.encode())
        llm.add({"tool_calls": [{"name": "edit_file", "arguments": {
            "path": "calc.py", "old_string": "a + b", "new_string": "b + a"}}]}, {"text": "done"})
        editor = WritingEditor(lambda p: avante(p).replace("\r\n", "\n"))
        async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, editor, _):
            sid = await new_session(conn, workspace)
            await conn.prompt(session_id=sid, prompt=[text_block("swap")])
        assert editor.written == [(str(calc), disk.replace("a + b", "b + a"))]
