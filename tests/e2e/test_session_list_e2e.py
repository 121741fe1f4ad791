"""Issue 17: two ACP daemons on one data directory; each one's session/list follows what the other
does (new sessions, turns and renames in a session the first wrote too, deletes) as well as what it
does itself, which its index takes in as written (test_session_list_own_writes.py tests that part
in-process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block
from acp_client import acp_daemon, delete
from acp_client import new_session as acp_new_session

from toycoder_daemon.testing.fake_llm import FakeLLM


async def titles(conn: Any, workspace: Path) -> dict[str, str | None]:
    return {s.session_id: s.title for s in (await conn.list_sessions(cwd=str(workspace))).sessions}


async def test_each_daemons_list_follows_both(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    async with acp_daemon(tmp_path, llm) as (a, _, _), acp_daemon(tmp_path, llm) as (b, _, _):
        assert await titles(a, workspace) == {}
        mine = await acp_new_session(a, workspace)
        llm.add({"text": "A answers."})
        await a.prompt(session_id=mine, prompt=[text_block("first in a")])
        assert await titles(a, workspace) == {mine: "first in a"}

        theirs = await acp_new_session(b, workspace)  # new, in the other daemon
        llm.add({"text": "B answers."})
        await b.prompt(session_id=theirs, prompt=[text_block("first in b")])
        assert await titles(a, workspace) == {mine: "first in a", theirs: "first in b"}

        await b.load_session(cwd=str(workspace), session_id=mine, mcp_servers=[])
        await b.prompt(session_id=mine, prompt=[text_block("/title renamed in b")])  # appended by b
        assert (await titles(a, workspace))[mine] == "renamed in b"
        await a.prompt(session_id=mine, prompt=[text_block("/title renamed in a")])  # a writes after b did
        assert (await titles(a, workspace))[mine] == "renamed in a"
        assert (await titles(b, workspace))[mine] == "renamed in a"

        await delete(b, theirs)
        assert await titles(a, workspace) == {mine: "renamed in a"}
