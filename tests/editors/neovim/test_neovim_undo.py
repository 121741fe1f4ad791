"""Changes and undo in Neovim (issue 11): the "N files changed" line of a turn, edits to open buffers
through workspace/applyEdit (undo history kept; a clean buffer saved, a modified one left modified),
and :ToyCoderCheckpoints (a vim.ui.select picker; conflicts offered with Force).

Real headless Neovim with the plugin, through the fixtures of test_neovim. The applyEdit handler and
the picker are driven directly too (the handler as the daemon's request would call it; the picker with
toycoder.daemon's request replaced by a recorder); the last tests go through the real daemon and the
scripted model: /undo, and an agent's edit to a modified buffer.
"""

from __future__ import annotations

from pathlib import Path

import test_neovim
from test_neovim import Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin set up

CHANGES = [{"path": "src/app.py", "uri": "file:///w/src/app.py", "status": "modified", "added": 7, "removed": 3},
           {"path": "notes.md", "uri": "file:///w/notes.md", "status": "created", "added": 3, "removed": 0},
           {"path": "logo.png", "uri": "file:///w/logo.png", "status": "modified"}]  # not text: no counts


def apply(ed: Editor, path: Path, start: tuple[int, int], end: tuple[int, int], text: str) -> dict:
    """What the plugin answers to workspace/applyEdit replacing start..end of `path` by `text`."""
    return ed.lua("""
        local path, s, e, text = ...
        local uri = vim.uri_from_fname(path)
        local range = { start = { line = s[1], character = s[2] }, ['end'] = { line = e[1], character = e[2] } }
        local changes = { [uri] = { { range = range, newText = text } } }
        return require('toycoder.apply_edit').handle({ edit = { changes = changes } })
    """, str(path), list(start), list(end), text)


def buffer_text(ed: Editor) -> str:
    return "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))


def test_a_changes_update_is_one_line_with_counts_and_the_files(editor) -> None:
    ed = editor()
    ed.lua("""
        local chat = require('toycoder.chat')
        chat.open(false)
        local t = chat.begin_turn('s1', 'change things')
        chat.update(t, { sessionId = 's1', turnId = 't1', update = { kind = 'text_delta', text = 'Done.' } })
        chat.update(t, { sessionId = 's1', turnId = 't1', update = { kind = 'changes', files = ... } })
    """, CHANGES)
    lines = ed.chat_lines()
    assert "- 3 files changed +10 −3: src/app.py, notes.md, logo.png" in lines, lines
    assert lines.index("- 3 files changed +10 −3: src/app.py, notes.md, logo.png") > lines.index("Done.")
    marks = ed.lua("""
        local b = vim.fn.bufnr('^toycoder://chat$')
        local out = {}
        for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, -1, 0, -1, { details = true })) do
          for _, chunk in ipairs(m[4].virt_text or {}) do out[chunk[1]] = chunk[2] end
        end
        return out
    """)
    assert marks[" +10"] == "ToyCoderAdded" and marks[" −3"] == "ToyCoderRemoved", marks


def test_apply_edit_to_a_modified_buffer_keeps_it_modified_and_u_undoes_it(editor, workspace: Path) -> None:
    ed = editor()
    app = workspace / "src" / "app.py"
    ed.cmd(f"edit {app}")
    ed.nv.input("Go# mine, unsaved<Esc>")
    ed.wait(lambda: ed.lua("return vim.bo.modified"), "the buffer to be modified")
    result = apply(ed, app, (1, 4), (1, 16), "return a + b  # checked")
    assert result == {"applied": True}
    assert buffer_text(ed) == "def add(a, b):\n    return a + b  # checked\n# mine, unsaved"
    assert ed.lua("return vim.bo.modified"), "a buffer with unsaved work was saved by the edit"
    assert app.read_text() == "def add(a, b):\n    return a + b\n", "the file on disk changed"
    ed.nv.input("u")
    ed.wait(lambda: buffer_text(ed) == "def add(a, b):\n    return a + b\n# mine, unsaved", "u to undo the edit")
    ed.nv.input("u")
    ed.wait(lambda: buffer_text(ed) == "def add(a, b):\n    return a + b", "u to undo the person's own line")


