"""Reviewing a proposed change in Neovim (issue 11): the permission window is focused and scrollable,
its keys answer the request, `D` opens a real :diffthis tab, and closing it any other way denies.

Real headless Neovim, the real daemon and the scripted model, through the fixtures of test_neovim.
"""

from __future__ import annotations

from pathlib import Path

import test_neovim
from test_neovim import Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin, the daemon and the scripted model

WARN = 3


def numbered(n: int, tag: str = "line") -> str:
    return "".join(f"{tag} {i:03d}\n" for i in range(1, n + 1))


def write(path: str, content: str) -> dict:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


def current_win(ed: Editor) -> int:
    return ed.lua("return vim.api.nvim_get_current_win()")


def test_a_120_line_proposal_is_scrolled_to_its_end_with_G_then_a_writes_it(editor, llm: FakeLLM,
                                                                            workspace: Path) -> None:
    ed = editor()
    ed.cmd("edit README.md")
    start = current_win(ed)
    content = numbered(120)
    llm.add(write("big.txt", content), {"text": "Written."})
    ed.cmd("ToyCoder write a big file")
    shown = ed.review()
    win, total = shown["win"], shown["lines"]
    assert total == 123  # ---, +++, @@ and 120 added lines
    assert shown["float"] and shown["focused"] and f"{total} lines" in shown["footer"], shown["footer"]
    assert "a allow once" in shown["footer"] and "A always" in shown["footer"] and "D diff tab" in shown["footer"]
    height = ed.lua("return vim.api.nvim_win_get_height(...)", win)
    assert height < total, "the proposal fits the screen: the test would not show scrolling"
    assert ed.lua("return vim.fn.line('w$', ...)", win) < total
    assert not (workspace / "big.txt").exists()

    ed.nv.input("G")
    ed.wait(lambda: ed.lua("return vim.api.nvim_win_get_cursor(...)[1]", win) == total, "G to reach the last line")
    assert ed.lua("return vim.fn.line('w$', ...)", win) == total, "the last line is not on the screen"
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(...), -2, -1, false)[1]", win) == \
        "+line 120"
    ed.nv.input("gg<C-d>")  # the other motions work too
    ed.wait(lambda: ed.lua("return vim.api.nvim_win_get_cursor(...)[1]", win) > 1, "<C-d> to scroll")
    ed.nv.input("a")
    ed.wait_idle()
    assert (workspace / "big.txt").read_text() == content
    assert "- [ok] write_file big.txt" in ed.chat()
    assert not ed.lua("return vim.api.nvim_win_is_valid(...)", win), "the window stayed open after the decision"
    assert current_win(ed) in (start, ed.lua("return T.chat_win()"))
    assert ed.lua("return #T.selects") == 0


def test_d_denies_in_a_split_with_the_keys_in_its_winbar_and_closing_it_denies_too(editor, llm: FakeLLM,
                                                                                  workspace: Path) -> None:
    ed = editor(permission={"layout": "split"})
    llm.add(write("README.md", "gone\n"), {"text": "Fine."})
    ed.cmd("ToyCoder replace the readme")
    shown = ed.decide("d")
    ed.wait_idle()
    assert not shown["float"] and "a allow once" in shown["winbar"]
    assert f"{shown['lines']} lines" in shown["winbar"] and "write_file README.md" in shown["winbar"]
    assert "- [denied] write_file README.md" in ed.chat()
    assert (workspace / "README.md").read_text() == "# Demo\nA tiny project.\n"
    assert not ed.lua("return vim.api.nvim_win_is_valid(...)", shown["win"])

    # :close (or any way of closing the window but a key) is a denial, not a hang
    llm.add(write("README.md", "gone again\n"), {"text": "Fine again."})
    ed.cmd("ToyCoder replace it after all")
    ed.review(2)
    ed.cmd("close")
    ed.wait_idle()
    assert "Fine again." in ed.chat() and ed.chat().count("- [denied] write_file README.md") == 2
    assert (workspace / "README.md").read_text() == "# Demo\nA tiny project.\n"


