"""A prompt to a new LSP process is answered on the early path (lsp_early.py, lsp_early_link.py)
while pygls loads: its frames are the pygls path's, the client's answers to its requests reach it
before and after the hand-over (never pygls), it can be cancelled, and open buffers reach read_file.
In-process, plus one run through a real daemon whose lsprotocol import is held."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import write_config
from helpers import write_call
from inproc_app import eventually
from test_lsp_early import INITIALIZED, Capture, HeldDaemon, body, initialize, queued
from waiting import DEFAULT_TIMEOUT, wait_until

from toycoder_daemon.app import App
from toycoder_daemon.lsp_early import EarlyHost, EarlyLsp
from toycoder_daemon.lsp_early_link import EarlyLink, app_params, plain_capabilities
from toycoder_daemon.rpc_io import Dispatcher
from toycoder_daemon.server import make_server
from toycoder_daemon.stdio import FrameWriter, Inbox
from toycoder_daemon.testing.fake_llm import FakeLLM

CAPS = {"experimental": {"toycoder": {"permissionRequest": True}}, "window": {"workDoneProgress": True}}


def init(workspace: Path, config: Path) -> dict[str, Any]:
    msg = initialize(workspace, config)
    msg["params"]["capabilities"] = CAPS
    return msg


def messages(out: Capture) -> list[dict[str, Any]]:
    return [json.loads(f.partition(b"\r\n\r\n")[2]) for f in out.frames]


def prompt(msg_id: Any, sid: str, text: str = "go") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "toycoder/prompt", "params": {"sessionId": sid, "text": text}}


def reply(msg_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def start(workspace: Path, config: Path) -> tuple[Capture, EarlyLsp, Inbox]:
    msg = init(workspace, config)
    opened = app_params(msg["params"])
    caps = plain_capabilities(msg["params"])
    assert opened is not None and caps is not None
    host = EarlyHost(App.open(*opened))
    out, later = Capture(), Inbox()
    e = EarlyLsp(host, out.write, later, lambda e: EarlyLink(host, caps, e.send))
    for m in (msg, INITIALIZED):
        e.frame(body(m), None)
    return out, e, later


def answered(out: Capture, msg_id: Any) -> dict[str, Any] | None:
    return next((m for m in messages(out) if m.get("id") == msg_id and "method" not in m), None)


def asked(out: Capture, method: str) -> list[dict[str, Any]]:
    return [m for m in messages(out) if m.get("method") == method and "id" in m]


def normalised(msgs: list[dict[str, Any]], sid: str, turn_id: str) -> list[Any]:
    """Without what differs between two runs of the same turn: session, turn and progress ids, and
    where the streamed text was cut into deltas (that is the network's and coalesce.py's doing)."""
    out: list[Any] = []
    for m in json.loads(json.dumps(msgs).replace(sid, "SID").replace(turn_id, "TURN")):
        if m.get("method") == "window/workDoneProgress/create":
            m["id"] = "PROGRESS"
        update = m.get("params", {}).get("update", {}) if m.get("method") == "toycoder/update" else {}
        last = out[-1]["params"]["update"] if out and out[-1].get("method") == "toycoder/update" else {}
        if update.get("kind") == last.get("kind") == "text_delta":
            last["text"] += update["text"]
            continue
        out.append(m)
    return out


async def test_an_early_turn_writes_what_the_pygls_path_writes(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    stored = App.open(workspace, str(config))
    sids = [stored.new_session("a").id, stored.new_session("b").id]
    await stored.shutdown()
    llm.add({"text": "hello there, \u00fc"}, {"text": "hello there, \u00fc"})
    # the pygls path
    server = make_server()
    full = Capture()
    writer = FrameWriter(full)  # type: ignore[arg-type]
    server.protocol.set_writer(writer)
    dispatcher = Dispatcher(server, writer, lambda: None)
    for msg in [init(workspace, config), INITIALIZED, prompt(1, sids[0])]:
        dispatcher.frame(body(msg), None)
    await eventually(lambda: answered(full, 1) is not None, "pygls' answer")
    # the early path
    ours, e, later = start(workspace, config)
    e.frame(body(prompt(1, sids[1])), None)
    await eventually(lambda: answered(ours, 1) is not None, "the early answer")
    assert [m["method"] for m in queued(later)] == ["initialize"]  # nothing waited for pygls
    pygls_msgs = [m for m in messages(full) if m.get("id") != 0]  # 0: pygls' initialize answer
    a, b = answered(full, 1), answered(ours, 1)
    assert a is not None and b is not None and b["result"]["text"] == "hello there, \u00fc"
    assert normalised(messages(ours), sids[1], b["result"]["turnId"]) == normalised(
        pygls_msgs, sids[0], a["result"]["turnId"])
    assert server.app is not None
    for app in (server.app, e.host.app):
        await app.shutdown()


async def test_a_permission_round_trip_then_the_hand_over(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """The first permission is answered before pygls is in, the second after the hand-over: both
    reach the turn, neither reaches pygls, and the answer follows every update."""
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add(write_call("one.txt", "1"), write_call("two.txt", "2"), {"text": "written"})
    out, e, later = start(workspace, config)
    sid = e.host.app.new_session("t").id
    e.frame(body(prompt(7, sid)), None)
    await eventually(lambda: len(asked(out, "toycoder/requestPermission")) == 1, "the first permission request")
    first = asked(out, "toycoder/requestPermission")[0]
    assert first["params"]["tool"] == "write_file" and first["params"]["sessionId"] == sid
    e.frame(body(reply(first["id"], {"decision": "allow_once"})), None)
    await eventually(lambda: len(asked(out, "toycoder/requestPermission")) == 2, "the second permission request")
    # the hand-over, as serve_lsp does it: later frames wait for pygls, writes go to its writer
    e.frame(body({"jsonrpc": "2.0", "id": 8, "method": "toycoder/commands/list", "params": {}}), None)
    after = Capture()
    e.deferring, e.write = True, after.write
    second = asked(out, "toycoder/requestPermission")[1]
    e.frame(body(reply(second["id"], {"decision": "allow_once"})), None)
    await eventually(lambda: answered(after, 7) is not None, "the answer after the hand-over")
    result = answered(after, 7)
    assert result is not None and result["result"]["text"] == "written"
    assert (workspace / "one.txt").read_text() == "1" and (workspace / "two.txt").read_text() == "2"
    assert [m.get("id") for m in queued(later)] == [0, 8]  # the answers to our requests never went there
    updates = [m for m in messages(out) + messages(after) if m.get("method") == "toycoder/update"]
    kinds = [u["params"]["update"]["kind"] for u in updates]
    assert kinds.count("tool_call") == 2 and kinds.count("tool_result") == 2 and "text_delta" in kinds
    assert messages(after)[-1]["id"] == 7  # after every update
    await e.host.app.shutdown()


async def test_an_early_turn_is_cancelled_by_toycoder_cancel(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """toycoder/cancel (answered early) ends the turn, which answers with its cancelled end."""
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add(write_call("no.txt", "x"))
    out, e, later = start(workspace, config)
    sid = e.host.app.new_session("t").id
    e.frame(body(prompt(1, sid)), None)
    await eventually(lambda: len(asked(out, "toycoder/requestPermission")) == 1, "the permission request")
    e.frame(body({"jsonrpc": "2.0", "id": 2, "method": "toycoder/cancel", "params": {"sessionId": sid}}), None)
    await eventually(lambda: answered(out, 1) is not None and answered(out, 2) is not None, "both answers")
    assert answered(out, 2)["result"] == {"cancelled": True}  # type: ignore[index]
    assert answered(out, 1)["result"]["stopReason"] == "cancelled"  # type: ignore[index]
    assert not (workspace / "no.txt").exists()
    assert [m.get("id") for m in queued(later)] == [0]
    await e.host.app.shutdown()


async def test_an_early_turn_is_cancelled_by_cancel_request(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """$/cancelRequest for an early prompt's id ends it, as on the pygls path: the cancelled handler
    ends its turn and answers with it (pygls' -32800 is only for a request cancelled before its
    handler caught it)."""
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add(write_call("no.txt", "y"))
    out, e, later = start(workspace, config)
    sid = e.host.app.new_session("t").id
    e.frame(body(prompt(3, sid)), None)
    await eventually(lambda: len(asked(out, "toycoder/requestPermission")) == 1, "the permission request")
    e.frame(body({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}}), None)
    await eventually(lambda: answered(out, 3) is not None, "the cancelled request's answer")
    assert answered(out, 3)["result"]["stopReason"] == "cancelled"  # type: ignore[index]
    assert not (workspace / "no.txt").exists()
    assert [m.get("id") for m in queued(later)] == [0]
    await e.host.app.shutdown()


async def test_open_buffers_are_taken_early(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "src/app.py"}}]}, {"text": "read"})
    out, e, later = start(workspace, config)
    uri = (workspace / "src" / "app.py").as_uri()
    e.frame(body({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": "unsaved\n"}}}), None)
    e.frame(body({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "unsaved twice\n"}]}}), None)
    sid = e.host.app.new_session("t").id
    e.frame(body(prompt(1, sid)), None)
    await eventually(lambda: answered(out, 1) is not None, "the answer")
    sent = json.dumps(llm.requests[-1])
    assert "unsaved twice" in sent
    path = (workspace / "src" / "app.py").resolve()
    assert e.host.app.workspace.document_version(path, "unsaved twice\n") == 2
    e.frame(body({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}}),
            None)
    assert path not in e.host.app.workspace.open_documents
    # a ranged change is pygls' to structure: it and everything after it wait
    e.frame(body({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"range": {}, "text": "x"}]}}), None)
    assert [m.get("method") for m in queued(later)] == ["initialize", "textDocument/didChange"]
    await e.host.app.shutdown()


def test_a_prompt_is_answered_while_lsprotocol_is_held(tmp_path: Path, workspace: Path, llm: FakeLLM) -> None:
    """Through a real daemon: a turn's text and a permission round trip while pygls cannot be in;
    a request for pygls starts the import, and a second prompt sent after that is pygls' too; the
    first turn's second permission is answered after the hand-over; toycoder/cancel through pygls
    ends the second prompt's turn (the same App)."""
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add(write_call("one.txt", "1"), write_call("two.txt", "2"), write_call("three.txt", "3"), {"text": "written"},
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}, {"text": "read"})
    (workspace / "notes.txt").write_text("on disk\n")
    notes = (workspace / "notes.txt").resolve().as_uri()
    d = HeldDaemon(tmp_path, config)
    proc, send, entered, release = d.proc, d.send, d.entered, d.release
    seen: list[dict[str, Any]] = []

    def until(test: Any) -> dict[str, Any]:
        while True:
            m = d.frames.get(timeout=DEFAULT_TIMEOUT)
            seen.append(m)
            if test(m):
                return m

    try:
        send(init(workspace, config))
        until(lambda m: m.get("id") == 0)
        send(INITIALIZED)
        send({"jsonrpc": "2.0", "id": 1, "method": "toycoder/session/new", "params": {}})
        sid = until(lambda m: m.get("id") == 1)["result"]["sessionId"]
        send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": notes, "languageId": "text", "version": 1, "text": "opened early\n"}}})
        send(prompt(2, sid))
        first = until(lambda m: m.get("method") == "toycoder/requestPermission")
        send(reply(first["id"], {"decision": "allow_once"}))
        second = until(lambda m: m.get("method") == "toycoder/requestPermission")
        send({"jsonrpc": "2.0", "id": 4, "method": "toycoder/session/new", "params": {}})
        other = until(lambda m: m.get("id") == 4)["result"]["sessionId"]
        assert not entered.exists()  # a whole permission round trip, the import never wanted
        send({"jsonrpc": "2.0", "id": 3, "method": "toycoder/commands/list", "params": {}})
        wait_until(entered.exists, what="a request for pygls to start the lsprotocol import")
        send(prompt(5, other))  # the import has started: this prompt is pygls'
        release.touch()
        def third() -> list[dict[str, Any]]:  # pygls' answer to 3 may come before or after it
            return [m for m in seen if m.get("method") == "toycoder/requestPermission"][2:]

        listed = until(lambda m: m.get("id") == 3 and "method" not in m)
        assert listed["result"]["commands"]  # pygls is in
        if not third():
            until(lambda m: m.get("method") == "toycoder/requestPermission")
        assert third()[0]["params"]["sessionId"] == other
        send({"jsonrpc": "2.0", "id": 6, "method": "toycoder/cancel", "params": {"sessionId": other}})
        assert until(lambda m: m.get("id") == 6 and "method" not in m)["result"] == {"cancelled": True}
        assert until(lambda m: m.get("id") == 5 and "method" not in m)["result"]["stopReason"] == "cancelled"
        assert not (workspace / "three.txt").exists()
        send(reply(second["id"], {"decision": "allow_once"}))
        answer = until(lambda m: m.get("id") == 2 and "method" not in m)
        assert answer["result"]["text"] == "written" and answer["result"]["stopReason"] == "end_turn"
        assert (workspace / "one.txt").read_text() == "1" and (workspace / "two.txt").read_text() == "2"
        updates = [m["params"]["update"]["kind"] for m in seen if m.get("method") == "toycoder/update"
                   and m["params"]["turnId"] == answer["result"]["turnId"]]
        assert updates.count("tool_result") == 2 and "text_delta" in updates
        # pygls, in now, takes news of a document opened before it was (it keeps its own copy)
        send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": notes, "version": 2},
            "contentChanges": [{"text": "changed after the hand-over\n"}]}})
        send(prompt(7, sid, "read notes"))
        read = until(lambda m: m.get("method") == "toycoder/update" and m["params"]["update"]["kind"] == "tool_result")
        assert "changed after the hand-over" in read["params"]["update"]["output"]
        assert until(lambda m: m.get("id") == 7 and "method" not in m)["result"]["text"] == "read"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=DEFAULT_TIMEOUT)
    assert proc.returncode == 0


