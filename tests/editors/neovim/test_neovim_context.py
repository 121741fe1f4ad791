"""The editor as context in a real Neovim (issue 29), against the real daemon and the scripted model:
a language server's verdict on an edit reaches the model in the same turn (ruff's own LSP server,
`ruff server`, attached with Neovim's vim.lsp), `:ToyCoderAdd` sends the range's lines with the next
prompt, and `:ToyCoderAttach` sends an image to a vision model."""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path
from typing import Any

import test_neovim
from helpers import write_config
from test_neovim import Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin, the daemon and the scripted model

RUFF = str(Path(sys.executable).parent / "ruff")
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

# ruff's language server for Python buffers, as a person would set it up in Neovim 0.11
RUFF_LSP = r"""
local ruff, root = ...
vim.lsp.config('ruff', { cmd = { ruff, 'server' }, filetypes = { 'python' }, root_dir = root })
vim.lsp.enable('ruff')
"""


SLOW_MACHINE = "tools: {diagnostics: {wait_ms: 6000}}\n"
"""The client answers as soon as the server reports (DiagnosticChanged); a loaded machine may need more
than the default 1.5 s for ruff to lint the edited buffer."""


def user_messages(llm: FakeLLM, request: int = -1) -> list[Any]:
    return [m["content"] for m in llm.requests[request]["body"]["messages"] if m["role"] == "user"]


def ruff_attached(ed: Editor) -> bool:
    return ed.lua("local c = vim.lsp.get_clients({ bufnr = vim.fn.bufnr('calc.py'), name = 'ruff' })[1] "
                  "return c ~= nil and c.initialized == true")


def test_an_edit_that_breaks_the_file_brings_the_language_servers_diagnostic_to_the_model(
        editor, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    ed = editor(extra=SLOW_MACHINE)
    ed.lua(RUFF_LSP, RUFF, str(workspace))
    ed.cmd("edit calc.py")
    ed.wait(lambda: ruff_attached(ed), "ruff server to attach to calc.py")
    assert ed.lua("return #vim.diagnostic.get(0)") == 0, "a clean file has no diagnostics"
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_string": "return a + b",
                                                                "new_string": "return a + y"}}]},
            {"text": "Oops, fixing."})
    ed.cmd("ToyCoder use y")
    ed.decide("a")
    ed.wait_idle()
    assert "- [ok] edit_file calc.py" in ed.chat()
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + y\n"
    # the language server saw the edit in the buffer...
    shown = ed.lua("return vim.tbl_map(function(d) return { d.lnum, d.message, d.source } end, vim.diagnostic.get(vim.fn.bufnr('calc.py')))")
    assert [d[0] for d in shown] == [1] and "`y`" in shown[0][1], shown
    # ...and the model request after the edit_file call carries its verdict, with path, line and source
    [observation] = ed.tool_messages(1)
    assert "\n\nEditor diagnostics after this edit: calc.py:2 " in observation, observation
    note = observation.split("Editor diagnostics after this edit: ", 1)[1]
    assert shown[0][1] in note and f"({shown[0][2]})" in note, note


def test_an_edit_that_keeps_the_file_clean_adds_no_diagnostics(editor, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    ed = editor(extra=SLOW_MACHINE)
    ed.lua(RUFF_LSP, RUFF, str(workspace))
    ed.cmd("edit calc.py")
    ed.wait(lambda: ruff_attached(ed), "ruff server to attach to calc.py")
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_string": "return a + b",
                                                                "new_string": "return b + a"}}]},
            {"text": "Swapped."})
    ed.cmd("ToyCoder swap")
    ed.decide("a")
    ed.wait_idle()
    [observation] = ed.tool_messages(1)
    assert "- [ok] edit_file calc.py" in ed.chat()
    assert "Editor diagnostics" not in observation, observation


