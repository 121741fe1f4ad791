"""The client's file system on the ACP face (acp_fs.py), driven by the ACP SDK's client side: a client
that declared `fs.readTextFile` is asked for the files the tools read (and so shows its unsaved
buffers); one that declared `fs.writeTextFile` gets every edit as `fs/write_text_file` and writes
the disk itself; one that declared neither gets the disk; a failing read falls back to the disk for read_file and refuses an edit.
The tool seam itself is tested in-process in test_editor_text.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, ReadTextFileResponse, WriteTextFileResponse
from acp_client import Editor, acp_daemon, acp_face, new_session

from toycoder_daemon.core.ports import EditorTextUnknown
from toycoder_daemon.faces.acp import fs as acp_fs
from toycoder_daemon.faces.acp.client import ClientError
from toycoder_daemon.testing.fake_llm import FakeLLM

CALC = "def add(a, b):\n    return a + b\n"
UNSAVED = CALC + "# typed in the editor, not saved\n"
BOTH = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
READ_ONLY = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True))


class FsEditor(Editor):
    """A client with buffers: it serves `buffers` (else the disk) and takes writes into them (a
    client writes the disk when it saves; this one never does, so the test sees who wrote what)."""

    def __init__(self) -> None:
        super().__init__()
        self.buffers: dict[str, str] = {}
        self.fail_reads = False
        self.fail_writes = False

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **_: Any) -> ReadTextFileResponse:
        if self.fail_reads:
            raise RequestError.internal_error({"details": "the editor is having a bad day"})
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            return ReadTextFileResponse(content=Path(path).read_text())
        except FileNotFoundError:
            raise RequestError.resource_not_found(path) from None

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> WriteTextFileResponse:
        if self.fail_writes:
            raise RequestError.internal_error({"details": "read-only buffer"})
        self.buffers[path] = content
        return WriteTextFileResponse()


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def read(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}


def tool_outputs(editor: Editor) -> list[str]:
    return [u["rawOutput"]["output"] for u in editor.updates("tool_call_update") if u.get("rawOutput")]


async def test_an_unsaved_buffer_is_read_and_the_edit_goes_to_the_client(tmp_path: Path, llm: FakeLLM,
                                                                         workspace: Path) -> None:
    """Through the real daemon: read_file shows what the client serves, the edit is made against it
    and arrives as fs/write_text_file, and the daemon leaves the disk alone."""
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(read("calc.py"),
            {**edit("calc.py", "a + b", "b + a"),
             "expect": {"last_tool_contains": "# typed in the editor, not saved"}},
            {"text": "done", "expect": {"last_tool_contains": "edited calc.py through the editor"}})
    editor = FsEditor()
    editor.buffers[str(calc)] = UNSAVED
    async with acp_daemon(tmp_path, llm, caps=BOTH, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("swap it")])).stop_reason == "end_turn"
        read_output = tool_outputs(editor)[0]
        assert "(the editor's unsaved text, not yet on disk)" in read_output
        assert [r["path"] for r in editor.requests("fs/read_text_file")] == [str(calc)] * 3  # read, preview, write
        [written] = editor.requests("fs/write_text_file")
        assert written == {"sessionId": sid, "path": str(calc), "content": UNSAVED.replace("a + b", "b + a")}
        assert editor.buffers[str(calc)] == UNSAVED.replace("a + b", "b + a")
        [asked] = editor.requests("session/request_permission")
        assert "# typed in the editor" in asked["toolCall"]["content"][0]["oldText"]
    assert calc.read_text() == CALC  # the disk is the client's to write
    assert llm.violations == []


async def test_a_client_without_fs_gets_the_disk(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(read("calc.py"), {**edit("calc.py", "a + b", "b + a"), "expect": {"last_tool_contains": "return a + b"}},
            {"text": "done", "expect": {"last_tool_contains": "edited calc.py: replaced 1"}})
    editor = FsEditor()
    editor.buffers[str(calc)] = UNSAVED  # held, but the client did not declare fs: never asked
    async with acp_face(tmp_path, llm, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        assert editor.requests("fs/read_text_file") == editor.requests("fs/write_text_file") == []
        assert "unsaved" not in tool_outputs(editor)[0]
    assert calc.read_text() == CALC.replace("a + b", "b + a")
    assert llm.violations == []


async def test_a_failing_read_falls_back_to_the_disk_but_refuses_the_edit(tmp_path: Path, llm: FakeLLM,
                                                                         workspace: Path) -> None:
    """read_file may show the disk; an edit may not be made against it: sent as the whole file with
    fs/write_text_file, it would replace the client's unsaved buffer it could not see."""
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(read("calc.py"), {"text": "read it", "expect": {"last_tool_contains": "return a + b"}},
            edit("calc.py", "a + b", "b + a"),
            {"text": "refused", "expect": {"last_tool_contains": "could not get the editor's text of calc.py"}})
    editor = FsEditor()
    editor.buffers[str(calc)] = UNSAVED
    editor.fail_reads = True
    async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("read calc")])).stop_reason == "end_turn"
        assert len(editor.requests("fs/read_text_file")) == 1  # asked, answered with an error
        [done] = [u for u in editor.updates("tool_call_update") if u.get("rawOutput")]
        assert done["status"] == "completed" and "unsaved" not in done["rawOutput"]["output"]
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        assert editor.updates("tool_call_update")[-1]["status"] == "failed"
        assert editor.requests("fs/write_text_file") == [] and editor.requests("session/request_permission") == []
        assert editor.buffers[str(calc)] == UNSAVED
    assert calc.read_text() == CALC
    assert llm.violations == []


