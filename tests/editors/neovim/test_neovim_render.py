"""How the Neovim chat looks (issue 16): treesitter Markdown with concealed markup and highlighted
code, tool lines as virtual text that no syntax misreads, the ask_user answer under its question,
the same tool states live and restored, short titles, `:help toycoder` with a plain runtimepath, a
"starting ToyCoder…" line and a failed start in our own words.

Real headless Neovim, the real daemon and the scripted model, through the fixtures of test_neovim.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvim
import test_neovim
from helpers import slow_and_mute_mcp_servers, unique_marker
from nvim_process import NVIM
from nvim_screen import Screen
from test_neovim import ERROR, PLUGIN, Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin, the daemon and the scripted model

# Every virtual-text line of the chat: {row, text, chunks}; and the chat buffer's treesitter captures.
PROBES = r"""
local P = {}
_G.P = P
local function chat_buf() return vim.fn.bufnr("^toycoder://chat$") end
function P.virt_lines()
  local buf, ns = chat_buf(), require("toycoder.chat").namespace
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.virt_text and not d.invalid then
      local parts = {}
      for _, c in ipairs(d.virt_text) do table.insert(parts, c[1]) end
      table.insert(out, { row = m[2], text = table.concat(parts), chunks = d.virt_text,
                          line = vim.api.nvim_buf_get_lines(buf, m[2], m[2] + 1, true)[1] })
    end
  end
  return out
end
-- "lang:capture" at (row, col), after a full parse (injections included)
function P.captures(row, col)
  local buf = chat_buf()
  vim.treesitter.get_parser(buf):parse(true)
  local out = {}
  for _, c in ipairs(vim.treesitter.get_captures_at_pos(buf, row, col)) do
    table.insert(out, c.lang .. ":" .. c.capture)
  end
  return out
end
function P.row_of(needle)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(chat_buf(), 0, -1, true)) do
    if l:find(needle, 1, true) then return i - 1 end
  end
  return -1
