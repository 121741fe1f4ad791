"""Issue 32's Neovim items: the "N files changed" line is actionable (<CR> picks one of its files and
shows what that turn did to it, from the daemon's toycoder/checkpoint/diff; `u` undoes that turn through the daemon's `/restore <turn>`), live and in a loaded session;
the plan is pinned in the chat's winbar while a long turn scrolls its block away.

Real headless Neovim, the real daemon and the scripted model, through the fixtures of test_neovim.
"""

from __future__ import annotations

from pathlib import Path

import test_neovim
from test_neovim import Editor
from test_neovim_plan_modes import plan_call

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin, the daemon and the scripted model

GROWN = "# Demo\nA bigger project.\nWith more.\n"


def write_readme(ed: Editor, llm: FakeLLM) -> None:
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": GROWN}}]},
            {"text": "Written."})
    ed.cmd("ToyCoder grow the readme")
    ed.decide("a")
    ed.wait_idle()


def cursor_on(ed: Editor, needle: str) -> None:
    """Focus the chat window with the cursor on the (last) line that shows `needle`."""
    lines = ed.chat_lines()
    row = max(i for i, line in enumerate(lines) if needle in line) + 1
    ed.lua("vim.api.nvim_set_current_win(T.chat_win()) vim.api.nvim_win_set_cursor(0, { ..., 0 })", row)


def current_file(ed: Editor) -> str:
    return str(ed.lua("return vim.api.nvim_buf_get_name(0)"))


def test_cr_on_a_changes_line_picks_one_of_its_files_and_shows_the_turns_diff(editor, llm: FakeLLM,
                                                                             workspace: Path) -> None:
    ed = editor()
    before = (workspace / "README.md").read_text()
    write_readme(ed, llm)
    assert "- 1 file changed +2 −1: README.md" in ed.chat_lines(), ed.chat()

    cursor_on(ed, "Written.")  # not a changes line: <CR> moves down, as it would, and picks nothing
    row = ed.lua("return vim.api.nvim_win_get_cursor(0)[1]")
    ed.nv.input("<CR>")
    ed.wait(lambda: ed.lua("return vim.api.nvim_win_get_cursor(0)[1]") == row + 1, "<CR> to move the cursor down")
    assert ed.lua("return #T.selects") == 0

    (workspace / "README.md").write_text("changed since\n")  # the turn's diff, not the disk's
    cursor_on(ed, "1 file changed")
    ed.answer("README.md")
    ed.nv.input("<CR>")
    ed.wait(lambda: current_file(ed).startswith("toycoder://diff/"), "the picked file's diff to show")
    [picked] = ed.lua("return T.selects")
    assert picked["kind"] == "toycoder.changed_file"
    assert picked["items"] == ["M README.md +2 −1"], picked
    sid = ed.lua("return require('toycoder').session_id()")
    assert current_file(ed) == f"toycoder://diff/{sid}-1/README.md"
    assert not ed.lua("return vim.b.toycoder_chat"), "shown in the chat's window"
    assert ed.lua("return T.chat_win()") is not None, "the chat stays open beside it"
    shown = ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    removed = [line[1:] for line in shown if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in shown if line.startswith("+") and not line.startswith("+++")]
    assert shown[:2] == ["--- a/README.md", "+++ b/README.md"], shown
    assert (removed, added) == ([before.splitlines()[-1]], GROWN.splitlines()[1:]), shown
    assert ed.lua("return { vim.bo.filetype, vim.bo.modifiable }") == ["diff", False]

    # a loaded session's line does the same
    ed.prompt(f"/switch {sid}")
    cursor_on(ed, "1 file changed")
    ed.answer(False)  # dismissed: nothing opens
    ed.nv.input("<CR>")
    ed.wait(lambda: ed.lua("return #T.selects") == 2, "the picker of the loaded session's line")
    assert ed.lua("return T.selects[2].items") == ["M README.md +2 −1"]
    assert ed.lua("return vim.b.toycoder_chat"), "nothing opened when the picker was dismissed"


def test_u_on_a_changes_line_undoes_that_turn(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    readme = workspace / "README.md"
    before = readme.read_text()
    write_readme(ed, llm)
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "notes\n"}}]},
            {"text": "Noted."})
    ed.cmd("ToyCoder write notes")
    ed.decide("a", 2)
    ed.wait_idle()
    assert (workspace / "NOTES.md").exists()

    cursor_on(ed, "Noted.")  # not a changes line: u says how to use it and sends nothing
    ed.nv.input("u")
    ed.wait(lambda: any("files changed" in n for n in ed.notes()), "the hint")

    cursor_on(ed, "README.md")  # the first turn's line: it and the later turn are undone
    ed.nv.input("u")
    ed.wait(lambda: readme.read_text() == before and not (workspace / "NOTES.md").exists(), "the restore")
    ed.wait_idle()
    lines = ed.chat_lines()
    sid = ed.lua("return require('toycoder').session_id()")
    sent = [line for line in lines if line.startswith("/restore ")]
    assert sent == [f"/restore {sid}-1"], lines  # the first turn's checkpoint, through the prompt path
    assert any(line.startswith("- Restored 2 files changed") for line in lines), lines

    cursor_on(ed, "Restored")  # a restore's own line: it says how to redo, and restores nothing
    notes = len(ed.notes())
    ed.nv.input("u")
    ed.wait(lambda: len(ed.notes()) > notes, "the note on a restore line")
    assert "/redo" in ed.notes()[-1]
    assert readme.read_text() == before