async def test_input_ending_ends_an_early_turn(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """Closing stdin before pygls is in ends the turn (as on the pygls path): its answer is written
    without waiting for a permission nobody can give."""
    config = write_config(tmp_path / "config.yaml", llm)
    llm.add(write_call("never.txt", "x"))
    out, e, later = start(workspace, config)
    sid = e.host.app.new_session("t").id
    e.frame(body(prompt(1, sid)), None)
    await eventually(lambda: len(asked(out, "toycoder/requestPermission")) == 1, "the permission request")
    e.frame(None, None)
    assert e.ended.is_set()
    await e.drain()
    assert answered(out, 1)["result"]["stopReason"] == "cancelled"  # type: ignore[index]
    assert not (workspace / "never.txt").exists()
    await e.host.app.shutdown()


async def test_a_prompt_cancelled_in_the_same_read_is_answered(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """Esc at once: the $/cancelRequest arrives before the answering task's first step; pygls answers
    such a request -32800, and so does the early path (it used to answer nothing)."""
    config = write_config(tmp_path / "config.yaml", llm)
    out, e, _ = start(workspace, config)
    sid = e.host.app.new_session("t").id
    try:
        e.frame(body(prompt(1, sid)), None)
        e.frame(body({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}), None)
        await eventually(lambda: answered(out, 1) is not None, "the cancelled prompt's answer")
        assert answered(out, 1)["error"]["code"] == -32800  # type: ignore[index]
    finally:
        await e.host.app.shutdown()


async def test_a_version_pygls_refuses_is_left_to_it(workspace: Path, tmp_path: Path, llm: FakeLLM) -> None:
    """Versions are int32 in lsprotocol: one outside it is not taken early (pygls drops it as malformed)."""
    config = write_config(tmp_path / "config.yaml", llm)
    out, e, _ = start(workspace, config)
    path = (workspace / "src" / "app.py").resolve()
    try:
        for version, text in ((2**31 - 1, "taken\n"), (2**31, "left to pygls\n")):
            e.frame(body({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": path.as_uri(), "languageId": "python", "version": version, "text": text}}}), None)
        assert e.host.app.workspace.open_documents[path] == "taken\n" and e.deferring  # the second: for pygls
    finally:
        await e.host.app.shutdown()
