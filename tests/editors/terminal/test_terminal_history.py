"""The terminal client's details a new user trips over: a narrow diff's panel footer, the tool's
time without the person's, a resumed session's history (failed tool calls marked, each turn's usage).
The renderer's part is in-process in unit/cli/test_terminal_render.py, "1 msg" in
unit/commands/test_commands.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from helpers import write_config
from test_terminal_cli import Term

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
