"""The terminal client's renderer in-process: what it prints for good (not the live area's redraws)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from toycoder_daemon.cli.render import TurnView, split_stable


class Spy:
    """A terminal console whose permanent output (console.print of Markdown/Text) is recorded."""

    def __init__(self, height: int = 30, live: bool | None = None):
        self.console = Console(file=io.StringIO(), force_terminal=True, width=80, height=height)
        self.printed: list[str] = []
        real = self.console.print

        def spy(*objs, **kw):
            for o in objs:
                if isinstance(o, Markdown):
                    self.printed.append(o.markup)
                elif isinstance(o, Text):
                    self.printed.append(o.plain)
            real(*objs, **kw)

        self.console.print = spy  # type: ignore[method-assign]
        self.view = TurnView(self.console, live=live)

    def live_area(self) -> str:
        """The live area as it is drawn now (spinners and the status line)."""
        out = Console(file=io.StringIO(), width=80)
        out.print(self.view._tail())
        return out.file.getvalue()  # type: ignore[attr-defined]

    def feed(self, *updates: dict, parent: str | None = None) -> None:
        for u in updates:
            params = {"sessionId": "s", "turnId": "t", "update": u}
            if parent:
                params["parentToolCallId"] = parent
            self.view.update(params)


def delta(text: str) -> dict:
    return {"kind": "text_delta", "text": text}


def test_a_retry_drops_the_partial_reply() -> None:
    s = Spy()
    s.view.begin()
    s.feed(delta("partial JUNK "), {"kind": "retry", "attempt": 1, "delaySeconds": 0.5, "reason": "HTTP 500"},
           delta("clean **reply**"))
    s.view.end({"stopReason": "end_turn", "usage": {"promptTokens": 1200, "completionTokens": 34}})
    assert not any("JUNK" in p for p in s.printed)
    assert "clean **reply**" in s.printed
    assert any(p.startswith("↻ retrying (attempt 1, in 0.5s): HTTP 500") for p in s.printed)
    assert any("1,200 tokens in · 34 out" in p for p in s.printed)


def test_a_wait_for_mcp_servers_is_the_live_line_then_the_failed_ones_are_printed() -> None:
    s = Spy()
    s.view.begin()
    s.feed({"kind": "mcp_wait", "state": "waiting", "servers": ["github", "db"]})
    assert "starting MCP servers: github, db…" in s.live_area() and s.printed == []
    s.feed({"kind": "mcp_wait", "state": "done", "servers": ["github", "db"], "failed": ["db"]})
    assert "starting MCP" not in s.live_area() and "thinking…" in s.live_area()
    assert s.printed == ["MCP servers failed: db"]
    s.view.end(None)


def test_without_a_live_area_the_wait_for_mcp_servers_is_two_lines() -> None:
    s = Spy(live=False)
    s.view.begin()
    s.feed({"kind": "mcp_wait", "state": "waiting", "servers": ["github"]},
           {"kind": "mcp_wait", "state": "done", "servers": ["github"]}, delta("Hi."))
    s.view.end(None)
    assert s.printed[:2] == ["starting MCP servers: github…", "MCP servers ready: github"]


def test_tool_lines_sub_agent_indent_and_statuses() -> None:
    s = Spy()
    s.view.begin()
    s.feed(delta("Planning."), {"kind": "tool_call", "toolCallId": "c1", "name": "planner", "title": "planner: fix it",
                                "arguments": {}, "permission": "safe"})
    s.feed(delta("1. read\n2. fix\n"), parent="c1")
    s.feed({"kind": "tool_call", "toolCallId": "c2", "name": "read_file", "title": "read_file a.py", "arguments": {},
            "permission": "safe"}, parent="c1")
    s.feed({"kind": "tool_result", "toolCallId": "c2", "status": "failed", "output": "error: no such file\nmore"},
           parent="c1")
    s.feed({"kind": "tool_result", "toolCallId": "c1", "status": "completed", "output": "1. read"},
           {"kind": "compaction", "strategy": "summary", "before": 40, "after": 9},
           {"kind": "tool_call", "toolCallId": "c3", "name": "edit_file", "title": "edit_file a.py", "arguments": {},
            "permission": "sensitive"},
           {"kind": "tool_result", "toolCallId": "c3", "status": "denied", "output": "denied"})
    s.view.end(None)
    lines = s.printed
    assert lines[0] == "Planning."
    assert lines[1] == "  ▸ planner: fix it"
    assert lines[2:4] == ["    │ 1. read", "    │ 2. fix"]
    assert lines[4].startswith("    ✗ read_file a.py  failed ") and lines[4].endswith(": error: no such file")
    assert lines[5].startswith("  ✓ planner  ok ")
    assert lines[6] == "⟳ context compacted (summary): 40 → 9 messages"
    assert lines[7].startswith("  ⊘ edit_file a.py  denied ")
    assert s.view.tool_statuses == ["failed", "completed", "denied"]


def test_a_reply_taller_than_the_screen_is_committed_in_whole_blocks() -> None:
    text = "# Title\n\n" + "".join(
        f"Paragraph {i} " + "words " * 30 + "\n\n" + ("```python\n" + "".join(f"x = {j}\n" for j in range(30))
                                                        + "```\n\n" if i % 3 == 0 else "") for i in range(12))
    s = Spy(height=20)
    s.view.begin()
    for i in range(0, len(text), 7):
        s.feed(delta(text[i:i + 7]))
        assert s.view._estimated_lines(s.view.text) <= 20  # the live area stays inside the screen
    s.view.end(None)
    assert len(s.printed) > 3
    for block in s.printed:  # every committed block is complete Markdown: fences balanced
        assert block.count("```") % 2 == 0, block
    joined = "\n".join(s.printed)
    for line in text.splitlines():
        if line.strip() and not line.startswith("```"):
            assert line in joined


@pytest.mark.parametrize("text, force, want", [
    ("a\n\nb", False, ("a", "b")),
    ("one line still growing", True, ("", "one line still growing")),
    ("a\nb\nc", False, ("", "a\nb\nc")),
    ("a\nb\nc", True, ("a\nb", "c")),
    ("```py\nx\n\ny\n", False, ("", "```py\nx\n\ny\n")),  # a blank line inside a fence is no boundary
    ("```py\nx\ny\nz", True, ("```py\nx\ny\n```", "```py\nz")),  # forced: the fence is closed and reopened
    ("```\nx\n```\nafter", False, ("```\nx\n```", "after")),
    ("```py\nx", True, ("", "```py\nx")),  # not an empty code block
])
def test_split_stable(text: str, force: bool, want: tuple[str, str]) -> None:
    assert split_stable(text, force) == want


def permission_params(n: int) -> dict:
    diff = f"--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,{n} @@\n" + "".join(f"+line {i:03d}\n" for i in range(1, n + 1))
    return {"tool": "write_file", "title": "write_file big.txt", "level": "sensitive",
            "preview": {"kind": "diff", "path": "big.txt", "uri": "file:///w/big.txt", "diff": diff}}


def test_a_diff_taller_than_the_screen_goes_whole_to_the_pager_and_a_short_one_prints_inline() -> None:
    s = Spy(height=30)
    paged: list[str] = []

    def page(text: str) -> bool:
        paged.append(text)
        return True

    s.view.permission(permission_params(200), page=page)  # longer than the 120 lines shown inline
    assert len(paged) == 1
    assert "+line 001" in paged[0] and "+line 200" in paged[0] and "more lines" not in paged[0]
    assert "\x1b[" in paged[0]  # with its colours
    assert s.printed == [f"write_file big.txt: {paged[0].count(chr(10))} lines shown in the pager"]
    out = s.console.file.getvalue()
    assert "+line 001" not in out  # not printed on the screen as well

    s.view.permission(permission_params(10), page=page)  # fits: inline as before
    assert len(paged) == 1 and "+line 010" in s.console.file.getvalue()


def test_without_a_pager_a_long_diff_is_clipped_inline() -> None:
    s = Spy(height=30)
    s.view.permission(permission_params(200), page=lambda text: False)
    out = s.console.file.getvalue()
    assert "+line 117" in out and "+line 118" not in out and "… 83 more lines" in out  # 120 lines of the diff
    s = Spy(height=30)
    s.view.permission(permission_params(200))  # no terminal to ask on: no pager at all
    assert "… 83 more lines" in s.console.file.getvalue()


def test_a_changes_update_is_one_line_with_counts_and_names() -> None:
    s = Spy()
    s.view.begin()
    s.feed(delta("Done."), {"kind": "changes", "files": [
        {"path": "a.py", "uri": "file:///w/a.py", "status": "modified", "added": 7, "removed": 3},
        {"path": "b.py", "uri": "file:///w/b.py", "status": "created", "added": 3, "removed": 0},
        {"path": "logo.png", "uri": "file:///w/logo.png", "status": "modified", "added": None, "removed": None}]})
    s.view.end(None)
    assert "Done." in s.printed
    assert "3 files changed +10 \u22123: a.py, b.py, logo.png" in s.printed


def test_changes_line_singular_and_many_files() -> None:
    from toycoder_daemon.cli.changes import changes_line

    assert changes_line([{"path": "x.py", "status": "modified", "added": 1, "removed": 1}], "s-1") == \
        "Restored 1 file changed +1 \u22121: x.py · Redo: /redo"  # a restore (restoreOf)
    assert changes_line([{"path": "x.py", "status": "deleted", "added": 0, "removed": 4}]) == \
        "1 file changed +0 \u22124: x.py"
    many = changes_line([{"path": f"f{i}.py", "status": "created", "added": 1, "removed": 0} for i in range(8)])
    assert many == "8 files changed +8 \u22120: f0.py, f1.py, f2.py, f3.py, f4.py, f5.py, 2 more"


def test_a_plan_prints_as_a_compact_list_each_time_it_changes() -> None:
    s = Spy()
    s.view.begin()
    s.feed({"kind": "plan", "entries": [
        {"content": "read calc.py", "priority": "high", "status": "completed"},
        {"content": "fix average", "priority": "high", "status": "in_progress"},
        {"content": "run tests", "priority": "low", "status": "pending"}]})
    s.view.end({"stopReason": "end_turn", "usage": {}})
    plan = next(p for p in s.printed if p.startswith("plan "))
    assert plan.splitlines() == ["plan 1/3", "  ✓ read calc.py", "  ▸ fix average !", "  ○ run tests"]


def test_session_info_notes_a_new_title_and_mode_once_and_keeps_the_mode() -> None:
    s = Spy()
    s.view.set_session({"sessionId": "s", "title": "fix average", "mode": "ask"})
    s.view.begin()
    info = {"sessionId": "s", "title": "Fix average() for empty lists", "mode": "ask"}
    s.feed({"kind": "session_info", "session": info}, {"kind": "session_info", "session": info})
    s.feed({"kind": "session_info", "session": {**info, "mode": "read-only"}})
    s.view.end({"stopReason": "end_turn", "usage": {}})
    assert s.printed.count("title: Fix average() for empty lists") == 1
    assert "mode: read-only" in s.printed
    assert not any(p.startswith("mode: ask") for p in s.printed)
    assert s.view.mode == "read-only"


def test_session_deleted_prints_the_daemons_line() -> None:
    s = Spy()
    s.view.begin()
    s.feed({"kind": "session_deleted", "message": "This session was deleted in another editor."})
    s.view.end({"stopReason": "end_turn", "usage": {}})
    assert "This session was deleted in another editor." in s.printed


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


def test_a_resumed_prompts_attachments_show_as_chips() -> None:
    from toycoder_daemon.cli.history import show_transcript

    spy = Spy()
    show_transcript(spy.view, [{"role": "user", "text": "explain", "context": [
        {"type": "file", "label": "calc.py:2-3"}, {"type": "image", "label": "image 1 (png)"}]}])
    assert spy.printed == ["❯ explain", "  [calc.py:2-3]  [image 1 (png)]"], spy.printed
