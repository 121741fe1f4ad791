"""Issue 13 item 9: a key where grep_search (300 characters a line), read_file (4,000) or
run_command (15,000 bytes of head and of tail) cut their output must not survive in part.

Every cutter goes through secrets.clip: it redacts before it cuts, and redacts a key fragment of
8 characters or more left at a cut edge (a stream's window that was cut before it was seen).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import AllowAll

from toycoder_daemon.core.util import secrets
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files.read import LINE_CAP, read_file
from toycoder_daemon.tools.mcp.results import cap_output
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.search.results import LINE_MAX_CHARS
from toycoder_daemon.tools.search.tools import grep_search
from toycoder_daemon.tools.shell.run_command import HeadTail, run_command
from toycoder_daemon.tools.workspace import Workspace

KEY = "sk-cut0123456789abcdefghijklmnopqrst"  # 36 characters, like the keys of the report
HALF = 15_000  # run_command's default output_max_bytes is 30,000: 15,000 of head and of tail


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_values", {KEY})


def leaked(text: str) -> list[str]:
    """Pieces of KEY of 8 characters or more that are in the text."""
    return [KEY[i:i + 8] for i in range(len(KEY) - 7) if KEY[i:i + 8] in text]


async def dispatch(ws: Path, name: str, **args: object) -> str:
    reg = ToolRegistry(PermissionGate([name]))
    for t in (grep_search, read_file, run_command):
        reg.register(t, enabled=True)
    out = await reg.dispatch(name, json.dumps(args), ToolContext(Workspace(ws), AllowAll(), "c"))  # type: ignore[arg-type]
    assert out.status == "completed", out.output
    return out.output


BEFORE_CUT = [4, 8, 20, 28, 35]
"""How many of the key's characters lie before the cut."""


@pytest.mark.parametrize("before", BEFORE_CUT)
async def test_grep_search_line_cut(tmp_path: Path, before: int) -> None:
    line = "needle " + "a" * (LINE_MAX_CHARS - 7 - before) + KEY + "b" * 500
    (tmp_path / "f.txt").write_text(line + "\n")
    out = await dispatch(tmp_path, "grep_search", pattern="needle")
    assert "f.txt:1: needle aaa" in out
    assert leaked(out) == []


@pytest.mark.parametrize("before", BEFORE_CUT)
async def test_read_file_line_cut(tmp_path: Path, before: int) -> None:
    (tmp_path / "f.txt").write_text("first\n" + "a" * (LINE_CAP - before) + KEY + "b" * 5000 + "\nlast\n")
    out = await dispatch(tmp_path, "read_file", path="f.txt")
    assert "more characters on this line]" in out and "last" in out
    assert leaked(out) == []


@pytest.mark.parametrize("before", BEFORE_CUT)
@pytest.mark.parametrize("where", ["head", "tail", "both"])
async def test_run_command_head_and_tail_cuts(tmp_path: Path, before: int, where: str) -> None:
    # `before` characters of a key on the shown side of the head cut, of the tail cut, or both
    # (with little between them, so the whole output is at hand when it is cut)
    head = "a" * (HALF - before) + KEY if where != "tail" else "a" * HALF
    tail = KEY + "c" * (HALF - before) if where != "head" else "c" * HALF
    middle = 40_000 if where != "both" else 200
    (tmp_path / "out.txt").write_text(head + "b" * middle + tail)
    out = await dispatch(tmp_path, "run_command", command="cat out.txt")
    assert "bytes of output cut from the middle" in out
    assert leaked(out) == []


@pytest.mark.parametrize("before", BEFORE_CUT)
def test_mcp_results_are_capped_by_the_same_mechanism(before: int) -> None:
    text = "a" * (HALF - before) + KEY + "b" * 40_000
    out = secrets.redact(cap_output(text, None))
    assert "cut from the middle" in out and leaked(out) == []


def test_a_fragment_left_at_a_stream_window_edge_is_redacted() -> None:
    # A window already cut upstream: the key's start at its end, its end at the start of another.
    assert secrets.clip("x" * 50 + KEY[:12], 100, cut_after=True).head == "x" * 50 + "***"
    assert secrets.clip(KEY[-9:] + "y" * 50, 0, 100, cut_before=True).head == "***" + "y" * 50
    assert secrets.clip(KEY[5:20], 100, cut_before=True, cut_after=True).head == "***"
    # A short piece may stay (7 characters say little of 36); text that is not a key stays too.
    assert secrets.clip("x" * 50 + KEY[:7], 100, cut_after=True).head == "x" * 50 + KEY[:7]
    assert secrets.clip("x" * 200, 100, cut_after=True) == secrets.Clip("x" * 100, "", 100)


def test_clip_redacts_before_it_cuts_and_counts_what_it_dropped() -> None:
    text = "a" * 90 + KEY + "b" * 100
    kept = secrets.clip(text, 100)
    assert kept.head == "a" * 90 + "***" + "b" * 7 and kept.tail == ""
    assert kept.dropped == len(secrets.redact(text)) - 100
    both = secrets.clip("é" * 10 + KEY + "é" * 10, 7, 7, in_bytes=True)  # never half a character
    assert both.head == "é" * 3 and both.tail == "é" * 3


def test_head_tail_keeps_a_margin_as_long_as_the_longest_secret() -> None:
    out = HeadTail(100)
    assert out.keep == 50 + len(KEY)
    out.feed(b"a" * 40 + KEY.encode() + b"b" * 1000 + KEY.encode() + b"c" * 40)
    text = out.text()
    assert leaked(text) == [] and text.count("***") == 2