end
-- regex-syntax groups anywhere in the buffer (none should be markdownError)
function P.syntax_groups()
  local buf = chat_buf()
  local seen = {}
  vim.api.nvim_buf_call(buf, function()
    for lnum = 1, vim.api.nvim_buf_line_count(buf) do
      for col = 1, math.max(1, #vim.fn.getline(lnum)) do
        local name = vim.fn.synIDattr(vim.fn.synID(lnum, col, 1), "name")
        if name ~= "" then seen[name] = true end
      end
    end
  end)
  return vim.tbl_keys(seen)
end
"""


def probes(ed: Editor) -> Editor:
    ed.lua(PROBES)
    return ed


def tool_lines(ed: Editor) -> list[dict[str, Any]]:
    """The virtual-text lines of tool calls and answers, as shown (text and highlight chunks)."""
    return [{"text": v["text"], "chunks": v["chunks"]} for v in ed.lua("return P.virt_lines()")
            if v["text"].lstrip().startswith(("- ", "→"))]


def test_tool_lines_are_virtual_text_no_syntax_misreads_and_the_answer_is_shown(editor, llm: FakeLLM) -> None:
    ed = probes(editor())
    ed.answer("spaces")
    llm.add({"text": "Reading.", "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Tabs or spaces?",
                                                                 "options": ["tabs", "spaces"]}}]},
            {"text": "Noted: **spaces** in `edit_file` calls."})
    chat = ed.prompt("read_file and ask_user please")
    assert "- [ok] read_file src/app.py" in chat
    assert "- [ok] ask_user Tabs or spaces?\n    → spaces" in chat, chat

    buf = ed.lua("return vim.fn.bufnr('^toycoder://chat$')")
    assert ed.lua("return vim.treesitter.highlighter.active[...] ~= nil", buf), "treesitter is not highlighting"
    assert ed.lua("return vim.bo[...].syntax", buf) == "", "the regex syntax still runs"
    groups = ed.lua("return P.syntax_groups()")
    assert "markdownError" not in groups, groups

    virt = ed.lua("return P.virt_lines()")
    tools = [v for v in virt if v["text"].startswith("- [")]
    assert [v["text"] for v in tools] == ["- [ok] read_file src/app.py", "- [ok] ask_user Tabs or spaces?"]
    for v in virt:
        assert v["line"] == "", f"a virtual-text line has buffer text a parser could misread: {v}"
        row = v["row"]
        captures = ed.lua("return P.captures(...)", row, 0)
        assert not [c for c in captures if "error" in c.lower()], captures
    ok = [c for c in tools[0]["chunks"] if c[0] == "ok"]
    assert ok and ok[0][1] == "ToyCoderToolOk"
    assert ed.lua("return vim.api.nvim_get_hl(0, {name = 'ToyCoderToolOk'}).link") == "DiagnosticOk"
    answer = [v for v in virt if "→" in v["text"]]
    assert answer and answer[0]["chunks"][0][1] == "ToyCoderAnswer"


def test_markdown_is_concealed_and_fenced_code_is_highlighted_by_its_parser(editor, llm: FakeLLM) -> None:
    ed = probes(editor())
    reply = ("Here is **bold** text.\n\n```lua\nlocal answer = 42\n```\n\n"
             "```python\ndef f():\n    return 1\n```\n")
    llm.add({"text": reply})
    ed.prompt("show me code")
    win = ed.lua("return T.chat_win()")
    assert ed.lua("return vim.wo[...].conceallevel", win) == 2

    bold = ed.lua("return P.row_of('Here is **bold**')")
    col = len("Here is ")
    assert "markdown_inline:conceal" in ed.lua("return P.captures(...)", bold, col), "** is not concealed"
    lua_row = ed.lua("return P.row_of('local answer = 42')")
    assert "lua:keyword" in ed.lua("return P.captures(...)", lua_row, 0), "the lua block is not highlighted"

    # Python's parser does not ship with Neovim: highlighted when installed, plain when not.
    py_row = ed.lua("return P.row_of('def f():')")
    langs = {c.split(":")[0] for c in ed.lua("return P.captures(...)", py_row, 0)}
    has_python = ed.lua("pcall(vim.treesitter.language.add, 'python')\n"
                        "return (pcall(vim.treesitter.language.inspect, 'python'))")
    if has_python:
        assert "python" in langs, langs
    else:
        assert langs == {"markdown"}, langs  # only the code block itself, no error, no guess

    # a reply cut inside a code block is closed, so the next turn is not shown as code
    llm.add({"text": "Start:\n```lua\nlocal unfinished ="}, {"text": "Second answer."})
    ed.prompt("half a block")
    ed.prompt("next")
    buffer = ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('^toycoder://chat$'), 0, -1, true)")
    heading = max(i for i, line in enumerate(buffer) if line == "## You")
    assert "markdown:markup.heading.2" in ed.lua("return P.captures(...)", heading, 0)


def test_render_markdown_when_loaded_manages_conceal_itself(editor) -> None:
    ed = editor()
    ed.cmd("ToyCoder")
    assert ed.lua("return vim.wo[T.chat_win()].conceallevel") == 2
    ed = editor()  # a Neovim where render-markdown.nvim is loaded (a stand-in module: only its presence counts)
    ed.lua("package.loaded['render-markdown'] = { setup = function() end }")
    ed.cmd("ToyCoder")
    assert ed.lua("return vim.wo[T.chat_win()].conceallevel") == 0
    buf = ed.lua("return vim.fn.bufnr('^toycoder://chat$')")
    assert ed.lua("return vim.bo[...].filetype", buf) == "markdown"  # what it attaches to
    assert ed.lua("return vim.treesitter.highlighter.active[...] ~= nil", buf)  # what it needs
    ed.cmd("checkhealth toycoder")
    report = ed.lua("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    assert "render-markdown.nvim is loaded" in report and "treesitter parser markdown_inline" in report, report


def test_live_and_restored_tool_lines_are_identical(editor, llm: FakeLLM) -> None:
    ed = probes(editor())
    ed.answer("spaces")
    ed.answer_input(False)
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope.py"}}]},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "x\n"}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Tabs or spaces?",
                                                                 "options": ["tabs", "spaces"]}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Anything else?"}}]},
            {"text": "Done."})
    ed.cmd("ToyCoder do several things")
    ed.decide("d")
    ed.wait_idle()
    live = tool_lines(ed)
    texts = [t["text"] for t in live]
    assert texts[0] == "- [ok] read_file src/app.py"
    assert texts[1].startswith("- [failed] read_file nope.py — ")
    assert texts[2:] == ["- [denied] write_file README.md", "- [ok] ask_user Tabs or spaces?", "    → spaces",
                         "- [ok] ask_user Anything else?", "    → (no answer)"], texts
    first = ed.lua("return require('toycoder').session_id()")

    ed.prompt("/new other")
    assert tool_lines(ed) == []
    restored_chat = ed.prompt(f"/switch {first}")
    assert "Done." in restored_chat
    restored = tool_lines(ed)
    assert restored == live, f"live:\n{texts}\nrestored:\n{[t['text'] for t in restored]}"
    assert "[done]" not in restored_chat


def test_short_titles_are_cut_on_the_right_never_the_left(editor, llm: FakeLLM, workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    ed = editor()
    ed.cmd("edit src/app.py")
    llm.add({"text": "It adds."})
    ed.cmd("1,2ToyCoder explain this")
    ed.wait_idle()
    win = ed.lua("return T.chat_win()")
    assert ed.lua("return vim.wo[...].winbar", win) == " ToyCoder: explain this"
    first = ed.lua("return require('toycoder').session_id()")

    long = "please explain what every function in this project does and why it was written that way"
    ed.prompt(f"/new {long}")
    width = ed.lua("return vim.api.nvim_win_get_width(...)", win)
    bar = ed.lua("return vim.wo[...].winbar", win)
    assert bar.startswith(" ToyCoder: please explain"), bar
    assert bar.endswith("…") and ed.lua("return vim.fn.strdisplaywidth(...)", bar) <= width, (bar, width)

    chat = ed.prompt(f"/switch {first}")  # the daemon's title is the whole prompt, fence included
    assert chat.startswith("# explain this\n"), chat
    assert ed.lua("return vim.wo[...].winbar", win) == " ToyCoder: explain this"
    ed.answer("explain this")
    ed.cmd("ToyCoderSessions")
    ed.wait(lambda: ed.lua("return #T.selects") == 1, "the session picker")
    items = ed.lua("return T.selects[1].items")
    assert any(i.endswith("2 msgs  explain this") for i in items), items
    assert not any("```" in i for i in items), items
    ed.wait_idle()


def test_help_opens_with_a_plain_runtimepath_and_the_shipped_tags_are_current(tmp_path: Path) -> None:
    assert NVIM
    nv = pynvim.attach("child", argv=[NVIM, "--embed", "--headless", "--clean", "-n", "-i", "NONE"])
    try:
        nv.command(f"set rtp+={PLUGIN}")  # the documented install without a plugin manager
        nv.command("help toycoder")
        assert nv.eval("expand('%:t')") == "toycoder.txt" and nv.eval("&filetype") == "help"
        assert "*toycoder*" in nv.eval("getline('.')")
        nv.command("help toycoder-markdown")
        assert "*toycoder-markdown*" in nv.eval("getline('.')")
    finally:
        nv.close()
    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    (doc / "tags").unlink()
    subprocess.run([NVIM, "--clean", "--headless", "-c", f"helptags {doc}", "-c", "qa!"], check=True, timeout=30)
    assert (doc / "tags").read_text() == (PLUGIN / "doc" / "tags").read_text(), \
        "doc/tags is stale: run `nvim --clean --headless -c 'helptags clients/neovim/doc' -c q`"


def test_a_starting_line_shows_while_the_daemon_starts(editor, llm: FakeLLM) -> None:
    slow = ["sh", "-c", f'sleep 1; exec "{sys.executable}" -m toycoder_daemon "$@"', "sh"]
    ed = editor(cmd=slow)
    llm.add({"text": "Hello there."})
    ed.cmd("ToyCoder hello")
    assert ed.chat() == "starting ToyCoder…"  # at once: the daemon is still sleeping
    ed.wait_idle()
    chat = ed.chat()
    assert "starting ToyCoder" not in chat and chat.startswith("## You\n\nhello\n\n## ToyCoder\n\nHello there.")


def test_a_turn_waiting_for_mcp_servers_shows_a_line_that_says_how_the_wait_ended(editor, llm: FakeLLM) -> None:
    ed = editor(extra=slow_and_mute_mcp_servers(unique_marker("toycoder-nvim-mcp")))
    llm.add({"text": "Hello there."})
    ed.cmd("ToyCoder hello")
    ed.wait_chat("\nstarting MCP servers: toy, mute…")
    ed.wait_idle()
    chat = ed.chat()
    assert "starting MCP servers" not in chat  # the same line, now saying how it ended
    assert chat.startswith("## You\n\nhello\n\n## ToyCoder\n\nMCP servers ready: toy; failed: mute\n\nHello there.")


def internal_words(text: str) -> list[str]:
    return [w for w in ("_transport", "vim/lsp", ".lua", "language server", "stack traceback") if w in text]


def test_a_failed_start_is_explained_in_the_chat_and_one_notification(editor, tmp_path: Path) -> None:
    for cmd, why in [("no-such-toycoder-daemon", "no such executable on $PATH"),
                     (str(tmp_path / "nowhere" / "toycoder-daemon"), "no executable file at that path"),
                     ([sys.executable, "-c", "import sys; sys.exit(3)"], "stopped before it was ready (exit code 3)")]:
        ed = editor(cmd=cmd)
        ed.cmd("ToyCoder hello")
        ed.wait_idle()
        errors = ed.notes(ERROR)
        assert len(errors) == 1 and why in errors[0], errors
        assert ed.lua("return T.chat_win()"), "the chat did not open"
        chat = ed.wait_chat(why)
        assert "starting ToyCoder" not in chat
        messages = ed.lua("return vim.fn.execute('messages')")
        for text in (errors[0], chat, messages):
            assert not internal_words(text), (internal_words(text), text)
        assert "Set `cmd` in require('toycoder').setup()" in chat or "stopped before" in chat, chat


ARTIFACTS = PLUGIN / "tmp" / "artifacts"


def test_the_screen_shows_rendered_markdown_and_tool_lines(editor, llm: FakeLLM, workspace: Path) -> None:
    """What a person sees, from the UI's grid; keeps clients/neovim/tmp/artifacts/chat.{html,png}."""
    ed = editor(width=0.6)
    screen = Screen()
    ed.nv.ui_attach(120, 34, rgb=True, ext_linegrid=True)
    ed.cmd("edit src/app.py")
    ed.answer("spaces")
    llm.add({"text": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Tabs or spaces?",
                                                                 "options": ["tabs", "spaces"]}}]},
            {"text": "It **adds** two numbers with `add`. In Lua:\n\n```lua\nlocal function add(a, b)\n"
                     "  return a + b\nend\n```\n\nIndent with spaces."})
    ed.cmd("1,2ToyCoder explain this")
    ed.wait_idle()
    ed.cmd("redraw!")
    ed.lua("vim.rpcnotify(0, 'screen_done')")
    while True:
        kind, name, args = ed.nv.next_message()
        if kind == "notification" and name == "redraw":
            screen.feed(args)
        elif kind == "notification" and name == "screen_done":
            break
    saved = screen.save(ARTIFACTS / "chat")
    shown = "\n".join(screen.lines())
    assert saved[0].exists()
    assert "- [ok] read_file src/app.py" in shown and "→ spaces" in shown, shown
    assert "ToyCoder: explain this" in shown, shown  # the winbar
    assert "It adds two numbers with add. In Lua:" in shown, shown  # ** and ` concealed
    assert "**" not in shown and "```" not in shown, shown  # fences concealed too
    keyword = screen.find("local function add")
    plain = screen.find("Indent with spaces")
    assert keyword and plain
    assert screen.hl_at(*keyword) != screen.hl_at(*plain), "the lua block is drawn like plain text"
    state = screen.find("[ok]")
    assert state and screen.hl_at(state[0], state[1] + 1) != screen.hl_at(*plain), "the state has no colour"
