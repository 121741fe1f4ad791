"""What the model reads from an MCP server: a tools/call result as observation text (text joined,
other content described, structuredContent as JSON when there is no text), capped like run_command's
output.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as mt

from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.shell.run_command import HeadTail


def _byte_count(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _describe_block(block: Any) -> tuple[str, bool]:
    """(text for the model, is it text content)."""
    if isinstance(block, mt.TextContent):
        return block.text, True
    if isinstance(block, mt.ImageContent):
        return f"[image: {block.mime_type}, {_byte_count(block.data)} bytes]", False
    if isinstance(block, mt.AudioContent):
        return f"[audio: {block.mime_type}, {_byte_count(block.data)} bytes]", False
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return f"[resource: {res.uri}]\n{res.text}", True
        mime = f", {res.mime_type}" if res.mime_type else ""
        return f"[resource: {res.uri}{mime}, {_byte_count(res.blob)} bytes]", False
    if isinstance(block, mt.ResourceLink):
        extra = f" ({block.description})" if block.description else ""
        return f"[resource link: {block.uri} {block.name}{extra}]", False
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]", False


def result_text(result: mt.CallToolResult) -> str:
    """The observation for a tools/call result: text joined, other content described, and
    structuredContent as JSON when the result has no text."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        text, is_text = _describe_block(block)
        has_text = has_text or is_text
        parts.append(text)
    if not has_text and result.structured_content is not None:
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def cap_output(text: str, ctx: ToolContext | None) -> str:
    """The observation shortened in the middle to the tools config's `output_max_bytes`, like run_command's output."""
    s = getattr(ctx, "settings", None) if ctx is not None else None
    limit = getattr(s, "output_max_bytes", 30_000) if s is not None else 30_000
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    out = HeadTail(limit)
    out.feed(data)
    return out.text()
