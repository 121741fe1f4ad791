"""The ACP face on another machine (issue 31, docs/remote.md): the ACP SDK's client starts the daemon
through the ssh-like wrapper (tests/ssh_like, tests/remote_host.py: its own HOME, config, key and data,
its own copy of the workspace at the same path) and declares no fs capability, so the daemon reads and
writes its own disk: session/new, a prompt, an approved write and /undo land in the remote copy only.
The same flows with a local daemon: test_acp_e2e.py and test_undo_e2e.py."""

from __future__ import annotations

from pathlib import Path

from acp import text_block
from acp_client import acp_daemon, new_session
from helpers import write_call
from remote_host import REMOTE_KEY, make_host

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_a_prompt_a_write_and_undo_go_to_the_remote_disk(tmp_path: Path, llm: FakeLLM, workspace: Path) -> None:
    host = make_host(tmp_path / "host", workspace, llm.base_url)
    readme, remote_readme = workspace / "README.md", host.remote("README.md")
    grown = "# Demo\nA bigger project.\n"
    llm.add({"text": "Hello from there."}, write_call("README.md", grown), {"text": "Written."})
    async with acp_daemon(tmp_path, llm, command=host.command("--acp", "--log-level", "INFO")) as (conn, editor, proc):
        sid = await new_session(conn, workspace)
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hi")])).stop_reason == "end_turn"
        assert editor.text() == "Hello from there."
        assert llm.requests[-1]["headers"]["authorization"] == f"Bearer {REMOTE_KEY}"  # the remote's config

        await conn.prompt(session_id=sid, prompt=[text_block("grow the readme")])
        assert editor.requests("session/request_permission"), "the write was not asked for"
        assert not editor.requests("fs/write_text_file"), "the daemon wrote through a client without fs"
        assert remote_readme.read_text() == grown
        assert readme.read_text() == "# Demo\nA tiny project.\n", "the write landed in the local file"

        await conn.prompt(session_id=sid, prompt=[text_block("/undo")])
        assert remote_readme.read_text() == "# Demo\nA tiny project.\n", editor.text()
        assert readme.read_text() == "# Demo\nA tiny project.\n"
    assert proc.returncode == 0, "the daemon over there did not end with its stdin"
    assert list(host.data.rglob("*.jsonl")), "the session is not kept over there"
