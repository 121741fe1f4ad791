"""The Neovim client (clients/neovim) in a real headless Neovim, against the real daemon and the
scripted model server.

Each test starts `nvim --embed --headless --clean` with the plugin on the runtimepath, drives it with
pynvim and lets the plugin start `python -m toycoder_daemon` itself. Only vim.notify, vim.ui.select
and vim.ui.input are replaced (to record messages and to answer prompts); the plugin and the daemon
run unmodified.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, write_config
from nvim_process import PICK, Nvim
from waiting import DEFAULT_TIMEOUT, scaled, wait_until

from toycoder_daemon.testing.fake_llm import FakeLLM

PLUGIN = ROOT / "clients" / "neovim"
ERROR = 4  # vim.log.levels.ERROR
WARN = 3

# Test-side harness, loaded into Neovim: records vim.notify, answers vim.ui.select / vim.ui.input
# from queues, and snapshots what the screen shows when a prompt opens.
HARNESS = r"""
local T = { notes = {}, selects = {}, inputs = {}, answers = {}, input_answers = {}, held = nil }
_G.T = T
vim.notify = function(msg, level)
  table.insert(T.notes, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end
function T.floats()
  local out = {}
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    local cfg = vim.api.nvim_win_get_config(w)
    if cfg.relative ~= "" then
      local b = vim.api.nvim_win_get_buf(w)
      table.insert(out, { ft = vim.bo[b].filetype, text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "\n"),
                          chat = vim.b[b].toycoder_chat == true })
    end
  end
  return out
end
-- what the chat shows: its text with the inline virtual text (tool lines, notices) in place
function T.chat()
  if vim.fn.bufnr("^toycoder://chat$") < 0 then return "" end
  return table.concat(require("toycoder.chat").display_lines(), "\n")
end
function T.chat_win()
  local b = vim.fn.bufnr("^toycoder://chat$")
  for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.api.nvim_win_get_buf(w) == b then return w end
  end
  return nil
end
vim.ui.select = function(items, opts, cb)
  local shown = {}
  for _, it in ipairs(items) do table.insert(shown, opts.format_item and opts.format_item(it) or it) end
  table.insert(T.selects, { items = shown, prompt = opts.prompt, kind = opts.kind, floats = T.floats(),
                            chat = T.chat(), status = require("toycoder").statusline() })
  local a = table.remove(T.answers, 1)
  if a == "hold" then T.held = cb return end
  T.pick(a, items, shown, cb)
end
-- the permission window: what it showed when it opened
T.reviews = {}
vim.api.nvim_create_autocmd("User", { pattern = "ToyCoderPermission", callback = function(ev)
  local b, w = ev.data.buf, ev.data.win
  local footer = vim.api.nvim_win_get_config(w).footer
  if type(footer) == "table" then
    local parts = {}
    for _, chunk in ipairs(footer) do table.insert(parts, type(chunk) == "table" and chunk[1] or chunk) end
    footer = table.concat(parts)
  end
  table.insert(T.reviews, { buf = b, win = w, ft = vim.bo[b].filetype, lines = vim.api.nvim_buf_line_count(b),
    text = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), "\n"),
    float = vim.api.nvim_win_get_config(w).relative ~= "", footer = footer or "", winbar = vim.wo[w].winbar,
    focused = vim.api.nvim_get_current_win() == w, chat = T.chat(), status = require("toycoder").statusline() })
end })
function T.review_open(i)
  local r = T.reviews[i]
  return r ~= nil and vim.api.nvim_win_is_valid(r.win) and vim.api.nvim_get_current_win() == r.win
    and vim.b[r.buf].toycoder_armed == true
end
vim.ui.input = function(opts, cb)
  table.insert(T.inputs, { prompt = opts.prompt })
  local a = table.remove(T.input_answers, 1)
  vim.schedule(function() if a then cb(a) else cb(nil) end end)
