"""`toycoder doctor`'s tools line (issue 31) against the scripted server playing each kind: llama.cpp's
/props, Ollama's /api/show capabilities, and for any other server one tiny request offering a trivial
tool (accepted, refused with an error naming tools, the call sent back as text, or an answer that
cannot tell). As the person runs it: e2e/test_setup_doctor_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_config

from toycoder_daemon.app import doctor
from toycoder_daemon.config.model import load_config
from toycoder_daemon.llm import tools_ignored
from toycoder_daemon.llm.openai_client import PROBE_TOKENS, PROBE_TOOL
from toycoder_daemon.testing.dialects import Dialect
from toycoder_daemon.testing.fake_llm import FakeLLM


def tools_line(llm: FakeLLM, tmp_path: Path) -> doctor.Line:
    config, _ = load_config(str(write_config(tmp_path / "config.yaml", llm)))
    [line] = [line for line in doctor.check_provider(config) if line.what == "tools"]
    return line


def chat_requests(llm: FakeLLM) -> list[dict]:
    return [r for r in llm.requests if r["path"] == "/v1/chat/completions"]


@pytest.mark.parametrize("supports", [True, False])
def test_llama_cpp_is_asked_its_props(llm: FakeLLM, tmp_path: Path, supports: bool) -> None:
    llm.dialect = Dialect(server="llama.cpp", n_ctx=32768, supports_tools=supports)
    line = tools_line(llm, tmp_path)
    assert line.ok is supports
    assert line.text == f"/props says its chat template takes {'tools' if supports else 'no tools'}"
    assert line.fix == ("" if supports else tools_ignored.NO_TOOLS_FIX) and "--jinja" in tools_ignored.NO_TOOLS_FIX
    assert "/props" in [g["path"] for g in llm.gets] and chat_requests(llm) == []  # no probe: the server said


@pytest.mark.parametrize("capabilities", [["completion", "tools"], ["completion"]])
def test_ollama_is_asked_the_models_capabilities(llm: FakeLLM, tmp_path: Path, capabilities: list[str]) -> None:
    llm.dialect = Dialect(ollama_capabilities=capabilities)
    line = tools_line(llm, tmp_path)
    takes = "tools" in capabilities
    assert line.ok is takes
    assert line.text == f"Ollama's /api/show says fake-model takes {'tools' if takes else 'no tools'}"
    assert line.fix == ("" if takes else tools_ignored.OLLAMA_FIX)
    [show] = [r for r in llm.requests if r["path"] == "/api/show"]
    assert show["body"] == {"model": "fake-model"} and chat_requests(llm) == []


def test_an_ollama_without_capabilities_is_probed(llm: FakeLLM, tmp_path: Path) -> None:
    """An Ollama older than 0.6.4 (no `capabilities`: here its /api/show is missing) says nothing: the probe tells."""
    llm.dialect = Dialect(owned_by="library", tools_refused="registry.ollama.ai/library/gemma:2b does not support tools")
    line = tools_line(llm, tmp_path)
    assert line.ok is False and "does not support tools" in line.text and line.fix == tools_ignored.OLLAMA_FIX


def test_another_server_is_probed_with_one_tiny_request_offering_a_tool(llm: FakeLLM, tmp_path: Path) -> None:
    llm.add({"tool_calls": [{"name": PROBE_TOOL, "arguments": {}}]})
    line = tools_line(llm, tmp_path)
    assert line.ok is True and line.text == "taken: the model called the test tool"
    [probe] = chat_requests(llm)
    body = probe["body"]
    assert [t["function"]["name"] for t in body["tools"]] == [PROBE_TOOL] and body["max_tokens"] == PROBE_TOKENS
    assert probe["headers"]["authorization"] == "Bearer test-key-1" and llm.violations == []


def test_a_probe_accepted_without_a_call_says_what_it_does_not_show(llm: FakeLLM, tmp_path: Path) -> None:
    llm.add({"text": "pong"})
    line = tools_line(llm, tmp_path)
    assert line.ok is True and "accepted a request with tools" in line.text and "not shown" in line.text


def test_a_server_that_refuses_tools_is_said_with_its_message_and_the_fix(llm: FakeLLM, tmp_path: Path) -> None:
    llm.dialect = Dialect(owned_by="vllm", tools_refused='"auto" tool choice requires --enable-auto-tool-choice and '
                                                         "--tool-call-parser to be set")
    line = tools_line(llm, tmp_path)
    assert line.ok is False and "refused a request with tools (HTTP 400: \"auto\" tool choice requires" in line.text
    assert line.fix == tools_ignored.SERVER_FIX and "--enable-auto-tool-choice" in line.fix
    assert line.render().startswith("✗ tools: the test request offering a tool: it refused")


def test_a_server_that_sends_the_call_back_as_text_does_not_parse_tools(llm: FakeLLM, tmp_path: Path) -> None:
    llm.dialect = Dialect(tools_as_text=True)
    llm.add({"tool_calls": [{"name": PROBE_TOOL, "arguments": {}}]})
    line = tools_line(llm, tmp_path)
    assert line.ok is False and "came back as text (a <tool_call> tag)" in line.text


@pytest.mark.parametrize("failure", [{"status": 500, "error": "out of memory"}, {"status": 401, "error": "no tools key"}])
def test_an_answer_that_cannot_tell_is_said_unknown(llm: FakeLLM, tmp_path: Path, failure: dict) -> None:
    """A failure that names no refusal of tools (a 500; a 401 even when its text says "tools") tells nothing."""
    llm.add(failure)
    line = tools_line(llm, tmp_path)
    assert line.ok is None and line.text.startswith("not known (server kind unknown): the test request failed (HTTP ")
    assert failure["error"] in line.text and line.fix == ""
