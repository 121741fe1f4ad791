"""When a new LSP process imports pygls (lsp_early.py's docstring): only once it is needed (a frame
left to it, a message held for it) or the process is idle (no early request for `quiet` seconds,
whatever document news comes), never beside an early turn; prompts run early until the import has
started, then they are pygls'; the App's start-up work begins after the first early turn, when idle
or once pygls is in, never beside an early turn (the first turn starts the config's MCP servers
itself); the end of input calls on_end at once. In-process
through serve_lsp with its `importer` seam (the importer records that it was called and waits for
the test), plus a real daemon with a configured MCP server whose lsprotocol import is held. No
timing is asserted: bench/peers.py measures it."""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import write_config
from helpers import processes_with, unique_marker, write_call
from inproc_app import eventually
from test_lsp_early import INITIALIZED, Capture, HeldDaemon, body
from test_lsp_early_prompt import answered, asked, init, messages, prompt, reply
from waiting import DEFAULT_TIMEOUT, scaled, wait_until

from toycoder_daemon import lsp_early
from toycoder_daemon.app import App
from toycoder_daemon.lsp_early import EarlyLsp, serve_lsp
from toycoder_daemon.stdio import Inbox
from toycoder_daemon.testing.fake_llm import FakeLLM

SERVER = Path(__file__).parent / "mcp_servers" / "toy_server.py"
NEVER_IDLE = 3600.0
"""A quiet period no test reaches: only a need can start the import."""