def test_D_opens_a_diff_tab_of_the_file_and_the_proposal_and_the_decision_closes_it(editor, llm: FakeLLM,
                                                                                   workspace: Path) -> None:
    before = numbered(60)
    after = before.replace("line 005\n", "line 005 changed\n").replace("line 050\n", "").replace(
        "line 060\n", "line 060\nline 061 added\n")
    (workspace / "long.txt").write_text(before)
    ed = editor()
    llm.add(write("long.txt", after), {"text": "Edited."})
    ed.cmd("ToyCoder edit the long file")
    shown = ed.decide("D")
    assert shown["text"].count("\n@@ ") == 3  # three hunks
    ed.wait(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 2, "the diff tab")
    tab = ed.lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          local b = vim.api.nvim_win_get_buf(w)
          table.insert(out, { diff = vim.wo[w].diff, name = vim.api.nvim_buf_get_name(b),
                              lines = vim.api.nvim_buf_get_lines(b, 0, -1, false), buftype = vim.bo[b].buftype })
        end
        return out""")
    assert len(tab) == 2 and all(w["diff"] for w in tab), tab
    current, proposed = tab
    assert current["name"] == str(workspace / "long.txt") and current["buftype"] == ""
    assert current["lines"] == before.splitlines()
    assert proposed["lines"] == after.splitlines()
    assert (workspace / "long.txt").read_text() == before

    ed.nv.input("a")  # the keys work in the proposal's window too
    ed.wait_idle()
    assert (workspace / "long.txt").read_text() == after
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1, "the diff tab stayed open"
    assert not ed.lua("return vim.api.nvim_win_is_valid(...)", shown["win"])
    assert ed.lua("return vim.fn.bufloaded(...)", str(workspace / "long.txt")) == 0, "loaded only for the diff"

    # a buffer the person has open stays, and is what the diff tab shows
    ed.cmd("edit long.txt")
    llm.add(write("long.txt", before), {"text": "Reverted."})
    ed.cmd("ToyCoder put it back")
    ed.decide("D", n=2)
    ed.wait(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 2, "the second diff tab")
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr('long.txt'), 0, -1, false)") == after.splitlines()
    ed.nv.input("d")
    ed.wait_idle()
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(workspace / "long.txt")
    assert (workspace / "long.txt").read_text() == after


def test_D_for_a_new_file_diffs_against_nothing_and_q_goes_back_to_the_request(editor, llm: FakeLLM,
                                                                              workspace: Path) -> None:
    ed = editor()
    llm.add(write("new.py", "print('hi')\nprint('there')\n"), {"text": "Nope then."})
    ed.cmd("ToyCoder add a script")
    shown = ed.decide("D")
    ed.wait(lambda: ed.lua("return #vim.api.nvim_list_tabpages()") == 2, "the diff tab")
    sides = ed.lua("""
        local out = {}
        for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
          table.insert(out, { diff = vim.wo[w].diff, ft = vim.bo[vim.api.nvim_win_get_buf(w)].filetype,
                              bar = vim.wo[w].winbar,
                              lines = vim.api.nvim_buf_get_lines(vim.api.nvim_win_get_buf(w), 0, -1, false) })
        end
        return out""")
    assert [s["diff"] for s in sides] == [True, True]
    assert sides[0]["lines"] == [""] and sides[1]["lines"] == ["print('hi')", "print('there')"]
    assert sides[1]["ft"] == "python"
    assert "current: new.py (a new file)" in sides[0]["bar"] and "a allow once" in sides[1]["bar"]
    ed.nv.input("q")  # back to the request, still pending
    ed.wait(lambda: ed.lua("return T.review_open(1)"), "the request window to be current again")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
    assert ed.lua("return require('toycoder').is_busy()")
    ed.nv.input("d")
    ed.wait_idle()
    assert not (workspace / "new.py").exists() and "- [denied] write_file new.py" in ed.chat()
    assert not ed.lua("return vim.api.nvim_win_is_valid(...)", shown["win"])


def test_a_request_while_the_chat_is_hidden_is_announced_and_A_allows_always(editor, llm: FakeLLM,
                                                                            workspace: Path) -> None:
    ed = editor()
    llm.add(dict(write("a.txt", "one\n"), delay=0.5), write("b.txt", "two\n"), {"text": "Both written."})
    ed.cmd("ToyCoder write two files")
    ed.cmd("ToyCoder")  # hide the chat before the request comes
    assert ed.lua("return T.chat_win()") is None
    ed.decide("A")
    ed.wait_idle()
    announced = [n for n in ed.notes(WARN) if "ToyCoder wants to write_file a.txt" in n]
    assert announced and "a allow once" in announced[0], ed.notes()
    # allow_always covers write_file for the rest of the session: the second write is not asked
    assert (workspace / "a.txt").read_text() == "one\n" and (workspace / "b.txt").read_text() == "two\n"
    assert ed.lua("return #T.reviews") == 1


def test_the_proposal_is_rebuilt_from_the_diff_strictly(editor) -> None:
    ed = editor()
    apply = "local r, e = require('toycoder.patch').apply(...) return {r = r or vim.NIL, e = e or ''}"
    diff = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n--- b\n+-- B\n c\n\\ No newline at end of file\n"
    assert ed.lua(apply, ["a", "-- b", "c"], diff) == {"r": ["a", "-- B", "c"], "e": ""}
    assert ed.lua(apply, ["a\r", "-- b\r", "c\r"], diff)["r"] == ["a", "-- B", "c"]  # CRLF files
    got = ed.lua(apply, ["a", "x", "c"], diff)
    assert got["r"] is None and "line 2 differs" in got["e"]
    insert = "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+top\n"
    assert ed.lua(apply, ["a"], insert)["r"] == ["top", "a"]
    assert ed.lua("return {require('toycoder.patch').sides(...)}", diff) == [["a", "-- b", "c"], ["a", "-- B", "c"]]


def test_keys_typed_before_the_window_is_armed_do_not_answer_it(editor, llm: FakeLLM, workspace: Path) -> None:
    ed = editor(permission={"arm_ms": 2500})
    llm.add(write("x.txt", "x\n"), {"text": "ok"})
    ed.cmd("ToyCoder write x")
    ed.wait(lambda: ed.lua("return #T.reviews") == 1, "the permission window")
    shown = ed.lua("return T.reviews[1]")
    ed.nv.input("a")  # meant for the buffer the person was typing in
    ed.wait(lambda: any("read the proposal first" in n for n in ed.notes()), "the early key to be refused")
    assert ed.lua("return vim.api.nvim_win_is_valid(...)", shown["win"]) and not (workspace / "x.txt").exists()
    ed.decide("a")
    ed.wait_idle()
    assert (workspace / "x.txt").read_text() == "x\n"