def test_toycoder_add_sends_the_ranges_lines_with_the_next_prompt_only(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor()
    ed.cmd("edit src/app.py")
    ed.cmd("2ToyCoderAdd")
    assert any("lines 2-2 added to the next prompt (1 item(s))" in n for n in ed.notes())
    ed.cmd("1,2ToyCoderAdd")
    llm.add({"text": "It adds."}, {"text": "Nothing attached."})
    ed.prompt("what does this do?")
    [sent] = user_messages(llm, 0)
    text = sent if isinstance(sent, str) else "\n".join(p.get("text", "") for p in sent)
    assert text.startswith("what does this do?"), text
    assert ("Selected in src/app.py (lines 2-2):\n     2\t    return a + b\n\n"
            "Selected in src/app.py (lines 1-2):\n     1\tdef add(a, b):\n     2\t    return a + b") in text, text
    ed.prompt("and now?")
    later = user_messages(llm, 1)[-1]
    assert "def add" not in (later if isinstance(later, str) else str(later)), "the items went with one prompt only"


def test_toycoder_attach_sends_the_image_to_a_vision_model(editor, llm: FakeLLM, tmp_path: Path) -> None:
    image = tmp_path / "pixel.png"
    image.write_bytes(PNG)
    cfg = write_config(tmp_path / "vision.yaml", llm)
    cfg.write_text(cfg.read_text().replace("default: fake-model", "default: fake-vision")
                   .replace("    models:", "    vision_models: [fake-vision]\n    models:"))
    ed = editor(config=str(cfg))
    ed.cmd(f"ToyCoderAttach {image}")
    assert any("pixel.png attached to the next prompt" in n for n in ed.notes())
    llm.add({"text": "A single pixel."})
    ed.prompt("what is this?")
    assert "A single pixel." in ed.chat()
    assert llm.requests[0]["body"]["model"] == "fake-vision"
    [parts] = user_messages(llm, 0)
    assert parts[0] == {"type": "text", "text": "what is this?"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}


def test_toycoder_attach_to_a_model_without_vision_is_refused_before_anything_is_sent(
        editor, llm: FakeLLM, tmp_path: Path) -> None:
    image = tmp_path / "pixel.png"
    image.write_bytes(PNG)
    ed = editor()
    ed.cmd(f"ToyCoderAttach {image}")
    ed.cmd("ToyCoder what is this?")
    ed.wait(lambda: any("does not take images" in n for n in ed.notes()) or "does not take images" in ed.chat(),
            "the refusal")
    ed.wait_idle()
    assert llm.requests == []
    ed.cmd("ToyCoderAttach notes.txt")
    assert any("attach a png, jpeg, gif or webp image" in n for n in ed.notes(test_neovim.WARN))


# A diagnostics producer set up in the test, as a linter plugin would be: it reports on a buffer as soon
# as its text changes (scheduled: no diagnostics inside on_lines), an error on each line holding `y`.
PRODUCER = r"""
local ns = vim.api.nvim_create_namespace("test_lint")
local function lint(buf)
  local found = {}
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:find("y", 1, true) then
      table.insert(found, { lnum = i - 1, col = 0, message = "undefined name 'y'", severity = vim.diagnostic.severity.ERROR, source = "testlint" })
    end
  end
  vim.diagnostic.set(ns, buf, found)
end
for _, buf in ipairs(vim.api.nvim_list_bufs()) do
  if vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == "" then
    lint(buf)
    vim.api.nvim_buf_attach(buf, false, { on_lines = function() vim.schedule(function() lint(buf) end) end })
  end
end
"""

HANDLE = ("local t = vim.uv.hrtime() local r = require('toycoder.diagnostics').handle(...) "
          "return { (vim.uv.hrtime() - t) / 1e6, #r.items[1].diagnostics }")
"""The plugin's toycoder/diagnostics handler called in Neovim: how long it took (ms), and how many
diagnostics the first file has."""


def test_diagnostics_reported_before_the_request_are_answered_at_once(editor, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    ed = editor(extra="tools: {diagnostics: {wait_ms: 30000}}\n")  # the most the config takes
    ed.cmd("edit calc.py")
    ed.lua(PRODUCER)
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "calc.py", "old_string": "return a + b",
                                                                "new_string": "return a + y"}}]},
            {"text": "Oops, fixing."})
    ed.cmd("ToyCoder use y")
    ed.decide("a")
    started = time.monotonic()
    ed.wait_idle(45)
    # the producer reported before the daemon asked: nothing to wait for (the old handler waited wait_ms)
    assert time.monotonic() - started < 20
    [observation] = ed.tool_messages(1)
    assert "Editor diagnostics after this edit: calc.py:2 error: undefined name 'y' (testlint)" in observation, observation
    # the handler itself: current diagnostics at once; after an edit not yet reported, it waits for the
    # report; a write (which moves b:changedtick on) changes no text: still current
    params = {"uris": [(workspace / "calc.py").as_uri()], "waitMs": 5000}
    took = ed.lua(HANDLE, params)
    assert took[0] < 1000 and took[1] == 1, took
    took = ed.lua("vim.api.nvim_buf_set_lines(vim.fn.bufnr('calc.py'), 1, 2, true, { '    return a + b' }) " + HANDLE,
                  params)
    assert took[1] == 0, took  # the report after the edit (nothing left), not the one before it
    tick = ed.lua("return vim.b[vim.fn.bufnr('calc.py')].changedtick")
    ed.cmd("buffer calc.py | write")
    assert ed.lua("return vim.b[vim.fn.bufnr('calc.py')].changedtick") > tick
    took = ed.lua(HANDLE, params)
    assert took[0] < 1000 and took[1] == 0, took


def test_diagnostics_find_the_buffer_by_its_exact_name_not_as_a_pattern(editor, llm: FakeLLM, workspace: Path) -> None:
    for name, text in [("a[1].py", "x = 1\n"), ("a1.py", "x = y\n"), ("x*.py", "z = y\n"), ("xy.py", "z = 1\n")]:
        (workspace / name).write_text(text)
    ed = editor()
    for name in ["a1.py", "a[1].py", "xy.py", "x*.py"]:
        ed.lua("vim.cmd.edit(vim.fn.fnameescape(...))", name)
    # nothing reports on these buffers yet and no language server is attached: nothing to wait for
    took = ed.lua(HANDLE, {"uris": [(workspace / "a[1].py").as_uri()], "waitMs": 5000})
    assert took[0] < 1000 and took[1] == 0, took
    ed.lua(PRODUCER)
    llm.add({"tool_calls": [{"name": "get_diagnostics", "arguments": {"path": "a[1].py"}},
                            {"name": "get_diagnostics", "arguments": {"path": "x*.py"}}]},
            {"text": "Read them."})
    ed.prompt("what do the linters say?")
    clean, broken = ed.tool_messages(1)
    assert "undefined name" not in clean, clean  # a[1].py is clean: a1.py's error is not its
    assert "undefined name 'y'" in broken, broken  # x*.py's own error (xy.py is clean)