class Importer:
    """serve_lsp's importer: says it was called, then waits for the test before importing."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()

    def __call__(self) -> tuple[Any, Any]:
        self.started.set()
        assert self.go.wait(scaled(DEFAULT_TIMEOUT)), "the test never let the import go on"
        from toycoder_daemon import rpc_io, server

        return rpc_io, server


class Served:
    """serve_lsp in-process: frames in through an Inbox, frames out into a Capture."""

    def __init__(self, workspace: Path, config: Path, quiet: float, first: list[dict[str, Any]]):
        self.inbox, self.out, self.importer = Inbox(), Capture(), Importer()
        self.input_ended = threading.Event()
        """serve_lsp called on_end (in the daemon: the exit timer starts)."""
        initialize = body(init(workspace, config))
        for msg in [initialize, *map(body, first)]:  # queued before serve_lsp attaches: one read
            self.inbox.put(msg, None)
        self.task = asyncio.ensure_future(serve_lsp(self.inbox, self.out, None, answered=initialize,
                                                    on_end=self.input_ended.set, importer=self.importer, quiet=quiet))

    def send(self, msg: dict[str, Any]) -> None:
        self.inbox.put(body(msg), None)

    async def end(self) -> int:
        self.importer.go.set()
        self.inbox.put(None, None)
        return await asyncio.wait_for(self.task, scaled(DEFAULT_TIMEOUT))


async def stored_session(workspace: Path, config: Path) -> str:
    app = App.open(workspace, str(config))
    sid = app.new_session("t").id
    await app.shutdown()
    return sid


async def test_the_import_waits_for_an_early_turn_then_starts_when_idle(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """With no quiet period at all, the import still does not start while an early turn waits for
    a permission; when the turn has ended it starts without any frame, and pygls then serves."""
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add(write_call("one.txt", "1"), {"text": "written"})
    s = Served(workspace, config, 0.0, [INITIALIZED, prompt(1, sid)])
    await eventually(lambda: len(asked(s.out, "toycoder/requestPermission")) == 1, "the permission request")
    assert not s.importer.started.is_set()  # idle at once would have started it long before
    s.send(reply(asked(s.out, "toycoder/requestPermission")[0]["id"], {"decision": "allow_once"}))
    await eventually(lambda: answered(s.out, 1) is not None, "the early turn's answer")
    assert answered(s.out, 1)["result"]["text"] == "written"  # type: ignore[index]
    await eventually(s.importer.started.is_set, "the import, once the process is idle")
    s.importer.go.set()
    s.send({"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}})
    await eventually(lambda: answered(s.out, 2) is not None, "pygls' answer")
    assert answered(s.out, 2)["result"]["commands"]  # type: ignore[index]
    assert await s.end() == 0


async def test_a_frame_for_pygls_during_an_early_turn_starts_the_import(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """A request the early path leaves to pygls starts the import at once, mid-turn, and is answered
    by pygls while the turn still waits for its permission; the turn then ends as usual."""
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add(write_call("one.txt", "1"), {"text": "written"})
    s = Served(workspace, config, NEVER_IDLE, [INITIALIZED, prompt(1, sid)])
    await eventually(lambda: len(asked(s.out, "toycoder/requestPermission")) == 1, "the permission request")
    assert not s.importer.started.is_set()
    s.send({"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}})
    await eventually(s.importer.started.is_set, "the import a frame for pygls starts")
    s.importer.go.set()
    await eventually(lambda: answered(s.out, 2) is not None, "pygls' answer during the turn")
    assert answered(s.out, 2)["result"]["commands"] and answered(s.out, 1) is None  # type: ignore[index]
    s.send(reply(asked(s.out, "toycoder/requestPermission")[0]["id"], {"decision": "allow_once"}))
    await eventually(lambda: answered(s.out, 1) is not None, "the turn's answer after the hand-over")
    assert answered(s.out, 1)["result"]["text"] == "written"  # type: ignore[index]
    assert (workspace / "one.txt").read_text() == "1"
    assert await s.end() == 0


async def test_idle_starts_the_import_without_any_frame(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """Only the answered initialize came (not even `initialized`): the quiet period passes and the
    import starts."""
    config = write_config(tmp_path / "config.yaml", llm)
    s = Served(workspace, config, 0.05, [])
    await eventually(s.importer.started.is_set, "the import of an idle process")
    assert await s.end() == 0


async def test_a_held_message_starts_the_import_and_arrives_after_it(workspace: Path, tmp_path: Path) -> None:
    """A broken config: the error shown at `initialized` waits for pygls, so it is a need (the
    process never idles into it here), and it reaches the client once pygls is in."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers: [not, a, mapping]\n")
    s = Served(workspace, bad, NEVER_IDLE, [INITIALIZED])
    await eventually(s.importer.started.is_set, "the import the held message starts")
    assert not [m for m in messages(s.out) if m.get("method") == "window/showMessage"]
    s.importer.go.set()
    await eventually(lambda: any(m.get("method") == "window/showMessage" for m in messages(s.out)), "the message")
    shown = [m["params"] for m in messages(s.out) if m.get("method") == "window/showMessage"]
    assert shown[0]["type"] == 1 and "bad.yaml" in shown[0]["message"]
    assert await s.end() == 0


