"""Issue 33, listing: `session/list` without `cwd` lists every workspace's sessions in the data dir
(even in a fresh process), newest first, each with its `cwd`, a page at a time (`cursor`); with
`cwd`, that workspace's. A session without messages is never listed, not even by the daemon that
has it open. The LSP face: its workspace by default, `{all}` as ACP's list without cwd, `{cwd}`.
Both faces in-process."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, new_session
from rpc import RpcError

from toycoder_daemon.sessions import catalog
from toycoder_daemon.testing.fake_llm import FakeLLM


def two_workspaces(tmp_path: Path, workspace: Path) -> tuple[Path, Path]:
    other = tmp_path / "other"
    other.mkdir()
    return workspace.resolve(), other.resolve()


async def talked(conn, cwd: Path, text: str) -> str:
    sid = await new_session(conn, cwd)
    await conn.prompt(session_id=sid, prompt=[text_block(text)])
    return sid


async def test_acp_lists_every_workspace_newest_first_in_pages(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ws, other = two_workspaces(tmp_path, workspace)
    llm.add({"text": "one"}, {"text": "two"}, {"text": "three"})
    async with acp_face(tmp_path, llm) as (conn, _, _):
        a = await talked(conn, ws, "first")
        b = await talked(conn, other, "second")
        c = await talked(conn, ws, "third")
        empty = await new_session(conn, ws)  # open here, no messages: never listed
        listed = (await conn.list_sessions()).sessions
        assert [(s.session_id, s.cwd) for s in listed] == [(c, str(ws)), (b, str(other)), (a, str(ws))]
        assert empty not in [s.session_id for s in (await conn.list_sessions(cwd=str(ws))).sessions]
    async with acp_face(tmp_path, llm) as (conn, _, _):  # a fresh process: nothing open, all listed
        first = await conn.list_sessions()
        assert [s.session_id for s in first.sessions] == [c, b, a] and first.next_cursor is None
        assert first.sessions[0].title == "third" and first.sessions[0].updated_at
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(other))).sessions] == [b]
        assert [s.session_id for s in (await conn.list_sessions(cwd=str(ws))).sessions] == [c, a]
        assert (await conn.list_sessions(cwd=str(tmp_path / "nowhere"))).sessions == []

        monkeypatch.setattr(catalog, "PAGE_SIZE", 2)
        page1 = await conn.list_sessions()
        assert [s.session_id for s in page1.sessions] == [c, b] and page1.next_cursor
        page2 = await conn.list_sessions(cursor=page1.next_cursor)
        assert [s.session_id for s in page2.sessions] == [a] and page2.next_cursor is None
        with pytest.raises(RequestError) as bad:
            await conn.list_sessions(cursor="not-a-cursor")
        assert bad.value.code == -32602 and "cursor" in str(bad.value.data)
        with pytest.raises(RequestError) as relative:
            await conn.list_sessions(cwd="relative/dir")
        assert relative.value.code == -32602


def test_a_session_written_between_pages_neither_repeats_nor_hides_one() -> None:
    rows = [catalog.Listed(catalog.SessionSummary(f"s{i}", "", 0.0, float(10 - i), 1), "/w") for i in range(5)]
    first, cursor = catalog.page(rows, None, 2)
    assert [r.summary.id for r in first] == ["s0", "s1"] and cursor
    moved = [catalog.Listed(catalog.SessionSummary("s3", "", 0.0, 99.0, 2), "/w")] + [r for r in rows if r.summary.id != "s3"]
    rest, cursor = catalog.page(moved, cursor, 10)
    assert [r.summary.id for r in rest] == ["s2", "s4"] and cursor is None  # s3 went to the front
    with pytest.raises(catalog.BadCursor):
        catalog.page(rows, "e30=", 2)  # valid base64 of "{}": still not ours


async def test_lsp_lists_its_workspace_another_or_all(start_daemon, tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ws, other = two_workspaces(tmp_path, workspace)
    llm.add({"text": "acp"})
    async with acp_face(tmp_path, llm) as (conn, _, _):
        elsewhere = await talked(conn, other, "made elsewhere")
    llm.add({"text": "lsp"})
    d = await start_daemon()
    here = (await d.call("toycoder/session/new", {}))["sessionId"]
    empty = (await d.call("toycoder/session/new", {"title": "titled but empty"}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": here, "text": "made here"})
    own = (await d.call("toycoder/session/list", {}))["sessions"]
    assert [s["sessionId"] for s in own] == [here] and "cwd" not in own[0]
    every = (await d.call("toycoder/session/list", {"all": True}))["sessions"]
    assert [(s["sessionId"], s["cwd"]) for s in every] == [(here, str(ws)), (elsewhere, str(other))]
    assert empty not in [s["sessionId"] for s in every]
    theirs = (await d.call("toycoder/session/list", {"cwd": str(other)}))["sessions"]
    assert [(s["sessionId"], s["cwd"]) for s in theirs] == [(elsewhere, str(other))]

    monkeypatch.setattr(catalog, "PAGE_SIZE", 1)
    page1 = await d.call("toycoder/session/list", {"all": True})
    assert [s["sessionId"] for s in page1["sessions"]] == [here]
    page2 = await d.call("toycoder/session/list", {"all": True, "cursor": page1["nextCursor"]})
    assert [s["sessionId"] for s in page2["sessions"]] == [elsewhere] and "nextCursor" not in page2
    with pytest.raises(RpcError) as bad:
        await d.call("toycoder/session/list", {"cursor": "zzz"})
    assert bad.value.code == -32602 and "cursor" in bad.value.message


async def test_acp_requests_before_initialize_are_refused(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    """As on the LSP face (-32002 there): ACP's -32002 means "resource not found", so -32600."""
    from acp import PROTOCOL_VERSION
    from acp_client import Editor
    from helpers import write_config
    from inproc import acp_agent

    editor = Editor()
    async with acp_agent(editor, write_config(tmp_path / "c.yaml", llm), observers=[editor.observe]) as (conn, proc):
        for call in (conn.new_session(cwd=str(workspace), mcp_servers=[]), conn.list_sessions()):
            with pytest.raises(RequestError) as early:
                await call
            assert early.value.code == -32600 and "initialize" in str(early.value)
        await conn.cancel(session_id="x")  # a notification: ignored, no answer
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        assert (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
    assert proc.returncode == 0


def cursor_of(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


HOSTILE_CURSORS = [cursor_of("[" + "9" * 400 + ', "s1"]'),  # float() of it: OverflowError
                   cursor_of("[" * 100_000 + "]" * 100_000),  # json.loads: RecursionError
                   cursor_of('[1.5, 7]'), cursor_of('["1.5", "s1"]'), cursor_of('[true, "s1"]'),
                   cursor_of('[NaN, "s1"]'), cursor_of('[1.5, "s1", 3]'), cursor_of('{"a": 1}')]


@pytest.mark.parametrize("cursor", HOSTILE_CURSORS)
def test_a_cursor_of_the_wrong_shape_is_a_bad_cursor(cursor: str) -> None:
    rows = [catalog.Listed(catalog.SessionSummary("s0", "", 0.0, 1.0, 1), "/w")]
    with pytest.raises(catalog.BadCursor):
        catalog.page(rows, cursor, 2)


async def test_a_hostile_cursor_is_invalid_params_not_an_internal_error(start_daemon, llm: FakeLLM) -> None:
    d = await start_daemon()
    for cursor in HOSTILE_CURSORS[:2]:
        with pytest.raises(RpcError) as bad:
            await d.call("toycoder/session/list", {"all": True, "cursor": cursor})
        assert bad.value.code == -32602, bad.value
    assert (await d.call("toycoder/session/list", {}))["sessions"] == []  # and it goes on
