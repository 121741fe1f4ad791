"""A prompt over the model's context window is recognised whatever the server's dialect (issue 18):
llm/overflow.py's is_overflow and context_size on the errors real servers send. What the daemon
then does: e2e/test_context_overflow_e2e.py."""

from __future__ import annotations

import pytest

from toycoder_daemon.llm.overflow import context_size, is_overflow
from toycoder_daemon.testing.dialects import llama_cpp_overflow


@pytest.mark.parametrize("status, body, size", [
    (*llama_cpp_overflow(833, 512), 512),
    (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages "
                                "resulted in 9000 tokens.", "code": "context_length_exceeded"}}, 8192),
    (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you "
                                         "requested 2100 tokens (2000 in the messages, 100 in the completion).",
           "type": "BadRequestError", "code": 400}, 2048),
    (400, {"error": {"message": "input length exceeds maximum context length"}}, None),  # Ollama
    (500, {"error": "prompt is too long"}, None),
])
def test_overflow_dialects_are_recognised(status: int, body: dict, size: int | None) -> None:
    assert is_overflow(status, body)
    assert context_size(body) == size


@pytest.mark.parametrize("status, body", [
    (400, {"error": {"message": "messages: field required"}}),
    (429, {"error": {"message": "Rate limit reached for tokens per min"}}),
    (200, {"error": {"message": "context length"}}),
])
def test_other_errors_are_not_overflow(status: int, body: dict) -> None:
    assert not is_overflow(status, body)