async def test_input_ending_before_anything_wanted_pygls_imports_nothing(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """The early answer is written and serve_lsp returns without ever calling the importer."""
    config = write_config(tmp_path / "config.yaml", llm)
    s = Served(workspace, config, NEVER_IDLE, [INITIALIZED, {"jsonrpc": "2.0", "id": 1,
                                                              "method": "toycoder/session/list", "params": {}}])
    await eventually(lambda: answered(s.out, 1) is not None, "the early answer")
    s.inbox.put(None, None)
    assert await asyncio.wait_for(s.task, scaled(DEFAULT_TIMEOUT)) == 0
    assert not s.importer.started.is_set()


def test_the_first_early_turn_starts_the_config_mcp_servers_itself_without_pygls(
        tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """Through a real daemon with a configured MCP server, lsprotocol held and a quiet period no test
    reaches: the first early turn starts the server itself (App.start comes only after it) and waits
    for its tools, so the model's first request offers them; a server that starts well needs nothing
    shown, so pygls is never needed and the import never starts."""
    tag = unique_marker("toycoder-lsp-early-mcp")
    config = write_config(tmp_path / "config.yaml", llm, extra=(
        f"mcp_servers:\n  toy: {{command: {sys.executable}, args: [{SERVER}, --tag, {tag}], permission: safe}}\n"))
    llm.add(write_call("one.txt", "1"), {"text": "written"})
    d = HeldDaemon(tmp_path, config, quiet=NEVER_IDLE)

    def until(test: Any) -> dict[str, Any]:
        while not test(m := d.frames.get(timeout=DEFAULT_TIMEOUT)):
            pass
        return m

    def offered(request: dict[str, Any]) -> set[str]:
        return {t["function"]["name"] for t in request["body"].get("tools", [])}

    try:
        d.send(init(workspace, config))
        until(lambda m: m.get("id") == 0)
        d.send(INITIALIZED)
        d.send({"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/new", "params": {}})
        sid = until(lambda m: m.get("id") == 1)["result"]["sessionId"]
        d.send(prompt(2, sid))
        permission = until(lambda m: m.get("method") == "toycoder/requestPermission")
        assert processes_with(tag)  # started by the turn, which is still running
        assert {"write_file", "mcp__toy__add"} <= offered(llm.requests[0])
        d.send(reply(permission["id"], {"decision": "allow_once"}))
        assert until(lambda m: m.get("id") == 2 and "method" not in m)["result"]["text"] == "written"
        assert not d.entered.exists()  # pygls was never needed for it
    finally:
        assert d.proc.stdin is not None
        d.proc.stdin.close()
        d.proc.wait(timeout=DEFAULT_TIMEOUT)
    assert d.proc.returncode == 0
    wait_until(lambda: processes_with(tag) == [], what="the MCP server to exit with the daemon")


async def test_back_to_back_prompts_all_run_early(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """Prompts, each sent as soon as the one before is answered (so the process is never idle), all
    run early: none starts the import, and each is answered with pygls never in."""
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add({"text": "one"}, {"text": "two"}, {"text": "three"})
    s = Served(workspace, config, NEVER_IDLE, [INITIALIZED, prompt(1, sid)])
    for n, text in ((1, "one"), (2, "two"), (3, "three")):
        if n > 1:
            s.send(prompt(n, sid))
        await eventually(lambda n=n: s.importer.started.is_set() or answered(s.out, n) is not None, f"prompt {n}")
        assert answered(s.out, n)["result"]["text"] == text  # type: ignore[index]
    assert not s.importer.started.is_set() and len(llm.requests) == 3
    s.inbox.put(None, None)
    assert await asyncio.wait_for(s.task, scaled(DEFAULT_TIMEOUT)) == 0
    assert not s.importer.started.is_set()


async def test_start_up_work_waits_for_an_early_turn_even_when_idle(
        workspace: Path, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """No quiet period at all, so the process counts as idle at once: App.start still does not begin
    while the first early turn waits for its permission; once the turn has ended it begins, with the
    import held (pygls is not in)."""
    started = threading.Event()
    real = App.start

    async def start(app: App) -> None:
        started.set()
        await real(app)

    monkeypatch.setattr(App, "start", start)
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add(write_call("one.txt", "1"), {"text": "written"})
    s = Served(workspace, config, 0.0, [INITIALIZED, prompt(1, sid)])
    await eventually(lambda: len(asked(s.out, "toycoder/requestPermission")) == 1, "the permission request")
    assert not started.is_set()
    s.send(reply(asked(s.out, "toycoder/requestPermission")[0]["id"], {"decision": "allow_once"}))
    await eventually(lambda: answered(s.out, 1) is not None, "the early turn's answer")
    await eventually(started.is_set, "App.start once the turn has ended")
    assert not s.importer.go.is_set()
    assert await s.end() == 0


async def test_an_idle_process_starts_its_start_up_work_before_pygls_is_in(
        workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """No prompt at all: once the process is idle the import starts, and so does App.start, without
    waiting for the (held) import to finish."""
    tag = unique_marker("toycoder-lsp-idle-mcp")
    config = write_config(tmp_path / "config.yaml", llm, extra=(
        f"mcp_servers:\n  toy: {{command: {sys.executable}, args: [{SERVER}, --tag, {tag}], permission: safe}}\n"))
    s = Served(workspace, config, 0.05, [INITIALIZED])
    await eventually(s.importer.started.is_set, "the import of an idle process")
    await eventually(lambda: processes_with(tag), "the MCP server while the import is held")
    assert not s.importer.go.is_set()
    assert await s.end() == 0
    await eventually(lambda: processes_with(tag) == [], "the MCP server to stop with the App")


async def test_open_document_news_does_not_postpone_the_import(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """A person typing (a full-text didChange far more often than the quiet period): the import
    starts anyway, and the changes are still taken meanwhile."""
    config = write_config(tmp_path / "config.yaml", llm)
    uri = (workspace / "README.md").as_uri()
    s = Served(workspace, config, 0.3, [INITIALIZED, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": "x"}}}])
    versions = itertools.count(2)

    async def typing() -> None:
        while not s.importer.started.is_set():
            s.send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": next(versions)}, "contentChanges": [{"text": "typed"}]}})
            await asyncio.sleep(0.01)

    typist = asyncio.ensure_future(typing())
    try:
        await eventually(s.importer.started.is_set, "the import while the person types")
    finally:
        typist.cancel()
    assert next(versions) > 3  # it did type meanwhile
    assert await s.end() == 0


@pytest.fixture
def early_paths(monkeypatch: pytest.MonkeyPatch) -> list[EarlyLsp]:
    """The EarlyLsp serve_lsp makes, to see where a frame went (here, or on to pygls)."""
    made: list[EarlyLsp] = []

    class Recorded(EarlyLsp):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(lsp_early, "EarlyLsp", Recorded)
    return made


async def test_a_prompt_once_the_import_started_is_pygls(
        workspace: Path, tmp_path: Path, llm: FakeLLM, early_paths: list[EarlyLsp]) -> None:
    """The idle process started the import; the first prompt comes while it runs: it waits for pygls
    (which starts App.start first) instead of running beside the import without the MCP tools."""
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add({"text": "from pygls"})
    s = Served(workspace, config, 0.05, [INITIALIZED])
    await eventually(s.importer.started.is_set, "the import of an idle process")
    s.send(prompt(1, sid))
    early = early_paths[0]
    await eventually(lambda: early.deferring or llm.requests, "the prompt taken here or left to pygls")
    assert early.deferring and not llm.requests and answered(s.out, 1) is None
    s.importer.go.set()
    await eventually(lambda: answered(s.out, 1) is not None, "pygls' answer")
    assert answered(s.out, 1)["result"]["text"] == "from pygls"  # type: ignore[index]
    assert await s.end() == 0


async def test_input_ending_while_frames_wait_for_pygls(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """The client ends its input while a request waits for the (held) import: on_end (the daemon's
    exit timer) is called at once and the early turn ends with its cancelled answer, without waiting
    for pygls; pygls, in within the grace, still answers the request queued before the end."""
    config = write_config(tmp_path / "config.yaml", llm)
    sid = await stored_session(workspace, config)
    llm.add(write_call("never.txt", "x"))
    s = Served(workspace, config, NEVER_IDLE, [INITIALIZED, prompt(1, sid)])
    await eventually(lambda: len(asked(s.out, "toycoder/requestPermission")) == 1, "the permission request")
    s.send({"jsonrpc": "2.0", "id": 2, "method": "toycoder/commands/list", "params": {}})
    await eventually(s.importer.started.is_set, "the import the request starts")
    s.inbox.put(None, None)
    await eventually(s.input_ended.is_set, "on_end while the import is held")
    await eventually(lambda: answered(s.out, 1) is not None, "the early turn's cancelled answer")
    assert answered(s.out, 1)["result"]["stopReason"] == "cancelled"  # type: ignore[index]
    assert not s.importer.go.is_set() and answered(s.out, 2) is None
    s.importer.go.set()
    assert await asyncio.wait_for(s.task, scaled(DEFAULT_TIMEOUT)) == 0
    assert answered(s.out, 2)["result"]["commands"]  # type: ignore[index]
    assert not (workspace / "never.txt").exists()
