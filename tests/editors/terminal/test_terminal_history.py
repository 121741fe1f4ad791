"""The terminal client's details a new user trips over: a narrow diff's panel footer, a resumed
session's history (failed tool calls marked, each turn's usage), and "1 msg"."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import write_config
from inproc_app import InProc
from rich.markdown import Markdown
from test_terminal_cli import Term
from test_terminal_render import Spy

from toycoder_daemon.testing.fake_llm import FakeLLM


@pytest.fixture
def start(tmp_path: Path, llm: FakeLLM, workspace: Path):
    """start(*args) -> a toycoder in a 120x40 pty, on the fake model, once its banner is up."""
    terms: list[Term] = []
    cfg = write_config(tmp_path / "c.yaml", llm)

    def run(*args: str) -> Term:
        t = Term(["--config", str(cfg), *args], workspace)
        terms.append(t)
        t.expect("Ctrl-D or /quit exits")
        return t

    yield run
    for t in terms:
        t.close()


def test_a_narrow_diff_keeps_its_whole_footer(start, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "x").write_text("a\n")
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "x", "old_string": "a", "new_string": "b"}}]},
            {"text": "Done."})
    t = start()
    t.prompt("change x")
    t.expect(r"\+b")
    t.expect(r"╰─ sensitive · permission needed ─*╯")  # was cut to "╰─ sensitive · permi─╯"
    t.expect(r"Allow\?")
    t.send("n")
    t.expect("Done.")


def test_tool_time_leaves_out_the_wait_for_the_person(start, llm: FakeLLM, workspace: Path) -> None:
    (workspace / "x").write_text("a\n")
    llm.add({"tool_calls": [{"name": "edit_file", "arguments": {"path": "x", "old_string": "a", "new_string": "b"}}]},
            {"text": "Done."})
    t = start()
    t.prompt("change x")
    t.expect(r"Allow\?")
    time.sleep(2)  # the person thinks it over
    t.send("y")
    m = t.expect(r"✓ edit_file x +ok ([0-9.]+)s · ([0-9.]+)s waiting for you")
    tool, waited = float(m.group(1)), float(m.group(2))
    assert waited >= 2 and tool < waited, (tool, waited)  # the tool's own time, then the person's
    t.expect("Done.")


def test_resumed_history_marks_failed_calls_and_shows_each_turns_usage(start, llm: FakeLLM) -> None:
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.txt"}},
                            {"name": "read_file", "arguments": {"path": "README.md"}}],
             "usage": {"prompt_tokens": 1234, "completion_tokens": 5}},
            {"text": "One was missing.", "usage": {"prompt_tokens": 100, "completion_tokens": 6}})
    t = start()
    t.prompt("read two files")
    t.expect("One was missing.")
    t.prompt("/sessions")
    session_id = t.expect(r"\* ([0-9a-f]{12}) ").group(1)
    t.prompt("/quit")
    assert t.exit_status() == 0

    t = start("--session", session_id)
    t.pos = 0
    t.expect("❯ read two files")
    t.expect(r"✗ read_file .*missing\.txt.*failed: .*missing\.txt")  # how it ended, and why
    t.expect(r"✓ read_file .*README\.md.*ok")
    t.expect("One was missing.")
    t.expect(r"1,334 tokens in · 11 out")  # the turn's usage, as the live turn's last line said
    t.expect("Ctrl-D or /quit exits")


async def test_one_message_is_1_msg(inproc) -> None:
    p: InProc = inproc()
    sid = p.new_session()
    p.app.session(sid).messages.append({"role": "user", "content": "hello"})
    listed = (await p.command(sid, "/sessions")).result.text
    assert "   1 msg   (untitled)" in listed and "1 msgs" not in listed, listed  # the title column stays put
    assert "1 message)" in (await p.command(sid, f"/switch {sid}")).result.text


def test_text_printed_for_good_is_already_gone_from_the_live_area() -> None:
    """Rich redraws the live area (from view.text) right after each print: text still there would
    show twice for a frame."""
    spy = Spy(height=14)
    overlaps: list[str] = []
    recording = spy.console.print

    def check(*objs, **kw):
        for o in objs:
            if isinstance(o, Markdown) and o.markup.strip() and o.markup.strip() in spy.view.text:
                overlaps.append(o.markup)
        recording(*objs, **kw)

    spy.console.print = check  # type: ignore[method-assign]
    spy.view.begin()
    try:
        for i in range(12):
            spy.feed({"kind": "text_delta", "text": f"Paragraph {i} says something.\n\n"})
        spy.feed({"kind": "tool_call", "toolCallId": "c1", "name": "read_file", "title": "read_file a"})
    finally:
        spy.view.pause()
    assert any("Paragraph 0" in p for p in spy.printed)  # blocks were committed while it streamed
    assert not overlaps, overlaps


def test_a_resumed_sessions_plan_is_shown_after_its_history() -> None:
    from toycoder_daemon.cli.history import show_transcript

    spy = Spy()
    show_transcript(spy.view, [{"role": "user", "text": "fix it"}, {"role": "assistant", "text": "Working."},
                               {"role": "plan", "text": "", "entries": [
                                   {"content": "read", "priority": "medium", "status": "completed"},
                                   {"content": "fix", "priority": "high", "status": "in_progress"}]}])
    assert spy.printed[-1] == "plan 1/2\n  ✓ read\n  ▸ fix !", spy.printed
