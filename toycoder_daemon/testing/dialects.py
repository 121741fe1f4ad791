"""How real OpenAI-compatible servers differ from OpenAI, for the scripted server to play (issue 18).

Each was seen on a real server: llama.cpp's llama-server (overflow 400 with `n_ctx`, `n_ctx` in
/v1/models' meta, `Server: llama.cpp`), llama-cpp-python's server (HTTP 500 on an assistant message
with `content: null`, an empty 200 on a prompt over its context, `tools` ignored without
`tool_choice`), and servers that send no usage at all. Also played: a server that does not parse the
model's tool calls (llama.cpp without a tool-capable template, vLLM without --enable-auto-tool-choice),
which passes the model's `<tool_call>` text through as the reply; Ollama's /api/show capabilities;
and a server that refuses a request with tools (Ollama for a model without them, vLLM without
--enable-auto-tool-choice).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from toycoder_daemon.testing import script as steps

EMPTY: tuple[int, None] = (200, None)
"""judge()'s answer for "a 200 with an empty body"."""


@dataclass
class Dialect:
    usage: bool = True
    """False: never send usage, even when the request asks for it."""
    null_content_500: bool = False
    """llama-cpp-python: an assistant message with `content: null` is a 500 with a validation dump."""
    context_chars: int | None = None
    """Characters of message text over which the request is over the context window."""
    overflow: Literal["llama.cpp", "empty", "openai"] = "llama.cpp"
    """How an overflow is answered: llama-server's 400, llama-cpp-python's empty 200, OpenAI's 400."""
    n_ctx: int = 512
    """The context window named in the overflow error and in /v1/models' meta (llama.cpp)."""
    tools_need_choice: bool = False
    """llama-cpp-python: `tools` without `tool_choice` are ignored (the reply's tool calls are dropped)."""
    tools_as_text: bool = False
    """A server that does not parse tool calls: the scripted calls come back as the text the model wrote
    (Hermes/Qwen `<tool_call>{"name": ..., "arguments": ...}</tool_call>`), finish_reason stop."""
    server: str | None = None
    """The `Server` header of every answer, e.g. "llama.cpp"."""
    supports_tools: bool = True
    """llama.cpp's /props `chat_template_caps.supports_tools`: false for a template without tools."""
    owned_by: str = "fake_llm"
    """/v1/models' `owned_by`: llama-cpp-python says "me", vLLM "vllm" (llama.cpp: see `server`)."""
    ollama_capabilities: list[str] | None = None
    """Play Ollama: /v1/models says `owned_by: library` and POST /api/show answers these `capabilities`
    ("completion", and "tools" for a model that takes them)."""
    tools_refused: str | None = None
    """A request that offers tools is answered HTTP 400 with this message, as servers without tool calling
    do (Ollama: "MODEL does not support tools"; vLLM without --enable-auto-tool-choice)."""


def llama_cpp_overflow(n_prompt: int, n_ctx: int) -> tuple[int, dict[str, Any]]:
    """llama-server's answer to a prompt over its context (build 0c1e570, seen on the wire)."""
    return 400, {"error": {"code": 400, "message": f"request ({n_prompt} tokens) exceeds the available context size "
                           f"({n_ctx} tokens), try increasing it", "type": "exceed_context_size_error",
                           "n_prompt_tokens": n_prompt, "n_ctx": n_ctx}}


def judge(d: Dialect, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None] | None:
    """What this server answers instead of the scripted reply: (status, JSON body), EMPTY, or None."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if d.null_content_500 and any(m.get("role") == "assistant" and m.get("content") is None for m in messages):
        return 500, {"error": {"message": "1 validation error for ChatCompletionRequestAssistantMessage\ncontent\n"
                               "  Input should be a valid string [type=string_type, input_value=None]",
                               "type": "internal_server_error"}}
    if d.tools_refused is not None and body.get("tools"):
        return 400, {"error": {"message": d.tools_refused, "type": "invalid_request_error", "code": None}}
    chars = sum(len(steps.text_of(m.get("content"))) for m in messages)
    if d.context_chars is not None and chars > d.context_chars:
        if d.overflow == "empty":
            return EMPTY
        if d.overflow == "openai":
            return 400, {"error": {"message": f"This model's maximum context length is {d.n_ctx} tokens. However, "
                                   f"your messages resulted in {chars // 4} tokens.", "type": "invalid_request_error",
                                   "param": "messages", "code": "context_length_exceeded"}}
        return llama_cpp_overflow(chars // 4, d.n_ctx)
    return None


def shape_reply(d: Dialect, body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply as this server would send it: tool calls dropped when it ignores tools, or
    left as the model's text when it does not parse them."""
    if d.tools_need_choice and body.get("tools") and not body.get("tool_choice") and reply.get("tool_calls"):
        return {k: v for k, v in reply.items() if k != "tool_calls"} | {"text": reply.get("text") or "I cannot."}
    if d.tools_as_text and reply.get("tool_calls"):
        text = "".join(f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {args}}}\n</tool_call>'
                       for _, name, args in steps.tool_calls(reply, lambda: ""))
        return {k: v for k, v in reply.items() if k not in ("tool_calls", "finish_reason")} | {
            "text": (reply.get("text") or "") + text}
    return reply


def model_entry(d: Dialect, model: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": model, "object": "model", "created": 0, "owned_by": d.owned_by}
    if d.server == "llama.cpp":
        entry |= {"owned_by": "llamacpp", "meta": {"n_ctx": d.n_ctx, "n_ctx_train": 8192}}
    elif d.ollama_capabilities is not None:
        entry["owned_by"] = "library"
    return entry


def ollama_show(d: Dialect, body: Any, models: list[str]) -> tuple[int, dict[str, Any]]:
    """Ollama's POST /api/show (0.6.4 and later: `capabilities`), or its 404 for a model it lacks."""
    name = body.get("model") or body.get("name") if isinstance(body, dict) else None
    if d.ollama_capabilities is None:
        return 404, {"error": "404 page not found"}
    if name not in models:
        return 404, {"error": f"model '{name}' not found"}
    return 200, {"modelfile": "", "parameters": "", "template": "{{ .Prompt }}",
                 "details": {"format": "gguf", "family": "llama"}, "capabilities": list(d.ollama_capabilities)}


def props(d: Dialect) -> dict[str, Any]:
    """llama-server's GET /props, the parts the daemon reads."""
    return {"default_generation_settings": {"n_ctx": d.n_ctx},
            "chat_template_caps": {"supports_tools": d.supports_tools, "supports_tool_calls": d.supports_tools}}
