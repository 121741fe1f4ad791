"""No lost writes (issue 32): edit_file and write_file replace a file only if it still holds what the
edit was computed from (inode, size, mtime and hash), under a per-path lock every daemon honours.
Two Apps (two daemons' worth of sessions) editing one file at once may fail a call, but never lose
an edit they reported done."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from inproc_app import InProc

import toycoder_daemon.tools.files.edit as edit_mod
from toycoder_daemon.core.ports import ToolCallFinished

ROUNDS = 15


def edit(path: str, old: str, new: str) -> dict:
    return {"tool_calls": [{"name": "edit_file", "arguments": {"path": path, "old_string": old, "new_string": new}}]}


def finished(p: InProc, sid: str) -> list[ToolCallFinished]:
    return [e for e in p.frontend.of(sid) if isinstance(e, ToolCallFinished)]


@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
async def test_two_writers_editing_one_file_lose_no_reported_edit(inproc, workspace: Path, mode: str) -> None:
    """ask: each edit is approved against a preview (a base moved since fails it); accept-edits: none."""
    shared = workspace / "shared.py"
    shared.write_text("".join(f"{w}{k} = 0\n" for k in range(ROUNDS) for w in "ab"))
    writers = {w: inproc() for w in "ab"}
    outcomes: list[tuple[str, int, ToolCallFinished]] = []

    async def one(w: str, k: int) -> None:
        p: InProc = writers[w]
        p.frontend.default_decision = "allow_once"
        p.script.add(edit("shared.py", f"{w}{k} = 0", f"{w}{k} = 1"), {"text": "ok"})
        sid = p.new_session()  # a session per edit: each result is that edit's
        p.app.set_mode(sid, mode)
        await p.prompt(sid, f"round {k}")
        [r] = finished(p, sid)
        outcomes.append((w, k, r))

    for k in range(ROUNDS):  # both at the same instant, round after round
        await asyncio.gather(one("a", k), one("b", k))
    final = shared.read_text()
    done = [(w, k) for w, k, r in outcomes if r.status == "completed"]
    lost = [f"{w}{k}" for w, k in done if f"{w}{k} = 1\n" not in final]
    for _, _, r in outcomes:
        if r.status != "completed":  # failing is allowed, with the reason
            assert ("changed while it was being edited; read it again" in r.output
                    or "changed while waiting for approval; read it again" in r.output), r.output
    assert lost == []
    # the lock serialises the writers: without a preview to go stale every edit lands
    assert len(done) == 2 * ROUNDS if mode == "accept-edits" else len(done) >= ROUNDS
    print(f"{len(done)} of {len(outcomes)} edits completed, {len(lost)} lost")


async def test_a_file_changed_between_the_read_and_the_replace_fails_the_edit(
        inproc, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that does not take the lock (the person's editor, a build): the identity check."""
    target = workspace / "f.txt"
    target.write_text("x = 0\ny = 0\n")
    real_load = edit_mod.load
    touches = 0

    def load_then_someone_writes(path: Path):
        nonlocal touches
        f = real_load(path)
        touches += 1
        os.utime(target, ns=(touches, touches))  # right after each read: same text, another mtime
        return f

    monkeypatch.setattr(edit_mod, "load", load_then_someone_writes)
    p: InProc = inproc()
    p.frontend.default_decision = "allow_once"
    p.script.add(edit("f.txt", "x = 0", "x = 1"), {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "edit")
    [r] = finished(p, sid)
    assert r.status == "failed" and "f.txt changed while it was being edited; read it again" in r.output
    assert target.read_text() == "x = 0\ny = 0\n"
