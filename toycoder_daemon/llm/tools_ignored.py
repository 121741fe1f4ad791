"""Noticing that a server ignored the tools it was offered (issue 18), so the person learns why the
agent never reads or edits anything instead of watching it invent answers.

Two signs, both seen on real servers:
- the reply's text holds a tool call the server did not parse: a server without tool-call parsing
  for the model's format (llama.cpp without a tool-capable template, vLLM without
  --enable-auto-tool-choice) passes the model's `<tool_call>{...}` (Hermes, Qwen), `[TOOL_CALLS]`
  (Mistral), `functools[...]` (FireFunction), `<function=name>{...}` (Llama 3.1) or bare
  `{"name": ..., "arguments": ...}` through as text;
- llama-cpp-python drops `tools` when no `tool_choice` is sent, and the provider's quirks say
  `no_tool_choice`.

Prose that explains tool-call formats is not a sign. A tag counts only where a call stands: opening
the reply (after blanks or a <think> block), where any tool name counts (a model may call a tool it was
never offered), or starting a later line outside ``` fences, where the call must name an offered tool
(an example in prose names some other tool); mid-line, as in `backticks`, it never counts. A bare
JSON call counts only when it is the whole reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

MARK = "[tools ignored:"
"""How the notice starts: a conversation that holds it has been told already (once per session)."""

_MARKERS = ("<tool_call>", "<|tool_call|>", "<tool_calls>", "<function_call>", "[TOOL_CALLS]", "functools[",
            "<|python_tag|>")
_FUNCTION_TAG = re.compile(r"<function=([A-Za-z0-9_.:-]+)>\s*\{")
_THINK = re.compile(r"\s*<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```[a-z]*\s*\n?(.*?)\n?```$", re.DOTALL)
_SCAN_CHARS = 20_000
"""A reply longer than this is prose, not a call; and the scan stays cheap."""


def _is_call(obj: Any, names: frozenset[str] | None) -> bool:
    """{"name": ..., "arguments"|"parameters": ...}, or that under "function" / "tool_call"; with
    `names`, the name must be one of them."""
    if not isinstance(obj, dict):
        return False
    inner = obj.get("function") or obj.get("tool_call")
    if isinstance(inner, dict) and _is_call(inner, names):
        return True
    name = obj.get("name")
    return isinstance(name, str) and (names is None or name in names) and ("arguments" in obj or "parameters" in obj)


def _calls(text: str, names: frozenset[str] | None) -> int | None:
    """Where the JSON call (or list of calls) that `text` starts with (after blanks) ends, or None."""
    rest = text.lstrip()
    try:
        value, end = json.JSONDecoder().raw_decode(rest)
    except ValueError:
        return None
    values = value if isinstance(value, list) else [value]
    ok = bool(values) and all(_is_call(v, names) for v in values)
    return end + len(text) - len(rest) if ok else None


def _line_starts(text: str) -> Iterator[tuple[int, bool]]:
    """Where a call may start: each line's first character outside ``` fences, and whether that line
    opens the reply (its first non-blank line after a leading <think> block)."""
    think = _THINK.match(text)
    at = think.end() if think else 0
    fenced = opened = False
    for line in text[at:].splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced, opened = not fenced, True
        elif stripped and not fenced:
            yield at + len(line) - len(stripped), not opened
            opened = True
        at += len(line)


def unparsed_call(text: str, tool_names: Iterable[str]) -> str | None:
    """What in a reply's text is a tool call the server left unparsed (e.g. "a <tool_call> tag"), or None."""
    names = frozenset(tool_names)
    if not names or not text or len(text) > _SCAN_CHARS:
        return None
    if whole := _FENCE.match(text.strip()):  # the whole reply is one fence: its body is the reply
        text = whole.group(1)
    for at, opens in _line_starts(text):
        for marker in _MARKERS:
            json_at = at + len(marker) - (1 if marker.endswith("[") else 0)  # functools[ opens the list
            if text.startswith(marker, at) and _calls(text[json_at:], None if opens else names) is not None:
                return f"a {marker.rstrip('[')} tag"
        if (m := _FUNCTION_TAG.match(text, at)) and m.group(1) in names:
            return "a <function=...> tag"
    body = text.strip()
    if fenced := _FENCE.match(body):
        body = fenced.group(1).strip()
    if body[:1] in ("{", "[") and _calls(body, names) == len(body):  # the whole reply is the call
        return 'a JSON {"name", "arguments"} object'
    return None


def dropped_by_quirks(kind: str | None, quirks: frozenset[str]) -> bool:
    """llama-cpp-python drops the tools of a request without tool_choice, which `no_tool_choice` leaves out."""
    return kind == "llama-cpp-python" and "no_tool_choice" in quirks


def notice(provider: str, url: str, evidence: str | None) -> str:
    """The one line the person reads: where, what was seen, what to set."""
    where = f"the server at {url} (provider '{provider}')"
    if evidence is None:  # dropped_by_quirks
        return (f"{MARK} {where} is llama-cpp-python, which drops the tools when no tool_choice is sent, and "
                f"this provider's quirks say no_tool_choice; remove it from providers.{provider}.quirks]")
    return (f"{MARK} {where} sent a tool call as plain text ({evidence}) instead of parsing it, so nothing was run; "
            "turn its tool-call parsing on (llama.cpp: --jinja with a tool-capable chat template; vLLM: "
            "--enable-auto-tool-choice and --tool-call-parser; Ollama: a model with tool support)]")


NO_TOOLS_FIX = ("start llama-server with --jinja and a tool-capable --chat-template-file (e.g. the model's own "
                "tool-use template from llama.cpp's models/templates), or use a model whose template takes tools")
OLLAMA_FIX = "use a model with tool support (`ollama show MODEL` lists its capabilities; tools must be one)"
SERVER_FIX = ("turn the server's tool calling on (vLLM: --enable-auto-tool-choice and --tool-call-parser; "
              "llama.cpp: --jinja; Ollama: a model with tool support), or use a model that takes tools")


def fix_for(kind: str | None) -> str:
    """How to make a server of this kind take tools."""
    return {"llama.cpp": NO_TOOLS_FIX, "ollama": OLLAMA_FIX}.get(kind or "", SERVER_FIX)


def unsupported_notice(provider: str, url: str, kind: str | None = "llama.cpp", model: str = "") -> str:
    """The server said (llama.cpp's /props, Ollama's /api/show) that it takes no tools: the session runs
    without them."""
    said = (f"Ollama says {model} has no tools capability (/api/show)" if kind == "ollama" else
            "says its chat template takes no tools (/props chat_template_caps.supports_tools is false)")
    return (f"{MARK} the server at {url} (provider '{provider}') {said}, so this session runs without tools: "
            f"the agent cannot read, search or edit files. To fix: {fix_for(kind)}]")