async def test_a_reading_client_without_writes_keeps_its_unsaved_buffer_safe(tmp_path: Path, llm: FakeLLM,
                                                                             workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(edit("calc.py", "a + b", "b + a"),
            {"text": "blocked", "expect": {"last_tool_contains": "calc.py has unsaved changes in the editor"}})
    editor = FsEditor()
    editor.buffers[str(calc)] = UNSAVED
    async with acp_face(tmp_path, llm, caps=READ_ONLY, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        assert editor.requests("fs/write_text_file") == [] and editor.requests("session/request_permission") == []
    assert calc.read_text() == CALC
    assert llm.violations == []


async def test_a_write_the_client_refuses_fails_the_call_and_nothing_is_written(tmp_path: Path, llm: FakeLLM,
                                                                                workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(edit("calc.py", "a + b", "b + a"),
            {"text": "it refused", "expect": {"last_tool_contains": "the editor did not apply the change to calc.py: "
                                              'the client refused the write: Internal error: {"details": "read-only buffer"}'}})
    editor = FsEditor()
    editor.fail_writes = True
    async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        assert len(editor.requests("fs/write_text_file")) == 1 and editor.buffers == {}
        assert editor.updates("tool_call_update")[-1]["status"] == "failed"
    assert calc.read_text() == CALC
    assert llm.violations == []


async def test_what_the_client_answers_to_a_read_is_told_apart() -> None:
    """-32002 is "no such file" (None: the disk is the truth); anything else is EditorTextUnknown,
    `replied` when the client answered with an error (tools/editor_text.py decides what follows)."""

    class Client:
        def __init__(self, answer: Any):
            self.answer = answer

        async def request(self, method: str, params: dict[str, Any]) -> Any:
            if self.answer == "silent":
                await asyncio.Event().wait()  # never answers
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer

    path = Path("/w/calc.py")
    assert await acp_fs.read_text(Client({"content": "x"}), "s1", path) == "x"
    assert await acp_fs.read_text(Client(ClientError(-32002, "Resource not found", {"uri": str(path)})), "s1",
                                  path) is None
    for answer, replied, says in [("silent", False, "did not answer within 0.05s"),
                                  (ClientError(-32603, "Internal error", {"details": "busy"}), True, "busy"),
                                  (ClientError(-32601, "Method not found", {"method": "fs/read_text_file"}), True,
                                   "Method not found"),
                                  (object(), False, "no text"),
                                  ({"content": 7}, False, "no text"),
                                  (ConnectionResetError("gone"), False, "ConnectionResetError")]:
        with pytest.raises(EditorTextUnknown) as e:
            await acp_fs.read_text(Client(answer), "s1", path, timeout=0.05)
        assert e.value.replied is replied and says in str(e.value), (answer, str(e.value))


def frame_at(editor: Editor, method: str, update: str | None = None) -> int:
    """Where the first frame the daemon sent of this method (and session/update kind) is."""
    return editor.index(lambda f: f.get("method") == method
                        and (update is None or f["params"]["update"]["sessionUpdate"] == update))


@pytest.mark.parametrize("mode, status", [("ask", "pending"), ("accept-edits", "in_progress")])
async def test_the_client_hears_of_an_edit_before_it_is_asked_for_its_files(
        tmp_path: Path, llm: FakeLLM, workspace: Path, mode: str, status: str) -> None:
    """The tool call is announced (pending only when it will be asked about) before the daemon reads
    or writes the client's files for it."""
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(edit("calc.py", "a + b", "b + a"), {"text": "done"})
    editor = FsEditor()
    async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.set_session_mode(session_id=sid, mode_id=mode)
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        [call] = editor.updates("tool_call")
        assert call["status"] == status
        assert frame_at(editor, "session/update", "tool_call") < frame_at(editor, "fs/read_text_file") \
            < frame_at(editor, "fs/write_text_file")
        assert len(editor.requests("session/request_permission")) == (mode == "ask")
        assert editor.updates("tool_call_update")[-1]["status"] == "completed"
        assert editor.buffers[str(calc)] == CALC.replace("a + b", "b + a")
    assert llm.violations == []


async def test_read_only_refuses_an_edit_without_reading_the_clients_file(tmp_path: Path, llm: FakeLLM,
                                                                          workspace: Path) -> None:
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    llm.add(edit("calc.py", "a + b", "b + a"), {"text": "refused", "expect": {"last_tool_contains": "read-only mode"}})
    editor = FsEditor()
    async with acp_face(tmp_path, llm, caps=BOTH, editor=editor) as (conn, _, _):
        sid = await new_session(conn, workspace)
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        await conn.prompt(session_id=sid, prompt=[text_block("swap it")])
        assert editor.requests("fs/read_text_file") == editor.requests("session/request_permission") == []
        [call] = editor.updates("tool_call")
        [done] = editor.updates("tool_call_update")
        assert call["status"] == "in_progress"  # never pending: nobody is asked about it
        assert done["status"] == "failed" and "read-only mode" in done["rawOutput"]["output"]
    assert llm.violations == []
