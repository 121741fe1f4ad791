#!/usr/bin/env python3
"""The walk one prompt makes through the package, and how often it climbs back up (issue 27).

One in-process prompt (tests/inproc_app.py's App with the scripted model and a recording
Frontend), on a session stored by an earlier daemon, so the prompt opens it: the model writes a
file with write_file (asked, allowed once), then answers. `--text "/undo"` walks a slash command
instead (the session's previous turn wrote a file, so /undo has something to restore).

    .venv/bin/python bench/prompt_walk.py [--text PROMPT] [--walk]

What is counted (sys.setprofile over `App.prompt`, from its call to its return):

- A *call* is an entry into a function defined in toycoder_daemon/ (testing/ excluded: it plays
  the model). Resuming a suspended coroutine or generator is not a new call; comprehensions and
  generator expressions are part of their function; lambdas are calls. Calls out through the core
  ports into code outside the package (the Frontend, the model) are not in the walk: the ports
  are the way out.
- Its *caller* is the nearest enclosing frame of ours (none for the first step of a task the
  event loop runs).
- A *stop* is a visit of a file: a maximal run of consecutive calls into the same file. The walk
  prints the stops, each with the functions called there.
- A module's *rank* is its layer's height in the table tests/unit/test_architecture.py checks
  (docs/architecture.md): a layer that may import nothing is 0, any other is one above the highest
  it may import (core 0; config 1; llm, tools, wire 2; agent, prompts, rpc 3; sessions 4;
  checkpoints 5; commands 6; app 7; faces 8). Within the app layer, App itself (app/application.py
  and the modules of App's base classes) is above the per-session runtime (the module of SessionRuntime, once there is
  one), which is above the app's other parts (factories, undo, sharing, MCP servers...).
- A *climb back up* is either
  (a) an upward call: the callee's rank is higher than its caller's (a lower layer calling back
      into a higher one: a hook, a callback, a host interface implemented above it), or
  (b) a return into App after leaving it: a call from App's modules into another module after the
      first such call (App handed the prompt down, got control back, and hands it down again).
  Climbs are counted as distinct edges (caller function -> callee function): a loop that makes
  the same climb on every model step counts once (the total of calls is printed beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "unit")]  # inproc_app; test_architecture

import test_architecture as layers  # noqa: E402
from inproc_app import InProc  # noqa: E402

from toycoder_daemon.app.application import App  # noqa: E402

PACKAGE = ROOT / "toycoder_daemon"
SKIPPED = str(PACKAGE / "testing")
INLINE = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
RESUMABLE = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR


def _height(group: str, seen: dict[str, int]) -> int:
    if group not in seen:
        below = layers.ALLOWED[group]
        seen[group] = 1 + max(_height(g, seen) for g in below) if below else 0
    return seen[group]


HEIGHTS: dict[str, int] = {}
for _group in layers.ALLOWED:
    _height(_group, HEIGHTS)
APP = {str(Path(sys.modules[c.__module__].__file__ or "").relative_to(PACKAGE))
       for c in App.__mro__ if c.__module__.startswith("toycoder_daemon")}
"""App's modules: app/application.py and those of its base classes (their methods are App's)."""

def _runtime_modules() -> set[str]:
    """The module of SessionRuntime (none before there was one)."""
    try:
        from toycoder_daemon.app.runtime import SessionRuntime
    except ImportError:
        return set()
    return {str(Path(sys.modules[SessionRuntime.__module__].__file__ or "").relative_to(PACKAGE))}


RUNTIME = _runtime_modules()


def rank(file: str) -> tuple[int, int]:
    """(layer height, place in the app layer) of `file`, relative to the package."""
    module = "toycoder_daemon." + file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    group = layers.layer(module)
    within = 2 if file in APP else 1 if file in RUNTIME else 0
    return HEIGHTS[group], within if group == "app" else 0


@dataclass(frozen=True)
class Call:
    caller: str | None
    caller_function: str | None
    callee: str
    function: str


class Tracer:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._started: dict[int, FrameType] = {}  # kept alive so their ids stay unique

    @staticmethod
    def ours(frame: FrameType) -> str | None:
        path = frame.f_code.co_filename
        if not path.startswith(str(PACKAGE)) or path.startswith(SKIPPED) or frame.f_code.co_name in INLINE:
            return None
        return str(Path(path).relative_to(PACKAGE))

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (callee := self.ours(frame)) is None:
            return
        if frame.f_code.co_flags & RESUMABLE:
            if id(frame) in self._started:
                return
            self._started[id(frame)] = frame
        up = frame.f_back
        while up is not None and self.ours(up) is None:
            up = up.f_back
        caller = (self.ours(up), up.f_code.co_qualname) if up is not None else (None, None)
        self.calls.append(Call(*caller, callee, frame.f_code.co_qualname))


def climbs(calls: list[Call]) -> dict[tuple[str, str], int]:
    """(kind, edge) -> how many calls made it, for each climb back up (the module docstring's
    definition); in the order of the first."""
    out: dict[tuple[str, str], int] = {}
    left_app = False
    for c in calls:
        edge = f"{c.caller}:{c.caller_function} -> {c.callee}:{c.function}"
        if c.caller is not None and rank(c.callee) > rank(c.caller):
            key = ("upward call", edge)
        elif c.caller in APP and c.callee not in APP:
            left, left_app = left_app, True
            if not left:
                continue
            key = ("back into App", edge)
        else:
            continue
        out[key] = out.get(key, 0) + 1
    return out


def stops(calls: list[Call]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for c in calls:
        if out and out[-1][0] == c.callee:
            if c.function not in out[-1][1]:
                out[-1][1].append(c.function)
        else:
            out.append((c.callee, [c.function]))
    return out


async def walk(text: str) -> list[Call]:
    with tempfile.TemporaryDirectory() as tmp:
        workspace, data = Path(tmp, "ws"), Path(tmp, "data")
        workspace.mkdir()
        (workspace / "README.md").write_text("hello\n")
        earlier = InProc(workspace, data)  # the daemon that made the session, one turn that wrote a file
        earlier.frontend.default_decision = "allow_once"
        earlier.script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
                           {"text": "wrote a.txt"})
        sid = earlier.new_session()
        await earlier.prompt(sid, "write a.txt")
        await earlier.close()

        p = InProc(workspace, data)
        p.frontend.default_decision = "allow_once"
        p.script.add({"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "# notes\n"}}]},
                     {"text": "Wrote notes.md."})
        tracer = Tracer()
        sys.setprofile(tracer)
        try:
            out = await p.app.prompt(sid, text, lambda s, turn: p.frontend.bind(s))
        finally:
            sys.setprofile(None)
        await p.close()
        assert out.result.stop_reason in ("end_turn", "command"), out
        return tracer.calls


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--text", default="write the notes", help="the prompt (a /command walks the command)")
    ap.add_argument("--walk", action="store_true", help="print every stop of the walk")
    args = ap.parse_args()
    calls = asyncio.run(walk(args.text))
    found = climbs(calls)
    visits = stops(calls)
    if args.walk:
        for n, (file, functions) in enumerate(visits, 1):
            print(f"{n:4} {file:<28} {', '.join(functions)}")
        print()
    for (kind, edge), times in found.items():
        print(f"climb ({kind}, {times}x): {edge}")
    kinds = Counter(kind for kind, _ in found)
    print(f"\nprompt {args.text!r}: {len(calls)} calls, {len(visits)} stops in {len({c.callee for c in calls})} files, "
          f"{len({(c.callee, c.function) for c in calls})} functions; climbs back up: {len(found)} "
          f"({kinds['upward call']} upward calls, {kinds['back into App']} returns into App; "
          f"{sum(found.values())} calls in all)")


if __name__ == "__main__":
    main()
