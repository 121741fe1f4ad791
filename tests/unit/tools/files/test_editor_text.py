"""The tools' seam to an editor that serves files (Frontend.editor_text, ACP fs/read_text_file) and one
that writes them all (Frontend.writes_all_files, ACP fs/write_text_file), in-process with the
recording frontend: read_file and the edit tools' base see the served text, unsaved text follows
the LSP open-document rules, edits go through the editor. test_acp_fs.py has the wire."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inproc_app import InProc
from test_editor_edits import CALC, edit, one_call

from toycoder_daemon.core.ports import EditApplied, EditorTextUnknown

UNSAVED = CALC + "# typed, not saved\n"
BOM_BYTES = "\ufeff".encode()


def read(path: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}


def served(inproc: Any, workspace: Path, texts: dict[str, str], *, writes: bool = False) -> tuple[InProc, Path]:
    """An App whose editor serves `texts` (by workspace path); `writes`: it also writes every file."""
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    calc = (workspace / "calc.py").resolve()
    calc.write_text(CALC)
    p.frontend.served = {(workspace / k).resolve(): v for k, v in texts.items()}
    if writes:
        p.frontend.writes_all, p.frontend.editor = True, EditApplied(True)
    return p, calc


async def test_read_file_shows_the_served_unsaved_text_with_the_editor_note(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": UNSAVED})
    r = await one_call(p, read("calc.py"))
    assert r.status == "completed"
    assert "(the editor's unsaved text, not yet on disk)" in r.output and "# typed, not saved" in r.output
    assert p.frontend.text_asks == [calc]  # one question per file per call


async def test_read_file_of_a_served_text_equal_to_the_disk_is_a_plain_read(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": CALC.replace("\n", "\r\n")})  # line endings aside
    r = await one_call(p, read("calc.py"))
    assert r.status == "completed" and "return a + b" in r.output and "unsaved" not in r.output
    assert p.frontend.text_asks == [calc]


async def test_read_file_falls_back_to_the_disk_when_the_editor_has_nothing(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {})
    r = await one_call(p, read("calc.py"))
    assert r.status == "completed" and "return a + b" in r.output and "unsaved" not in r.output
    gone = await one_call(p, read("missing.py"))
    assert gone.status == "failed" and "file not found: missing.py" in gone.output


async def test_a_buffer_not_yet_on_disk_is_read_and_binaries_are_not_asked(inproc, workspace: Path) -> None:
    p, _ = served(inproc, workspace, {"new.py": "print('draft')\n"})
    (workspace / "blob.bin").write_bytes(b"\x00\x01binary")
    r = await one_call(p, read("new.py"))
    assert r.status == "completed" and "print('draft')" in r.output and "not yet on disk" in r.output
    blob = await one_call(p, read("blob.bin"))
    assert blob.status == "failed" and "binary" in blob.output
    assert p.frontend.text_asks == [(workspace / "new.py").resolve()]


async def test_an_edit_goes_through_an_editor_that_writes_all_files_from_its_text(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": UNSAVED}, writes=True)
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed" and "edited calc.py through the editor: replaced 1" in r.output
    assert p.frontend.edits == [(calc, UNSAVED, UNSAVED.replace("a + b", "b + a"))]
    assert p.frontend.served[calc] == UNSAVED.replace("a + b", "b + a")
    assert calc.read_text() == CALC and p.app.workspace.open_documents == {}  # the disk is the editor's business
    assert p.frontend.text_asks == [calc, calc]  # the preview, then the call once allowed
    [cp] = p.app.checkpoint_list(p.app.list_sessions()[0].id)  # recorded from the editor's text
    assert cp["files"] == [{"path": "calc.py", "status": "modified", "added": 1, "removed": 1,
                           "inEditor": True}]


async def test_a_new_file_and_an_unserved_one_go_through_an_editor_that_writes_all(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {}, writes=True)
    r = await one_call(p, {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x = 1\n"}}]})
    assert r.status == "completed" and "created new.py" in r.output
    new = (workspace / "new.py").resolve()
    assert p.frontend.edits == [(new, "", "x = 1\n")] and not new.exists()
    [cp] = p.app.checkpoint_list(p.app.list_sessions()[0].id)
    assert cp["files"][0]["status"] == "created"  # undo removes it: it did not exist before
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed" and p.frontend.edits[-1] == (calc, CALC, CALC.replace("a + b", "b + a"))
    assert calc.read_text() == CALC


async def test_served_unsaved_text_without_writes_is_refused_like_an_lsp_buffer(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": UNSAVED})
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "calc.py has unsaved changes in the editor" in r.output
    assert calc.read_text() == CALC and p.frontend.requests == []  # refused before asking the person
    p.frontend.served = {calc: CALC}  # saved: the daemon writes the disk itself
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed" and calc.read_text() == CALC.replace("a + b", "b + a")
    assert p.frontend.edits == []


async def test_typing_in_the_served_buffer_while_asked_fails_the_edit(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": CALC}, writes=True)
    p.frontend.on_confirm = lambda _: p.frontend.served.__setitem__(calc, UNSAVED)  # type: ignore[union-attr]
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed" and "calc.py changed while waiting for approval; read it again" in r.output
    assert p.frontend.edits == [] and p.frontend.served[calc] == UNSAVED


# ---- an editor that serves files but cannot answer ---------------------------------------------

async def test_an_edit_is_refused_when_the_serving_editor_cannot_answer_and_a_read_uses_the_disk(
        inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {"calc.py": UNSAVED}, writes=True)
    p.frontend.text_error = EditorTextUnknown("the client answered with an error: busy", replied=True)
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "failed", r.output
    assert "could not get the editor's text of calc.py (the client answered with an error: busy); try again" in r.output
    # the disk's text sent as the whole file would have replaced the unsaved buffer: nothing is sent
    assert p.frontend.edits == [] and p.frontend.requests == [] and p.frontend.served[calc] == UNSAVED
    assert calc.read_text() == CALC
    r = await one_call(p, read("calc.py"))
    assert r.status == "completed" and "return a + b" in r.output and "unsaved" not in r.output


async def test_an_error_about_a_file_the_disk_has_not_means_the_editor_has_none(inproc, workspace: Path) -> None:
    p, _ = served(inproc, workspace, {}, writes=True)
    new = (workspace / "new.py").resolve()
    create = {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x = 1\n"}}]}
    p.frontend.text_error = EditorTextUnknown("no answer", replied=False)  # a timeout: it may hold a new buffer
    r = await one_call(p, create)
    assert r.status == "failed" and "could not get the editor's text of new.py" in r.output and p.frontend.edits == []
    p.frontend.text_error = EditorTextUnknown("the client answered with an error: not found", replied=True)
    r = await one_call(p, create)
    assert r.status == "completed" and "created new.py" in r.output
    assert p.frontend.edits == [(new, "", "x = 1\n")]


# ---- what a whole-file write keeps of the file -----------------------------------------------------

async def test_a_whole_file_write_keeps_the_files_bom(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {}, writes=True)
    calc.write_bytes(BOM_BYTES + CALC.encode())
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed", r.output
    assert p.frontend.edits == [(calc, "\ufeff" + CALC, "\ufeff" + CALC.replace("a + b", "b + a"))]
    # served with its BOM: sent back with it; served without (an editor that hides it): without
    for shown in ("\ufeff" + UNSAVED, UNSAVED):
        p.frontend.served = {calc: shown}
        r = await one_call(p, edit("calc.py", "a + b", "b + a"))
        assert r.status == "completed" and p.frontend.edits[-1] == (calc, shown, shown.replace("a + b", "b + a"))


async def test_a_file_not_in_utf8_is_written_here_in_its_encoding(inproc, workspace: Path) -> None:
    p, calc = served(inproc, workspace, {}, writes=True)
    calc.write_bytes("s = 'café'\n".encode("latin-1") + CALC.encode())
    r = await one_call(p, edit("calc.py", "a + b", "b + a"))
    assert r.status == "completed", r.output
    assert "written by the daemon in the file's latin-1 encoding" in r.output
    assert p.frontend.edits == []  # fs/write_text_file would have re-encoded it as UTF-8
    assert calc.read_bytes() == "s = 'café'\n".encode("latin-1") + CALC.replace("a + b", "b + a").encode()
    # its editor text differs from the disk: it is unsaved work the disk write would not keep
    p.frontend.served = {calc: "s = 'café'\n" + UNSAVED}
    r = await one_call(p, edit("calc.py", "b + a", "a + b"))
    assert r.status == "failed" and "calc.py has unsaved changes in the editor" in r.output
    assert "b + a" in calc.read_bytes().decode("latin-1")


# ---- served text that only looks different from the disk (issue 33) ---------------------------------

async def test_a_missing_file_the_editor_serves_as_empty_is_a_new_file(inproc, workspace: Path) -> None:
    p, _ = served(inproc, workspace, {"new.py": ""}, writes=True)  # CodeCompanion's answer for a missing file
    r = await one_call(p, {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.py", "content": "x = 1\n"}}]})
    assert r.status == "completed" and "created new.py" in r.output, r.output
    [cp] = p.app.checkpoint_list(p.app.list_sessions()[0].id)
    assert cp["files"][0]["status"] == "created"  # undo deletes it, not leaves it empty


async def test_served_text_equal_but_for_the_final_newline_or_crlf_leaves_the_disks_as_base(inproc,
                                                                                            workspace: Path) -> None:
    for disk in (CALC, CALC.replace("\n", "\r\n")):
        p, calc = served(inproc, workspace, {"calc.py": CALC.rstrip("\n")}, writes=True)  # avante's text
        calc.write_bytes(disk.encode())
        r = await one_call(p, edit("calc.py", "a + b", "b + a"))
        assert r.status == "completed", r.output
        assert p.frontend.edits == [(calc, disk, disk.replace("a + b", "b + a"))]
        await p.close()