def test_apply_edit_to_a_clean_buffer_saves_it_and_refuses_what_it_cannot_apply(editor, workspace: Path) -> None:
    ed = editor()
    readme = workspace / "README.md"
    ed.cmd(f"edit {readme}")
    assert apply(ed, readme, (1, 0), (1, 15), "A small project.") == {"applied": True}
    assert readme.read_text() == "# Demo\nA small project.\n"
    assert not ed.lua("return vim.bo.modified")
    ed.nv.input("u")
    ed.wait(lambda: buffer_text(ed) == "# Demo\nA tiny project.", "u to undo the saved edit")

    refused = ed.lua("""return require('toycoder.apply_edit').handle({ edit = { documentChanges = {
        { kind = 'delete', uri = vim.uri_from_fname(...) } } } })""", str(readme))
    assert refused["applied"] is False and "delete" in refused["failureReason"]
    assert readme.exists()
    bad = ed.lua("return require('toycoder.apply_edit').handle({})")
    assert bad == {"applied": False, "failureReason": "no edit"}


def test_apply_edit_finds_the_buffer_of_a_name_with_pattern_characters(editor, workspace: Path) -> None:
    """`[id].py` (a route file's usual name) read as a pattern would name another buffer, or none."""
    page, other = workspace / "[id].py", workspace / "i.py"
    page.write_text("x = 1\n")
    other.write_text("y = 1\n")
    ed = editor()
    for path in (other, page):
        ed.lua("vim.cmd.edit(vim.fn.fnameescape(...))", str(path))
    assert apply(ed, page, (0, 4), (0, 5), "2") == {"applied": True}
    assert page.read_text() == "x = 2\n", "the clean buffer was not saved"
    assert other.read_text() == "y = 1\n"


# toycoder.daemon's request replaced: answers from T.replies by method, every call recorded in T.calls
FAKE_DAEMON = r"""
T.calls, T.replies = {}, ...
require('toycoder.daemon').request = function(method, params, cb)
  table.insert(T.calls, { method = method, params = params })
  local queue = T.replies[method]
  local reply = queue and table.remove(queue, 1)
  vim.schedule(function() cb(nil, reply) end)
end
"""


def test_checkpoints_picker_restores_the_chosen_turn_and_offers_force_for_conflicts(editor, workspace: Path) -> None:
    ed = editor()
    app = workspace / "src" / "app.py"
    ed.cmd(f"edit {app}")
    listing = {"checkpoints": [
        {"turnId": "s1-1", "createdAt": "2026-11-30T10:40:59+00:00", "prompt": "write notes",
         "files": [{"path": "notes.md", "status": "created", "added": 3, "removed": 0}]},
        {"turnId": "s1-3", "createdAt": "2026-11-30T10:52:07+00:00", "prompt": "fix add",
         "files": [{"path": "src/app.py", "status": "modified", "added": 2, "removed": 1}]}]}
    restored = {"restored": ["src/app.py"],
                "conflicts": [{"path": "notes.md", "reason": "changed since the agent wrote it"}],
                "turnId": "cccc", "note": "Only changes made by ToyCoder's file tools are undone."}
    forced = {"restored": ["notes.md"], "conflicts": [], "turnId": "dddd", "note": ""}
    ed.lua(FAKE_DAEMON, {"toycoder/checkpoint/list": [listing], "toycoder/checkpoint/restore": [restored, forced]})
    # the plugin's current session is "s1" (no daemon here: :ToyCoderCheckpoints picks from its checkpoints)
    ed.lua("require('toycoder').pick_checkpoint = function() require('toycoder.checkpoints').pick('s1', false) end")

    app.write_text("def add(a, b):\n    return a + b  # back\n")  # what the daemon's restore would write
    ed.answer("fix add", "Force")
    ed.cmd("ToyCoderCheckpoints")
    ed.wait(lambda: len(ed.lua("return T.calls")) == 3, "list, restore, forced restore")
    calls = ed.lua("return T.calls")
    assert calls[0] == {"method": "toycoder/checkpoint/list", "params": {"sessionId": "s1"}}
    assert calls[1] == {"method": "toycoder/checkpoint/restore", "params": {"sessionId": "s1", "turnId": "s1-3"}}
    assert calls[2] == {"method": "toycoder/checkpoint/restore",
                        "params": {"sessionId": "s1", "turnId": "s1-3", "paths": ["notes.md"], "force": True}}
    selects = ed.lua("return T.selects")
    assert selects[0]["kind"] == "toycoder.checkpoint"
    assert selects[0]["items"][0].startswith("2026-11-30 10:52  turn 3  "), selects[0]["items"]
    assert "1 file changed +2 −1" in selects[0]["items"][0] and selects[0]["items"][0].endswith("fix add")
    assert "write notes" in selects[0]["items"][1], "newest first"
    assert selects[1]["kind"] == "toycoder.restore_conflicts"
    assert "notes.md: changed since the agent wrote it" in selects[1]["prompt"]
    assert selects[1]["items"][0].startswith("Force")
    ed.wait(lambda: buffer_text(ed) == "def add(a, b):\n    return a + b  # back", "the restored buffer to reload")
    ed.wait_chat("restored src/app.py · Only changes made by ToyCoder's file tools are undone.")
    ed.wait_chat("restored notes.md")


