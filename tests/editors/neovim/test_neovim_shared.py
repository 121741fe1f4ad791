"""One session in two real Neovims, each with its own daemon (issue 32, "One session in many editors,
live"): a turn started in one streams into the other while it runs ("running in toycoder.nvim"),
its permission request is approved in the other (the origin's prompt closes), the other reloads its
clean buffer of a file the turn wrote, keeps a dirty one with a non-destructive notice (never the
advice to `:e!`), and its chat stays on its last line.

The same scenario with code-server as one of the editors is clients/vscode/test/codeserver/
shared.test.ts (TOYCODER_SLOW=1); the daemons' side of it, in-process and over both faces, is
tests/unit/sessions/test_shared_sessions.py and tests/e2e.
"""

from __future__ import annotations

from pathlib import Path

import test_neovim
from test_neovim import WARN, Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin set up

WORDS = [f"w{i}" for i in range(1, 61)]
STORY = " ".join(WORDS)
APP = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
README = "# Demo\nA tiny project, rewritten by the agent.\n"
CALC = "X = 2\n"


def buffer(ed: Editor, path: Path) -> list[str]:
    return ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path))


def modified(ed: Editor, path: Path) -> bool:
    return ed.lua("return vim.bo[vim.fn.bufnr(...)].modified", str(path))


def streamed_words(ed: Editor) -> list[str]:
    """The words of STORY the chat shows in its last reply."""
    reply = test_neovim.reply_after_last_header(ed.chat()) if "## ToyCoder\n" in ed.chat() else ""
    return [w for w in reply.split() if w in WORDS]


def chat_view(ed: Editor) -> dict:
    """The chat window's cursor line, its last visible line, the buffer's line count, and how many
    empty rows it shows below the end while lines above are scrolled out (a wrapped last line that
    does not fit may leave one)."""
    return ed.lua("""
        local w = T.chat_win()
        if not w then return vim.NIL end
        local b = vim.api.nvim_win_get_buf(w)
        local top = vim.fn.line('w0', w)
        local shown = vim.api.nvim_win_text_height(w, { start_row = top - 1 }).all
        return { cursor = vim.api.nvim_win_get_cursor(w)[1], bottom = vim.fn.line('w$', w),
                 count = vim.api.nvim_buf_line_count(b),
                 blank_rows = top > 1 and math.max(0, vim.api.nvim_win_get_height(w) - shown) or 0 }""")