def winbar(ed: Editor) -> str:
    return str(ed.lua("return vim.wo[T.chat_win()].winbar"))


def test_the_plan_is_pinned_in_the_winbar(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    llm.add(plan_call("completed", "in_progress", "pending"),
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": GROWN}}]},
            {"text": "\n\n".join(f"Paragraph {i} of a long reply." for i in range(80))})
    ed.lua("vim.o.columns = 200")  # a chat window of 80 columns: room for the title and the plan
    ed.cmd("ToyCoder fix add")
    ed.review()  # the turn waits on the permission: it is still running
    assert winbar(ed).endswith("  ·  plan 1/3 ▸ fix add"), winbar(ed)
    ed.nv.input("a")
    ed.wait_idle()
    # the block scrolled out of the window; the winbar still says where the plan is
    top = ed.lua("return vim.fn.line('w0', T.chat_win())")
    assert top > ed.chat_lines().index("- plan 1/3") + 1, "the plan block is still in view: the test proves nothing"
    assert winbar(ed).endswith("  ·  plan 1/3 ▸ fix add"), winbar(ed)

    # narrow: the title is cut first, the plan's count stays
    ed.lua("vim.api.nvim_win_set_width(T.chat_win(), 30)")
    ed.wait(lambda: "plan 1/3" in winbar(ed), "the narrow winbar")
    assert "plan 1/3" in winbar(ed)

    llm.add(plan_call("completed", "completed", "completed"), {"text": "All done."})
    ed.prompt("finish")
    assert "plan" not in winbar(ed), "every step done and the turn over: unpinned"

    sid = ed.lua("return require('toycoder').session_id()")
    llm.add(plan_call("completed", "in_progress", "pending"), {"text": "Half."})
    ed.prompt("/new")
    ed.prompt("another")
    assert "plan 1/3" in winbar(ed)
    ed.prompt(f"/switch {sid}")  # that session's plan is all done: no pin
    assert "plan" not in winbar(ed), winbar(ed)


def test_a_turn_running_in_another_editor_shows_live_with_its_client(editor, llm: FakeLLM) -> None:
    """turn_elsewhere (docs/protocol.md), as the daemon delivers it to the plugin's handler: the other
    editor's prompt starts a turn here, its updates stream into it, the winbar says where it runs."""
    ed = editor()
    # the plugin's toycoder/update handler, to hand it what a daemon that observes another one sends
    ed.lua("""
        local daemon = require('toycoder.daemon')
        local on = daemon.on_notification
        daemon.on_notification = function(method, fn) if method == 'toycoder/update' then T.on_update = fn end on(method, fn) end
        package.loaded['toycoder'] = nil
        require('toycoder').setup(require('toycoder.config').options)
        daemon.on_notification = on
    """)
    llm.add({"text": "First answer."})
    ed.lua("vim.o.columns = 200")
    ed.prompt("first question")
    sid = ed.lua("return require('toycoder').session_id()")

    def update(kind: str, **fields: object) -> None:
        ed.lua("T.on_update({ sessionId = ..., turnId = 'x-2', update = select(2, ...) })", sid, {"kind": kind, **fields})

    update("turn_elsewhere", client="Visual Studio Code", running=True, prompt="explain add")
    assert winbar(ed).endswith("  ·  running in Visual Studio Code"), winbar(ed)
    update("text_delta", text="It adds ")
    update("text_delta", text="two numbers.")
    update("tool_call", toolCallId="c1", name="read_file", title="read_file src/app.py", arguments={}, permission="safe")
    update("tool_result", toolCallId="c1", status="completed", output="def add")
    ed.lua("T.on_update({ sessionId = 'other', turnId = 'o-1', update = { kind = 'text_delta', text = 'NOT OURS' } })")
    update("turn_elsewhere", client="Visual Studio Code", running=False)
    lines = ed.chat_lines()
    at = max(i for i, line in enumerate(lines) if line == "explain add")
    assert lines[at - 2:at] == ["## You", ""], lines
    assert lines[at + 1:] == ["", "## ToyCoder", "", "It adds two numbers.", "", "- [ok] read_file src/app.py"], lines
    assert "NOT OURS" not in ed.chat()
    assert "running in" not in winbar(ed), winbar(ed)
    assert lines.count("First answer.") == 1

    llm.add({"text": "Here again."})  # the next prompt here is ours, as before
    assert "Here again." in ed.prompt("and now?")
