"""The ACP registry's auth flow through the real daemon (issue 31), as Zed would run it: `--acp` with no
usable provider lists the "setup" terminal method and refuses session/new with auth_required (-32000);
the client runs the method's command (`toycoder-daemon --setup`, non-interactive here) in the same
environment; authenticate, then session/new and a turn work, in the same agent process. In-process:
unit/faces/acp/test_acp_auth.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp_client import Editor, new_session
from helpers import ROOT
from waiting import scaled

from toycoder_daemon.testing.fake_llm import FakeLLM


async def test_setup_through_the_auth_method_then_a_session_works(tmp_path, llm: FakeLLM, workspace) -> None:
    editor = Editor()
    env = {**os.environ, "TOYCODER_WARM": "0"}  # no config, no key: the user's first run
    with open(tmp_path / "daemon.log", "wb") as log:
        async with spawn_agent_process(editor, sys.executable, "-m", "toycoder_daemon", "--acp", env=env, cwd=ROOT,
                                       transport_kwargs={"stderr": log}, observers=[editor.observe]) as (conn, _):
            editor.conn = conn
            init = await conn.initialize(protocol_version=PROTOCOL_VERSION)
            [method] = init.auth_methods or []
            assert (method.id, method.type, method.args) == ("setup", "terminal", ["--setup"])
            with pytest.raises(RequestError) as refused:
                await new_session(conn, workspace)
            assert refused.value.code == -32000 and "--setup" in str(refused.value)

            setup = subprocess.run([sys.executable, "-m", "toycoder_daemon", *method.args, "--non-interactive",
                                    "--base-url", llm.base_url, "--api-key", "sk-registry-test", "--model", "fake-model"],
                                   env=env, capture_output=True, text=True, timeout=scaled(60), stdin=subprocess.DEVNULL)
            assert setup.returncode == 0, setup.stdout + setup.stderr

            await conn.authenticate(method_id=method.id)
            sid = await new_session(conn, workspace)
            llm.add({"text": "Set up and running."})
            done = await conn.prompt(session_id=sid, prompt=[text_block("hi")])
            assert done.stop_reason == "end_turn" and editor.text() == "Set up and running."
            assert llm.requests[-1]["headers"]["authorization"] == "Bearer sk-registry-test"