def test_a_turn_in_one_neovim_streams_into_the_other_which_reloads_clean_buffers_and_keeps_dirty_ones(
        editor, llm: FakeLLM, workspace: Path) -> None:
    app, readme, calc = workspace / "src" / "app.py", workspace / "README.md", workspace / "src" / "calc.py"
    calc.write_text("X = 1\n")
    # the one permission prompt of the turn is src/app.py's; README.md and src/calc.py need none
    origin = editor(watchdog=150, extra="permissions: {allow: ['write_file(README.md)', 'write_file(src/calc.py)']}\n")
    llm.add({"text": "Noted."})
    origin.prompt("remember the word banana")
    session = origin.lua("return require('toycoder').session_id()")
    assert session
    # src/calc.py open in the origin: its write goes into that buffer (workspace/applyEdit), then saved
    origin.cmd("edit src/calc.py")

    # the other Neovim: src/app.py and src/calc.py open and clean, README.md open with unsaved work;
    # then the session
    other = editor(watchdog=150)
    other.cmd("edit README.md")
    other.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'my unsaved words'})")
    other.cmd("edit src/calc.py")
    other.cmd("edit src/app.py")
    assert modified(other, readme) and not modified(other, app) and not modified(other, calc)
    chat = other.prompt(f"/switch {session}")
    assert other.lua("return require('toycoder').session_id()") == session
    assert "remember the word banana" in chat and "Noted." in chat

    llm.add({"text": STORY + "\n", "chunk_size": 4, "chunk_delay": 0.15,
             "tool_calls": [{"name": "write_file", "arguments": {"path": "src/app.py", "content": APP}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "src/calc.py", "content": CALC}},
                            {"name": "write_file", "arguments": {"path": "README.md", "content": README}}]},
            {"text": "All three files are written."})
    origin.cmd("ToyCoder tell a story, then add sub()")

    # words appear in the other Neovim while the origin still streams them
    def partial_in_other() -> list[str] | None:
        seen = streamed_words(other)
        if not 3 <= len(seen) < len(WORDS):
            return None
        origin_words = streamed_words(origin)
        return seen if len(origin_words) < len(WORDS) else None

    seen = other.wait(partial_in_other, "words in the other Neovim while the origin streams", timeout=30)
    assert seen == WORDS[:len(seen)], f"out of order: {seen}"
    assert "## You\n\ntell a story, then add sub()" in other.chat()
    assert other.lua("return require('toycoder').statusline()") == "ToyCoder: running in toycoder.nvim"

    # src/app.py's permission is asked in both Neovims; the other one approves, the origin's prompt closes
    asked_there = origin.review()
    shown = other.decide("a")
    assert "+def sub(a, b):" in shown["text"] and shown["text"] == asked_there["text"]
    assert shown["status"] == "ToyCoder: waiting for approval in toycoder.nvim", shown["status"]
    origin.wait(lambda: not origin.lua("return vim.api.nvim_win_is_valid(T.reviews[1].win)"),
                "the origin's prompt to close once the other Neovim answered")

    # the other Neovim reloads its clean buffer as the file is written, while the turn still runs
    other.wait(lambda: buffer(other, app) == APP.rstrip("\n").split("\n"), "the clean buffer to reload", timeout=30)
    assert not modified(other, app)
    origin.wait_idle(timeout=30)
    other.wait(lambda: other.lua("return require('toycoder').statusline()") == "", "'running in' to go", timeout=30)

    chat = other.chat()
    assert STORY in chat and "All three files are written." in chat
    for path in ("src/app.py", "src/calc.py", "README.md"):
        assert f"- [ok] write_file {path}" in chat, chat
    assert app.read_text() == APP and readme.read_text() == README and calc.read_text() == CALC
    # src/calc.py went into the origin's buffer, which saved it: the other Neovim reloads it too
    assert not origin.lua("return vim.bo.modified") and origin.lua("return vim.fn.getline(1)") == "X = 2"
    other.wait(lambda: buffer(other, calc) == ["X = 2"], "the clean buffer of a file saved by the origin's editor")

    # the dirty buffer is kept as it was, with one notice that harms nothing: no advice to :e!
    assert buffer(other, readme) == ["# Demo", "my unsaved words"] and modified(other, readme)
    notices = [n for n in other.notes() if "README.md" in n]
    assert len(notices) == 1, other.notes()
    assert ":e!" not in notices[0] and "unsaved" in notices[0], notices
    assert not other.notes(WARN) or all(":e!" not in n for n in other.notes(WARN))

    # the chat stays on its last line, showing it
    view = other.wait(lambda: (v := chat_view(other)) and v["cursor"] == v["count"] and v, "the chat at its end")
    assert view["bottom"] == view["count"] and view["blank_rows"] <= 1, view

    # the notice's command: the buffer beside the file on disk, nothing written or reloaded
    other.cmd("ToyCoderDiskDiff README.md")
    tab = other.lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local b = vim.api.nvim_win_get_buf(w)
          table.insert(out, { diff = vim.wo[w].diff, lines = vim.api.nvim_buf_get_lines(b, 0, -1, false),
                              modifiable = vim.bo[b].modifiable })
        end
        return out""")
    assert [(w["diff"], w["lines"]) for w in tab] == [(True, ["# Demo", "my unsaved words"]),
                                                      (True, README.rstrip("\n").split("\n"))], tab
    assert tab[1]["modifiable"] is False
    assert modified(other, readme) and readme.read_text() == README
