"""Neovim with the daemon on another machine (issue 31, docs/remote.md): `cmd` is the ssh-like wrapper
(tests/ssh_like, tests/remote_host.py), so the daemon has its own HOME, config, key and data, and its
own copy of the workspace at the same absolute path. The editor shows the local files; the daemon reads
and writes the remote ones. A prompt, an approved edit and /undo land over there; an edit that went
into a buffer of the local text is never written over the remote file, not even by /undo --force.

Real headless Neovim and the real daemon, through test_neovim's fixture.
"""

from __future__ import annotations

from pathlib import Path

import test_neovim
from remote_host import REMOTE_KEY, Host, make_host
from test_neovim import Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin set up

LOCAL_APP = "def add(a, b):\n    return a + b\n"
REMOTE_APP = "def add(a, b):\n    # the remote checkout has this line\n    return a + b\n"


def remote_editor(editor, tmp_path: Path, llm: FakeLLM, workspace: Path) -> tuple[Editor, Host]:
    host = make_host(tmp_path / "host", workspace, llm.base_url)
    ed = editor(cmd=host.command())
    # no local config: the plugin sends no configPath, the remote daemon reads its own
    ed.lua("require('toycoder.config').options.config = nil")
    return ed, host


def buffer_of(ed: Editor, path: Path) -> list[str]:
    return ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path))


def test_a_prompt_an_edit_and_undo_go_to_the_remote_copy(editor, tmp_path: Path, llm: FakeLLM,
                                                        workspace: Path) -> None:
    ed, host = remote_editor(editor, tmp_path, llm, workspace)
    readme, remote_readme = workspace / "README.md", host.remote("README.md")
    grown = "# Demo\nA bigger project.\nWith more.\n"
    llm.add({"text": "Hello from there."},
            {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": grown}}]},
            {"text": "Written."})
    assert "Hello from there." in ed.prompt("hi")
    assert llm.requests[-1]["headers"]["authorization"] == f"Bearer {REMOTE_KEY}"  # the remote's config
    assert list(host.data.rglob("*.jsonl")), "the session is not kept over there"

    ed.cmd("ToyCoder grow the readme")
    ed.decide("a")
    ed.wait_idle()
    assert "- 1 file changed +2 −1: README.md" in ed.chat_lines(), ed.chat()
    assert remote_readme.read_text() == grown
    assert readme.read_text() == "# Demo\nA tiny project.\n", "the edit landed in the local file"

    # the local file open with unsaved work: what the editor has is neither copy's text
    ed.cmd(f"edit {readme}")
    ed.nv.input("Go# mine, unsaved<Esc>")
    ed.wait(lambda: ed.lua("return vim.bo.modified"), "the buffer to be modified")
    chat = ed.prompt("/undo --force")
    assert "- Restored 1 file changed +1 −2: README.md · Redo: /redo" in chat.split("\n"), chat
    assert remote_readme.read_text() == "# Demo\nA tiny project.\n", "not the remote's own earlier text"
    assert readme.read_text() == "# Demo\nA tiny project.\n"
    assert buffer_of(ed, readme) == ["# Demo", "A tiny project.", "# mine, unsaved"], "the buffer was rewritten"


def test_an_edit_into_a_buffer_of_the_local_text_is_never_written_over_the_remote_file(
        editor, tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """The daemon edits what the editor has open (the local text, through applyEdit) and undoes it
    there; with the buffer closed, /undo --force refuses rather than write buffer text to disk."""
    app = workspace / "src" / "app.py"
    ed, host = remote_editor(editor, tmp_path, llm, workspace)
    remote_app = host.remote("src/app.py")
    remote_app.write_text(REMOTE_APP)  # the two copies differ
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "src/app.py", "old_string": "return a + b",
                                                                 "new_string": "return a + b  # checked"}}]},
            {"text": "Edited."})
    ed.cmd(f"edit {app}")
    ed.cmd("ToyCoder mark it checked")
    ed.decide("a")
    ed.wait_idle()
    assert "- [ok] edit_file src/app.py" in ed.chat(), ed.chat()
    assert buffer_of(ed, app) == ["def add(a, b):", "    return a + b  # checked"]
    assert app.read_text() == "def add(a, b):\n    return a + b  # checked\n", "the clean buffer was not saved"
    assert remote_app.read_text() == REMOTE_APP, "the buffer's text went to the remote file"

    ed.cmd(f"bwipeout {app}")  # the buffer gone, its text (the base of the edit) is nowhere but here
    chat = ed.prompt("/undo --force")
    assert "never written to disk" in chat, chat
    assert remote_app.read_text() == REMOTE_APP, "/undo --force wrote local text over the remote file"
    assert app.read_text() == "def add(a, b):\n    return a + b  # checked\n"

    ed.cmd(f"edit {app}")  # open again: the undo goes through the buffer
    chat = ed.prompt("/undo")
    ed.wait(lambda: buffer_of(ed, app) == ["def add(a, b):", "    return a + b"], "the change taken back in the buffer")
    assert "Restored 1 file changed" in chat, chat
    assert remote_app.read_text() == REMOTE_APP, "the undo wrote the buffer's text to the remote file"