# ---- against the real daemon (its checkpoints and workspace/applyEdit) ---------------------------

def test_undo_restores_the_file_and_its_buffer_reloads(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    readme = workspace / "README.md"
    grown = "# Demo\nA bigger project.\nWith more.\n"
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": grown}}]},
            {"text": "Written."})
    ed.cmd("ToyCoder grow the readme")
    ed.decide("a")
    ed.wait_idle()
    assert "- 1 file changed +2 −1: README.md" in ed.chat_lines(), ed.chat()
    assert readme.read_text() == "# Demo\nA bigger project.\nWith more.\n"
    ed.cmd(f"edit {readme}")  # opened after the write, so the daemon wrote the file itself
    assert buffer_of(ed, readme) == ["# Demo", "A bigger project.", "With more."]

    chat = ed.prompt("/undo")
    assert readme.read_text() == "# Demo\nA tiny project.\n"
    ed.wait(lambda: buffer_of(ed, readme) == ["# Demo", "A tiny project."], "the buffer to reload after /undo")
    assert not ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(readme))
    # the undo's own changes line: a restore (restoreOf), so "Restored" and /redo, never an undo
    assert "- Restored 1 file changed +1 −2: README.md · Redo: /redo" in chat.split("\n"), chat

    # the session loaded again shows both changes lines where they happened
    sid = ed.lua("return require('toycoder').session_id()")
    ed.cmd(f"ToyCoder /switch {sid}")
    ed.wait_idle()
    ed.wait(lambda: ed.chat().count("file changed") == 2, "the loaded session's changes lines")
    lines = ed.chat_lines()
    assert lines.index("- 1 file changed +2 −1: README.md") > lines.index("Written.")
    assert "- Restored 1 file changed +1 −2: README.md · Redo: /redo" in lines, lines  # resumed: still a restore


def test_an_edit_to_a_modified_buffer_goes_through_apply_edit_and_u_undoes_it(editor, llm: FakeLLM,
                                                                               workspace: Path) -> None:
    ed = editor()
    app = workspace / "src" / "app.py"
    ed.cmd(f"edit {app}")
    ed.nv.input("Go# mine, unsaved<Esc>")
    ed.wait(lambda: ed.lua("return vim.bo.modified"), "the buffer to be modified")
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "old_string": "return a + b",
                                                                 "new_string": "return a + b  # checked"}}]},
            {"text": "Edited."})
    ed.lua("""T.edits = {}
        local m = require('toycoder.apply_edit')
        local handle = m.handle
        m.handle = function(params) table.insert(T.edits, params.edit); return handle(params) end""")
    ed.cmd("ToyCoder mark it checked")
    ed.decide("a")
    ed.wait_idle()
    assert "- [ok] edit_file src/app.py" in ed.chat(), ed.chat()
    # versioned (the plugin declares documentChanges): the didOpen's, whose text had the unsaved line
    [sent] = ed.lua("return T.edits")
    assert [c["textDocument"] for c in sent["documentChanges"]] == [{"uri": app.as_uri(), "version": 0}], sent
    assert buffer_of(ed, app) == ["def add(a, b):", "    return a + b  # checked", "# mine, unsaved"]
    assert ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(app)), "the person's unsaved work was saved"
    assert app.read_text() == "def add(a, b):\n    return a + b\n", "the daemon wrote under the buffer"
    ed.lua("vim.fn.win_gotoid(vim.fn.bufwinid(...))", str(app))  # back in the file's window
    ed.nv.input("u")
    ed.wait(lambda: buffer_text(ed) == "def add(a, b):\n    return a + b\n# mine, unsaved",
            "u to undo the agent's edit")


