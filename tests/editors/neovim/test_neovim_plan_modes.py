"""The Neovim chat shows what the daemon now sends (issue 15): the plan as a block updated in
place, the session's mode and title in the winbar (`/mode`, `/title`, `:ToyCoderMode`), a turn
made by another daemon (`session_changed`) by reloading the transcript, a session deleted in another
one (`session_deleted`) as the daemon's notice, and restored turns with the
footer and the cancelled note a live turn ends with.

Real headless Neovim, the real daemon and the scripted model, through the fixtures of test_neovim.
"""

from __future__ import annotations

import test_neovim
from test_neovim import Editor

from toycoder_daemon.testing.fake_llm import FakeLLM

editor = test_neovim.editor  # the fixture: Neovim with the plugin, the daemon and the scripted model


def plan_call(*statuses: str) -> dict:
    steps = ["read app.py", "fix add", "run tests"]
    return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": [
        {"content": c, "priority": "high" if i == 1 else "medium", "status": s}
        for i, (c, s) in enumerate(zip(steps, statuses, strict=True))]}}]}


def winbar(ed: Editor) -> str:
    return str(ed.lua("return vim.wo[T.chat_win()].winbar"))


def test_the_plan_is_one_block_replaced_in_place(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add(plan_call("in_progress", "pending", "pending"), plan_call("completed", "in_progress", "pending"),
            {"text": "Working on it."})
    chat = ed.prompt("fix add")
    lines = chat.split("\n")
    assert lines.count("- plan 1/3") == 1 and "- plan 0/3" not in lines, chat
    at = lines.index("- plan 1/3")
    assert lines[at + 1:at + 4] == ["  ✓ read app.py", "  ▸ fix add !", "  ○ run tests"], chat
    assert lines.index("Working on it.") > at  # the block stays where the first plan arrived
    assert "- [ok] update_plan (3 steps)" in lines


def test_mode_and_title_in_the_winbar_from_commands_and_the_picker(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add({"text": "Hi."})
    ed.prompt("hello there")
    assert winbar(ed) == " ToyCoder: hello there"  # the default mode (ask) is not shown
    ed.prompt("/title Hi")
    ed.wait(lambda: winbar(ed) == " ToyCoder: Hi", "the daemon's title in the winbar")
    ed.prompt("/mode read-only")
    ed.wait(lambda: "[read-only]" in winbar(ed), "the mode in the winbar")
    assert winbar(ed) == " ToyCoder [read-only]: Hi", winbar(ed)

    ed.answer("Accept edits")
    ed.cmd("ToyCoderMode")
    ed.wait(lambda: "[accept-edits]" in winbar(ed), "the picked mode in the winbar")
    picked = ed.lua("return T.selects[1]")
    assert picked["kind"] == "toycoder.mode"
    assert [i[2:].split("  ")[0] for i in picked["items"]] == ["Ask", "Accept edits", "Read only"]
    assert picked["items"][2].startswith("* Read only"), picked["items"]  # the current one is marked
    sid = ed.lua("return require('toycoder').session_id()")
    ed.prompt("/new")
    ed.prompt(f"/switch {sid}")  # the mode is the session's, restored with it
    assert winbar(ed) == " ToyCoder [accept-edits]: Hi"


def test_restored_turns_end_like_live_ones(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add({"text": "Four.", "usage": {"prompt_tokens": 120, "completion_tokens": 7}})
    live = ed.prompt("two plus two?")
    assert "tokens: 120 prompt, 7 completion" in live.split("\n"), live
    sid = ed.lua("return require('toycoder').session_id()")
    ed.prompt("/new")
    restored = ed.prompt(f"/switch {sid}")
    turn = restored.split("\n## You\n", 1)[1].split("\nswitched to ", 1)[0].strip("\n").split("\n")
    assert turn == ["two plus two?", "", "## ToyCoder", "", "Four.", "", "tokens: 120 prompt, 7 completion"], turn
    assert live.split("## You", 1)[1] in restored  # the turn reads the same as it did live

    # an interrupted reply (as a cancel stores it): its text, then "cancelled" and the tokens
    rows = ed.lua("""return vim.tbl_map(function(r) return r.text or r.chunks[1][1] end,
      require('toycoder.history').rows({ session = { sessionId = 's', title = 't', messageCount = 2 },
        transcript = {
          { role = 'user', text = 'story', stopReason = 'cancelled',
            usage = { promptTokens = 9, completionTokens = 2, totalTokens = 11 } },
          { role = 'assistant', text = 'Once upon', interrupted = true },
          { role = 'user', text = 'again' } } }))""")
    at = rows.index("Once upon")
    assert rows[at + 1:at + 4] == ["", "cancelled", "tokens: 9 prompt, 2 completion"], rows
    assert not any("interrupted" in r for r in rows), rows
    assert rows[-1] == "again"  # a turn without stopReason/usage (an older daemon's) ends with nothing


def test_a_turn_made_in_another_editor_reloads_the_chat(editor, llm: FakeLLM) -> None:
    a, b = editor(), editor()
    llm.add({"text": "First answer."})
    a.prompt("first question")
    sid = a.lua("return require('toycoder').session_id()")
    b.prompt(f"/switch {sid}")  # b has the session open from here on
    assert "First answer." in b.chat()

    llm.add({"text": "Second answer."})
    a.prompt("second question")
    chat = b.wait_chat("Second answer.")
    assert chat.index("second question") < chat.index("Second answer.")
    assert chat.count("First answer.") == 1, chat  # reloaded, not appended twice


def test_a_session_deleted_in_another_editor_shows_the_daemons_notice(editor, llm: FakeLLM) -> None:
    """session_deleted (issue 32): the daemon's one line in the chat of the editor that had it open."""
    a, b = editor(), editor()
    llm.add({"text": "First answer."})
    a.prompt("first question")
    sid = a.lua("return require('toycoder').session_id()")
    b.prompt(f"/switch {sid}")
    deleted = a.lua("local err = require('toycoder.daemon').request_sync('toycoder/session/delete', "
                    "{sessionId = ...}) return err == nil", sid)
    assert deleted is True
    chat = b.wait_chat("This session was deleted in another editor.")
    assert chat.count("This session was deleted in another editor.") == 1, chat


def test_a_loaded_session_shows_its_plan_again(editor, llm: FakeLLM) -> None:
    ed = editor()
    llm.add(plan_call("completed", "in_progress", "pending"), {"text": "Working on it."})
    ed.prompt("fix add")
    first = ed.lua("return require('toycoder').session_id()")
    ed.prompt("/new other")
    assert "- plan 1/3" not in ed.prompt("/title other")
    lines = ed.prompt(f"/switch {first}").split("\n")  # the daemon's load answer: the history, then its plan
    assert lines.count("- plan 1/3") == 1, lines
    at = lines.index("- plan 1/3")
    assert lines[at + 1:at + 4] == ["  ✓ read app.py", "  ▸ fix add !", "  ○ run tests"], lines
    assert at > lines.index("Working on it.")  # last, as the history ends