end
""" + PICK


class Editor(Nvim):
    def __init__(self, llm: FakeLLM, workspace: Path, log: Path, rtp: list[Path] | None = None,
                 watchdog: float = 50):
        super().__init__([PLUGIN, *(rtp or [])], watchdog_seconds=watchdog)
        self.llm = llm
        self.workspace = workspace
        self.log = log

    def cmd(self, command: str) -> None:
        self.nv.command(command)

    def chat(self) -> str:
        return self.lua("return T.chat()")

    def chat_lines(self) -> list[str]:
        return self.chat().split("\n")

    def notes(self, level: int | None = None) -> list[str]:
        return [n["msg"] for n in self.lua("return T.notes") if level is None or n["level"] == level]

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return wait_until(predicate, timeout, what, describe=self.describe)

    def describe(self) -> str:
        log = self.log.read_text()[-3000:] if self.log.exists() else "(no daemon log)"
        return f"--- chat:\n{self.chat()}\n--- notes: {self.notes()}\n--- daemon log:\n{log}"

    def wait_chat(self, needle: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        return self.wait(lambda: needle in self.chat() and self.chat(), f"{needle!r} in the chat", timeout)

    def wait_idle(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.wait(lambda: not self.lua("return require('toycoder').is_busy()"), "the turn to end", timeout)

    def prompt(self, text: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        """:ToyCoder <text> and wait until its turn has ended; returns the chat."""
        self.cmd(f"ToyCoder {text}")
        self.wait_idle(timeout)
        return self.chat()

    def answer(self, *choices: str | bool) -> None:
        self.lua("for _, a in ipairs(...) do table.insert(T.answers, a) end", list(choices))

    def review(self, n: int = 1) -> dict[str, Any]:
        """Wait for the n-th permission window to be open, focused and its keys armed; what it showed."""
        self.wait(lambda: self.lua("return T.review_open(...)", n), f"permission window #{n}")
        return self.lua("return T.reviews[...]", n)

    def decide(self, keys: str, n: int = 1) -> dict[str, Any]:
        """Press `keys` in the n-th permission window once it is open; what it showed."""
        shown = self.review(n)
        self.nv.input(keys)
        return shown

    def answer_input(self, *answers: str | bool) -> None:
        self.lua("for _, a in ipairs(...) do table.insert(T.input_answers, a) end", list(answers))

    def tool_messages(self, request: int = -1) -> list[str]:
        return [m["content"] for m in self.llm.requests[request]["body"]["messages"] if m["role"] == "tool"]


@pytest.fixture
def editor(tmp_path: Path, workspace: Path, llm: FakeLLM) -> Iterator[Callable[..., Editor]]:
    """editor(cwd=..., extra=yaml, rtp=[more plugins], watchdog=seconds, **setup_options) -> an Editor with
    the plugin set up (killed after `watchdog` seconds, scaled, whatever happens)."""
    started: list[Editor] = []

    def start(*, cwd: Path | None = None, extra: str = "", rtp: list[Path] | None = None, watchdog: float = 50,
              **options: Any) -> Editor:
        n = len(started)
        cfg = write_config(tmp_path / f"nvim-config{n}.yaml", llm, extra=extra)
        log = tmp_path / f"daemon{n}.log"
        ed = Editor(llm, workspace, log, rtp, watchdog)
        started.append(ed)
        ed.cmd(f"cd {cwd or workspace}")
        ed.lua(HARNESS)
        opts = {"cmd": [sys.executable, "-m", "toycoder_daemon"], "config": str(cfg), "log_file": str(log),
                "sync": {"debounce_ms": 50}, **options}
        ed.lua("require('toycoder').setup(...)", opts)
        return ed

    yield start

    for ed in started:
        try:
            messages = ed.lua("return vim.fn.execute('messages')")
            internal = [m for m in ed.notes(ERROR) if "internal error" in m]
        except Exception:  # Neovim already gone (killed by the watchdog)
            messages, internal = "", []
        leftovers = ed.quit()
        assert "stack traceback" not in messages and "Error executing" not in messages, messages
        assert not internal, internal
        assert not leftovers, "the daemon outlived Neovim"


def reply_after_last_header(chat: str) -> str:
    return chat.rsplit("## ToyCoder\n", 1)[-1]


# ---- the chat window and streaming --------------------------------------------------------------

def test_chat_toggles_and_streams_the_reply_in_order(editor, llm: FakeLLM) -> None:
    ed = editor()
    ed.cmd("ToyCoder")
    win = ed.lua("return T.chat_win()")
    assert win, "the chat window did not open"
    assert ed.lua("return vim.api.nvim_get_current_win()") == win
    buf = ed.lua("return vim.fn.bufnr('^toycoder://chat$')")
    assert ed.lua("return vim.bo[...].filetype", buf) == "markdown"
    assert ed.lua("return vim.bo[...].modifiable", buf) is False
    typed = ed.lua("return pcall(vim.cmd, 'normal! ityped by accident')")
    assert typed is False and "typed by accident" not in ed.chat()
    ed.cmd("ToyCoder")
    assert ed.lua("return T.chat_win()") is None, ":ToyCoder did not close the chat"
    ed.lua("require('toycoder').setup(vim.tbl_extend('force', require('toycoder.config').options, {layout = 'float'}))")
    ed.cmd("ToyCoder")
    assert ed.lua("return vim.api.nvim_win_get_config(T.chat_win()).relative") == "editor"
    ed.cmd("ToyCoder")
    ed.lua("require('toycoder').setup(vim.tbl_extend('force', require('toycoder.config').options, {layout = 'tab'}))")
    ed.cmd("ToyCoder")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 2 and ed.lua("return T.chat_win()")
    ed.cmd("ToyCoder")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1 and ed.lua("return T.chat_win()") is None
    ed.lua("require('toycoder').setup(vim.tbl_extend('force', require('toycoder.config').options, {layout = 'vsplit'}))")

    reply = "The quick brown fox jumps over the lazy dog.\nSecond line, still streaming."
    llm.add({"text": reply, "chunk_size": 4, "chunk_delay": 0.04, "usage": {"prompt_tokens": 11, "completion_tokens": 7}})
    ed.cmd("ToyCoder tell me a story")
    assert ed.lua("return T.chat_win()"), "a prompt opens the chat"
    snapshots, statuses = [], []

    def sample_until_idle() -> bool:
        if not ed.lua("return require('toycoder').is_busy()"):
            return True
        if "## ToyCoder\n" in ed.chat():
            snapshots.append(reply_after_last_header(ed.chat()).strip("\n"))
        statuses.append(ed.lua("return require('toycoder').statusline()"))
        return False

    ed.wait(sample_until_idle, "the streamed reply to end")
    chat = ed.chat()
    assert "## You\n\ntell me a story\n\n## ToyCoder\n\n" + reply in chat
    assert "\ntokens: 11 prompt, 7 completion" in chat
    partial = {s for s in snapshots if s and not s.startswith(reply)}
    assert len(partial) >= 3, f"the reply did not stream: {snapshots}"
    assert all(reply.startswith(s) for s in partial), "streamed text arrived out of order"
    assert any(s.startswith("ToyCoder: ") for s in statuses), f"no $/progress status: {set(statuses)}"
    assert ed.lua("return require('toycoder').statusline()") == ""
    assert llm.requests[0]["body"]["messages"][-1]["content"] == "tell me a story"

    # the chat window follows the stream when its cursor is at the end, and stays put otherwise
    win = ed.lua("return T.chat_win()")
    assert ed.lua("return vim.api.nvim_win_get_cursor(...)[1]", win) == ed.lua("return vim.api.nvim_buf_line_count(...)", buf)
    ed.lua("vim.api.nvim_win_set_cursor(..., {1, 0})", win)
    llm.add({"text": "Another answer.", "chunk_delay": 0.02})
    ed.prompt("again")
    assert "Another answer." in ed.chat()
    assert ed.lua("return vim.api.nvim_win_get_cursor(...)[1]", win) == 1, "the cursor jumped"


def test_tool_lines_update_in_place_and_subagents_are_indented(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add(
        {"text": "Let me look.", "tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope.py"}}]},
        {"tool_calls": [{"name": "planner", "arguments": {"query": "Add subtract()"}}]},
        {"text": "1. Read app.py\n2. Add subtract"},  # the planner's own reply
        {"text": "Done."},
    )
    lines = ed.prompt("look around").split("\n")

    def index(prefix: str) -> int:
        matches = [i for i, line in enumerate(lines) if line.startswith(prefix)]
        assert matches, f"no line starts with {prefix!r}:\n" + "\n".join(lines)
        return matches[0]

    order = [index("Let me look."), index("- [ok] read_file src/app.py"), index("- [failed] read_file nope.py — "),
             index("- [ok] planner"), index("    1. Read app.py"), index("    2. Add subtract"), index("Done.")]
    assert order == sorted(order), "\n".join(lines)
    assert "[running]" not in "\n".join(lines)


def test_retry_drops_partial_text_and_compaction_is_noticed(editor, llm: FakeLLM) -> None:
    ed = editor(extra="session: {max_messages: 4, compress_keep_recent: 2}\n")
    llm.add({"text": "PARTIAL-GARBAGE", "chunk_size": 4, "drop_after": 2}, {"text": "Clean answer."})
    chat = ed.prompt("first")
    assert "Clean answer." in chat and "\nretrying (attempt 1" in chat
    assert "PART" not in chat and "IAL-" not in chat
    llm.add({"text": "second answer"})
    ed.prompt("second")
    llm.add({"text": "The user asked two things."})
    chat = ed.prompt("/compact")
    assert "\ncontext compacted (summary): 4 -> " in chat
    assert "context summarised" in chat


# ---- permission, questions, reload -------------------------------------------------------------

def test_permission_allow_writes_the_file_and_reloads_its_buffer(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    ed.cmd("edit README.md")
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "# Demo\nA bigger project.\n"}}]},
            {"text": "Written.", "delay": 1})
    ed.cmd("ToyCoder grow the readme")
    shown = ed.decide("a")
    # reloaded as soon as the tool succeeded, while the turn still runs
    ed.wait(lambda: ed.lua("return require('toycoder').is_busy() and "
                           "vim.api.nvim_buf_get_lines(vim.fn.bufnr('README.md'), 1, 2, false)[1] == 'A bigger project.'"),
            "the buffer to reload during the turn")
    ed.wait_idle()
    chat = ed.chat()
    assert ed.lua("return #T.selects") == 0, "permission went through vim.ui.select"
    assert shown["float"] and shown["ft"] == "diff" and shown["focused"]
    assert "-A tiny project." in shown["text"] and "+A bigger project." in shown["text"]
    assert "a allow once" in shown["footer"] and "d/q deny" in shown["footer"]
    assert "- [running] write_file README.md" in shown["chat"]  # the line exists before the answer...
    assert "- [ok] write_file README.md" in chat  # ...and is updated in place
    assert "waiting for your permission" in shown["status"]
    assert (workspace / "README.md").read_text() == "# Demo\nA bigger project.\n"
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('README.md'), 0, -1, false)") == ["# Demo", "A bigger project."]
    assert [f for f in ed.lua("return T.floats()") if not f["chat"]] == [], "the diff float stayed open"


def test_permission_deny_leaves_the_file_and_unsaved_buffers_are_not_clobbered(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "src/app.py", "content": "deleted"}}]},
            {"text": "Understood."})
    ed.cmd("ToyCoder break it")
    ed.decide("d")
    ed.wait_idle()
    chat = ed.chat()
    assert "- [denied] write_file src/app.py" in chat
    assert (workspace / "src" / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "did not allow" in ed.tool_messages()[0]

    ed.cmd("edit README.md")
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'my unsaved words'})")
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "agent text\n"}}]},
            {"text": "Written."})
    ed.cmd("ToyCoder rewrite the readme")
    ed.decide("a", n=2)
    ed.wait_idle()
    # the write goes into the buffer (workspace/applyEdit), not under it: the buffer stays unsaved
    assert (workspace / "README.md").read_text() == "# Demo\nA tiny project.\n"
    assert "- [ok] write_file README.md" in ed.chat()
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('README.md'), 0, -1, false)") == ["agent text"]
    assert ed.lua("return vim.bo[vim.fn.bufnr('README.md')].modified") is True

    # a command shows the command and its cwd instead of a diff
    assert "run_command enabled" in ed.prompt("/tool enable run_command")
    llm.add({"tool_calls": [{"name": "run_command", "arguments": {"command": "rm -rf src"}}]}, {"text": "ok"})
    ed.cmd("ToyCoder clean up")
    preview = ed.decide("q", n=3)  # q denies too
    ed.wait_idle()
    chat = ed.chat()
    assert preview["text"].startswith("$ rm -rf src\n") and preview["ft"] == "sh", preview
    assert f"cwd: {workspace}" in preview["text"]
    assert "\n# sandbox: " in preview["text"]  # the policy it would run under, on its own line
    assert "- [denied] run_command" in chat and (workspace / "src" / "app.py").exists()
    assert ed.lua("return #T.selects") == 0


def test_ask_user_with_options_and_free_text(editor, llm: FakeLLM) -> None:
    ed = editor()
    ed.answer("spaces")
    ed.answer_input("four of them", False)
    llm.add({"tool_calls": [{"name": "ask_user", "arguments": {"question": "Tabs or spaces?", "options": ["tabs", "spaces"]}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "How many?"}}]},
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Anything else?"}}]},
            {"text": "Noted."})
    ed.prompt("format my code")
    asked = ed.lua("return T.selects")
    assert asked[0]["items"] == ["tabs", "spaces"] and asked[0]["prompt"] == "Tabs or spaces?"
    assert [i["prompt"] for i in ed.lua("return T.inputs")] == ["How many? ", "Anything else? "]
    outputs = ed.tool_messages()
    assert outputs[0] == "The user answered: spaces"
    assert outputs[1] == "The user answered: four of them"
    assert "did not answer" in outputs[2]


def test_workspace_trust_is_asked_with_vim_ui_select_and_a_hook_run_is_one_line(editor, llm: FakeLLM,
                                                                                  workspace: Path) -> None:
    (workspace / ".toycoder").mkdir()
    (workspace / ".toycoder" / "settings.yaml").write_text(
        "hooks:\n  UserPromptSubmit:\n    - hooks: [{type: command, command: 'echo from the hook'}]\n"
        "agents:\n  repo_planner: {prompt: planner}\n")
    ed = editor(extra="hooks_workspace_sandbox: false\n")
    ed.answer("Trust")
    llm.add({"text": "Done."})
    chat = ed.prompt("hello")
    asked = ed.lua("return T.selects")
    assert asked[0]["items"] == ["Trust", "Once", "Deny"] and "hook: echo from the hook" in asked[0]["prompt"]
    assert "agent: repo_planner: tools none; model default; prompt planner" in asked[0]["prompt"]
    assert "hook UserPromptSubmit `echo from the hook` ok (" in chat and "ms): from the hook" in chat


def test_cancel_request_and_cancel_close_a_pending_permission_prompt(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor(extra="permissions: {timeout_seconds: 0.5}\n")
    # Nobody answers: the daemon gives up after its timeout and sends $/cancelRequest; the prompt
    # closes while the turn goes on (a slow next reply keeps it running).
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]},
            {"text": "No answer, moving on.", "delay": 1.5})
    ed.cmd("ToyCoder write x")
    ed.wait(lambda: ed.lua("return #T.reviews") == 1, "the permission prompt")
    ed.wait(lambda: ed.lua("""
        local n = 0
        for _, f in ipairs(T.floats()) do if not f.chat then n = n + 1 end end
        return n == 0 and require('toycoder').is_busy()"""), "$/cancelRequest to close the prompt mid-turn")
    ed.wait_idle()
    assert "- [denied] write_file x.txt" in ed.chat() and "No answer, moving on." in ed.chat()

    # :ToyCoderCancel while the prompt is open (no timeout this time)
    ed = editor()
    llm.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}}]})
    ed.cmd("ToyCoder write x again")
    shown = ed.review()
    assert [f["ft"] for f in ed.lua("return T.floats()") if not f["chat"]] == ["diff"]
    ed.cmd("ToyCoderCancel")
    ed.wait_idle()
    assert "\ncancelled" in ed.chat()
    assert [f for f in ed.lua("return T.floats()") if not f["chat"]] == [], "the cancel did not close the prompt"
    assert not ed.lua("return vim.api.nvim_buf_is_valid(...)", shown["buf"])
    assert not (workspace / "x.txt").exists()


# ---- context: selections and unsaved text -------------------------------------------------------

def test_range_prompt_sends_the_selection_and_unsaved_text_reaches_read_file(editor, llm: FakeLLM, workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    ed = editor(cwd=workspace / "src")  # the workspace root is the git root, not the cwd
    ed.cmd("edit app.py")
    llm.add({"text": "It adds."})
    ed.cmd("1,2ToyCoder explain this")
    ed.wait_idle()
    sent = llm.requests[0]["body"]["messages"][-1]["content"]
    assert sent.startswith("explain this\n\n")
    assert "From `src/app.py`, lines 1-2:\n```python\ndef add(a, b):\n    return a + b\n```" in sent

    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'    return b + a  # unsaved'})")
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}, {"text": "ok"})
    ed.prompt("read it")
    assert "return b + a  # unsaved" in ed.tool_messages()[0]
    assert (workspace / "src" / "app.py").read_text() == "def add(a, b):\n    return a + b\n"

    ed.cmd("bwipeout!")  # didClose: the daemon reads the file from disk again
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}, {"text": "ok"})
    ed.prompt("read it again")
    assert "return a + b" in ed.tool_messages()[-1] and "unsaved" not in ed.tool_messages()[-1]


# ---- sessions and commands ----------------------------------------------------------------------

def test_a_command_file_added_while_running_reaches_the_command_completion(editor, llm: FakeLLM,
                                                                          workspace: Path) -> None:
    ed = editor()
    llm.add({"text": "ok"})
    ed.prompt("hello")  # the daemon runs, and the command list is cached
    ed.wait(lambda: ed.lua("return require('toycoder.complete').has_commands()"), "the command list cached")
    assert "/fresh" not in ed.lua("return vim.fn.getcompletion('ToyCoder /fr', 'cmdline')")
    (workspace / ".toycoder" / "commands").mkdir(parents=True)
    (workspace / ".toycoder" / "commands" / "fresh.md").write_text("Brand new: $ARGUMENTS\n")
    # toycoder/commands/changed refreshed the cache: no restart, no new commands/list request
    ed.wait(lambda: "/fresh" in ed.lua("return vim.fn.getcompletion('ToyCoder /fr', 'cmdline')"),
            "/fresh in :ToyCoder's completion")


def test_new_and_switch_change_the_session_and_render_history(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add({"text": "Banana noted."})
    ed.prompt("remember the word banana")
    first = ed.lua("return require('toycoder').session_id()")
    assert first

    assert "/sessions" in ed.lua("return vim.fn.getcompletion('ToyCoder /se', 'cmdline')")
    assert first in ed.lua("return vim.fn.getcompletion(...)", f"ToyCoder /switch {first[:4]}", "cmdline")

    chat = ed.prompt("/new fresh start")
    second = ed.lua("return require('toycoder').session_id()")
    assert second and second != first
    assert "banana" not in chat and chat.startswith("# fresh start")
    llm.add({"text": "Cherry noted."})
    ed.prompt("remember the word cherry")  # a session without messages is never listed (issue 33)

    chat = ed.prompt("/sessions")
    assert first in chat and "fresh start" in chat

    chat = ed.prompt(f"/switch {first[:8]}")
    assert ed.lua("return require('toycoder').session_id()") == first
    assert "## You\n\nremember the word banana" in chat and "Banana noted." in chat
    assert f"switched to {first}" in chat

    ed.answer("fresh start")
    ed.cmd("ToyCoderSessions")
    ed.wait(lambda: ed.lua("return require('toycoder').session_id()") == second, "the picker to switch")
    ed.wait_idle()
    assert "banana" not in ed.chat()

    ed.prompt("/quit")
    assert ed.lua("return T.chat_win()") is None, "/quit did not close the chat"
    assert len(llm.requests) == 2  # no command went to the model


def test_cancel_stops_a_long_stream_and_the_next_prompt_works(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add({"text": "word " * 300, "chunk_size": 5, "chunk_delay": 0.05}, {"text": "After the cancel."})
    ed.cmd("ToyCoder talk for a long time")
    ed.wait_chat("word word word")
    ed.cmd("ToyCoder")  # toggle: close...
    ed.cmd("ToyCoder")  # ...and open it focused, to press <C-c> in it
    assert ed.lua("return vim.api.nvim_get_current_win()") == ed.lua("return T.chat_win()")
    started = time.monotonic()
    ed.nv.input("<C-c>")
    ed.wait_idle(timeout=5)
    assert time.monotonic() - started < scaled(3)
    chat = ed.chat()
    assert "\ncancelled" in chat and chat.count("word") < 300
    after = ed.prompt("are you there?")
    assert "After the cancel." in after
    # nothing of the cancelled turn came later: the chat only grew by the new exchange
    assert after.startswith(chat) and "word" not in after[len(chat):], "text kept arriving after the cancel"


def test_a_crashed_daemon_gives_one_message_and_the_next_command_restarts_it(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add({"text": "Hi!"})
    ed.prompt("hello")
    [first] = ed.daemons()
    llm.add({"text": "never " * 200, "chunk_size": 6, "chunk_delay": 0.05})
    ed.cmd("ToyCoder keep talking")
    ed.wait_chat("never never")
    os.kill(first, signal.SIGKILL)
    ed.wait(lambda: ed.notes(ERROR), "the crash message")
    ed.wait_idle()
    assert "\nthe daemon stopped; this turn is lost" in ed.chat()
    errors = ed.notes(ERROR)  # still one after the next prompt's round trip (checked below)
    assert len(errors) == 1 and "daemon stopped unexpectedly" in errors[0] and ":ToyCoder" in errors[0], errors

    llm.add({"text": "Back again."})
    assert "Back again." in ed.prompt("still there?")
    [second] = ed.daemons()
    assert second != first
    assert ed.notes(ERROR) == errors, "more than one message"
    earlier = [m["content"] for m in llm.requests[-1]["body"]["messages"] if m["role"] == "user"]
    assert earlier[0] == "hello" and earlier[-1] == "still there?"  # same session, resumed from disk


# ---- health -------------------------------------------------------------------------------------

def test_checkhealth_reports_version_config_and_key(editor, tmp_path: Path) -> None:
    ed = editor()
    ed.cmd("checkhealth toycoder")
    report = ed.lua("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    assert "ERROR" not in report, report
    assert "Neovim 0.1" in report and "version: toycoder-daemon 0.1.0" in report
    assert "config is valid" in report and "1 API key(s) configured" in report
    assert "OK protocol version 1, as this plugin's" in report, report  # compared with initialize's (issue 31)
    assert "test-key-1" not in report
    mismatch = ed.lua("return require('toycoder.daemon').protocol_mismatch(2)")
    assert "protocol version 2, this plugin 1: they do not match" in mismatch
    assert "toycoder: sandbox" in report, report
    assert "(mode: auto)" in report or "run_command runs unsandboxed" in report, report  # kernels without Landlock

    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {max_steps: 0}\n")
    ed.lua("require('toycoder').setup(vim.tbl_extend('force', require('toycoder.config').options, {config = ...}))", str(bad))
    ed.cmd("checkhealth toycoder")
    report = ed.lua("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    assert "ERROR invalid config" in report and "max_steps" in report, report

    keyless = tmp_path / "keyless.yaml"
    keyless.write_text("providers:\n  openai:\n    api_keys: ['${NO_SUCH_KEY_VAR:-}']\n")
    ed.lua("require('toycoder').setup(vim.tbl_extend('force', require('toycoder.config').options, {config = ...}))", str(keyless))
    ed.cmd("checkhealth toycoder")
    report = ed.lua("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    assert "config is valid" in report and "ERROR provider openai" in report and "has no API key" in report, report


def test_a_missing_daemon_gives_one_clear_message_and_the_help_file_is_valid(editor, tmp_path: Path) -> None:
    ed = editor(cmd="no-such-toycoder-daemon")
    ed.cmd("ToyCoder hello")
    ed.wait_idle()
    errors = ed.notes(ERROR)
    assert len(errors) == 1 and "cannot start the daemon `no-such-toycoder-daemon" in errors[0], errors
    ed.cmd("checkhealth toycoder")
    report = ed.lua("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')")
    assert "ERROR daemon executable `no-such-toycoder-daemon` not found" in report, report
    assert "install it: pipx install toycoder-daemon   (or: uv tool install toycoder-daemon)" in report, report

    doc = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", doc)
    ed.cmd(f"helptags {doc}")  # raises on duplicate tags
    tags = (doc / "tags").read_text()
    for tag in ("toycoder", ":ToyCoder", ":ToyCoderCancel", ":ToyCoderSessions", "toycoder-config"):
        assert f"{tag}\ttoycoder.txt" in tags, tag
