"""ACP authentication (issue 31), in-process through the SDK's client side: initialize lists the
"setup" terminal auth method (what the ACP registry requires), session/new without a usable provider
answers auth_required (-32000) naming `--setup`, and once the config has a key (what `toycoder-daemon
--setup` writes) authenticate and session/new go through without restarting the agent. The setup flow
itself: e2e/test_setup_doctor_e2e.py."""

from __future__ import annotations

import pytest
from acp import RequestError, text_block
from acp_client import acp_face, new_session
from helpers import write_config

from toycoder_daemon.testing.fake_llm import FakeLLM


def no_key_config(path, llm: FakeLLM):
    path.write_text(f"providers:\n  openai:\n    api_keys: []\n    base_url: {llm.base_url}\n"
                    "    models: {default: fake-model, fast: fake-fast}\ndefault_provider: openai\n")
    return path


async def test_initialize_offers_the_setup_terminal_auth_method(tmp_path, llm) -> None:
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        init = await conn.initialize(protocol_version=1)
        methods = [m.model_dump(by_alias=True, exclude_none=True) for m in init.auth_methods or []]
        assert methods == [{"id": "setup", "name": "Set up a model provider", "type": "terminal", "args": ["--setup"],
                            "description": methods[0]["description"]}]


async def test_without_a_provider_session_new_asks_for_setup_and_works_after_it(tmp_path, llm, workspace) -> None:
    config = no_key_config(tmp_path / "config.yaml", llm)
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        with pytest.raises(RequestError) as refused:
            await new_session(conn, workspace)
        assert refused.value.code == -32000
        assert "toycoder-daemon --setup" in str(refused.value) and "no API key" in str(refused.value)
        assert refused.value.data["authMethods"] == ["setup"]
        write_config(config, llm)  # what the setup writes, while the agent runs
        await conn.authenticate(method_id="setup")
        sid = await new_session(conn, workspace)
        llm.add({"text": "Ready."})
        done = await conn.prompt(session_id=sid, prompt=[text_block("hi")])
        assert done.stop_reason == "end_turn" and editor.text() == "Ready."
        with pytest.raises(RequestError) as unknown:
            await conn.authenticate(method_id="oauth")
        assert unknown.value.code == -32602


async def test_session_new_reads_a_config_fixed_meanwhile_without_authenticate(tmp_path, llm, workspace) -> None:
    config = no_key_config(tmp_path / "config.yaml", llm)
    async with acp_face(tmp_path, llm, config=config) as (conn, editor, _):
        with pytest.raises(RequestError):
            await new_session(conn, workspace)
        write_config(config, llm)
        assert await new_session(conn, workspace)