def test_undo_of_an_edit_into_a_modified_buffer_reverts_it_there_keeping_unsaved_work_and_no_warning(
        editor, llm: FakeLLM, workspace: Path) -> None:
    """Issue 32: the undo goes through applyEdit into the buffer; the disk, the person's unsaved line
    and the buffer's modified flag stay; no "changed on disk" warning; /redo brings the change back."""
    ed = editor()
    app = workspace / "src" / "app.py"
    on_disk = app.read_text()
    ed.cmd(f"edit {app}")
    ed.nv.input("Go# mine, unsaved<Esc>")
    ed.wait(lambda: ed.lua("return vim.bo.modified"), "the buffer to be modified")
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "old_string": "return a + b",
                                                                 "new_string": "return a + b  # checked"}}]},
            {"text": "Edited."})
    ed.cmd("ToyCoder mark it checked")
    ed.decide("a")
    ed.wait_idle()
    assert buffer_of(ed, app) == ["def add(a, b):", "    return a + b  # checked", "# mine, unsaved"]
    chat = ed.prompt("/undo")
    assert "not restored" not in chat, chat  # no false conflict
    ed.wait(lambda: buffer_of(ed, app) == ["def add(a, b):", "    return a + b", "# mine, unsaved"],
            "the agent's change taken back in the buffer")
    assert ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(app)), "the unsaved work was saved or dropped"
    assert app.read_text() == on_disk
    assert "- Restored 1 file changed +1 −1: src/app.py · Redo: /redo" in chat.split("\n"), chat
    ed.prompt("/redo")
    ed.wait(lambda: buffer_of(ed, app) == ["def add(a, b):", "    return a + b  # checked", "# mine, unsaved"],
            "/redo to put the change back in the buffer")
    assert app.read_text() == on_disk
    warned = [n["msg"] for n in ed.lua("return T.notes") if "on disk" in n["msg"]]
    assert warned == [], warned  # the disk never changed: nothing to warn about, no :e! advice


def versioned(ed: Editor, path: Path, version: int, old: str, new: str) -> dict:
    """What the plugin answers to a versioned workspace/applyEdit replacing the first `old` in `path`."""
    return ed.lua("""
        local path, version, old, new = ...
        local buf = vim.fn.bufnr(path)
        local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
        for i, line in ipairs(lines) do
          local s, e = line:find(old, 1, true)
          if s then
            local range = { start = { line = i - 1, character = s - 1 }, ['end'] = { line = i - 1, character = e } }
            local doc = { uri = vim.uri_from_fname(path), version = version }
            return require('toycoder.apply_edit').handle({ edit = { documentChanges = {
              { textDocument = doc, edits = { { range = range, newText = new } } } } } })
          end
        end
        error('no ' .. old .. ' in ' .. path)
    """, str(path), version, old, new)


def test_a_versioned_edit_applies_at_the_version_last_sent_and_is_refused_once_the_buffer_moved_on(
        editor, workspace: Path) -> None:
    ed = editor()
    app = workspace / "src" / "app.py"
    ed.cmd(f"edit {app}")
    ed.lua("require('toycoder.daemon').start()")
    version = "return require('toycoder.documents').version(vim.fn.bufnr(...))"
    ed.wait(lambda: ed.lua(version, str(app)) == 0, "the didOpen (version 0)")
    # another language server's version of the buffer (vim.lsp.util.buf_versions) is not ours to check
    ed.lua("rawset(vim.lsp.util.buf_versions, vim.fn.bufnr(...), 1000)", str(app))
    assert versioned(ed, app, 0, "a + b", "b + a") == {"applied": True}
    assert buffer_of(ed, app) == ["def add(a, b):", "    return b + a"]
    ed.wait(lambda: ed.lua(version, str(app)) == 1, "the edit's didChange (version 1)")

    ed.nv.input("Go# typed<Esc>")  # a keystroke the daemon has not heard of when it sends version 1
    ed.wait(lambda: len(buffer_of(ed, app)) == 3, "the typed line")
    refused = versioned(ed, app, 1, "b + a", "a * b")
    assert refused == {"applied": False, "failureReason": "src/app.py changed in the editor; the edit was not applied"}
    assert buffer_of(ed, app) == ["def add(a, b):", "    return b + a", "# typed"]
    assert ed.lua(version, str(app)) == 2, "the refusal did not send the pending change first"
    assert versioned(ed, app, 2, "b + a", "a * b") == {"applied": True}
    assert buffer_of(ed, app) == ["def add(a, b):", "    return a * b", "# typed"]


def buffer_of(ed: Editor, path: Path) -> list[str]:
    return ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path))
