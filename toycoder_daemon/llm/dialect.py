"""What an OpenAI-compatible server is (its kind), what it says about its models, and the request
quirks it needs. Seen on real servers (issue 18):

- llama.cpp's llama-server: `Server: llama.cpp`, /v1/models `owned_by: llamacpp` with `meta.n_ctx`
  (the context it runs with), /props `default_generation_settings.n_ctx` and
  `chat_template_caps.supports_tools` (false: the model's template has no tools, so they are dropped).
- llama-cpp-python's server (uvicorn): `owned_by: me`; HTTP 500 on an assistant message with
  `content: null` (quirk `empty_content`); `tools` ignored unless `tool_choice` is sent.
- vLLM (uvicorn): `owned_by: vllm`, `max_model_len`. Ollama: `owned_by: library`/`ollama`; its native
  POST /api/show `{"model": ...}` lists the model's `capabilities` ("tools" when it takes them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

QUIRKS = {
    "empty_content": 'send `content: ""` instead of null on assistant messages with tool calls',
    "no_tool_choice": 'do not send `tool_choice: "auto"` with the tools',
}
KIND_QUIRKS: dict[str, frozenset[str]] = {
    # llama-cpp-python and vLLM both run on uvicorn; "" is harmless to vLLM, null is a 500 to the other
    "llama-cpp-python": frozenset({"empty_content"}),
    "uvicorn": frozenset({"empty_content"}),
}
_OWNERS = {"llamacpp": "llama.cpp", "me": "llama-cpp-python", "vllm": "vllm", "library": "ollama", "ollama": "ollama",
           "openai": "openai", "system": "openai", "openai-internal": "openai"}


def kind_from_header(server: str | None) -> str | None:
    s = (server or "").lower()
    if "llama.cpp" in s:
        return "llama.cpp"
    return "uvicorn" if "uvicorn" in s else None


@dataclass
class ServerInfo:
    kind: str | None = None
    models: list[str] = field(default_factory=list)
    windows: dict[str, int] = field(default_factory=dict)
    """Context window per model, where the server says it."""


def read_models(body: Any, server: str | None) -> ServerInfo:
    """ServerInfo from a /v1/models answer (OpenAI's shape; Ollama's and llama.cpp's extras)."""
    info = ServerInfo(kind=kind_from_header(server))
    entries = body.get("data") if isinstance(body, dict) else None
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            continue
        info.models.append(e["id"])
        owner = _OWNERS.get(str(e.get("owned_by")))
        if owner and info.kind in (None, "uvicorn"):
            info.kind = owner
        meta = e.get("meta")
        meta = meta if isinstance(meta, dict) else {}
        for n in (e.get("max_model_len"), e.get("context_length"), e.get("context_window"), meta.get("n_ctx")):
            if isinstance(n, int) and n > 0:
                info.windows[e["id"]] = n
                break
    return info


def props_window(body: Any) -> int | None:
    """llama.cpp's /props: the context each slot runs with."""
    settings = body.get("default_generation_settings") if isinstance(body, dict) else None
    n = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n if isinstance(n, int) and n > 0 else None


def props_tools(body: Any) -> bool | None:
    """llama.cpp's /props: does the chat template take tools (`chat_template_caps.supports_tools`)?
    None when it does not say."""
    caps = body.get("chat_template_caps") if isinstance(body, dict) else None
    value = caps.get("supports_tools") if isinstance(caps, dict) else None
    return value if isinstance(value, bool) else None


def ollama_tools(body: Any) -> bool | None:
    """Ollama's /api/show: does the model take tools (its `capabilities` name "tools")? None when it
    does not say (an Ollama older than 0.6.4 has no `capabilities`)."""
    caps = body.get("capabilities") if isinstance(body, dict) else None
    return "tools" in caps if isinstance(caps, list) else None


def quirks_for(configured: Iterable[str] | None, kind: str | None) -> frozenset[str]:
    """The configured quirks, or (none configured) the known ones of the server's kind."""
    if configured is not None:
        return frozenset(configured)
    return KIND_QUIRKS.get(kind or "", frozenset())


def request_extras(quirks: frozenset[str], tools: bool) -> dict[str, Any]:
    """Fields the request gets besides model/messages/tools/stream."""
    return {"tool_choice": "auto"} if tools and "no_tool_choice" not in quirks else {}


def fix_messages(messages: list[dict[str, Any]], quirks: frozenset[str]) -> list[dict[str, Any]]:
    if "empty_content" not in quirks:
        return messages
    return [{**m, "content": ""} if m.get("role") == "assistant" and m.get("content") is None else m for m in messages]
