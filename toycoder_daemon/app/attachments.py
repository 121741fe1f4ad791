"""What a prompt brings besides its text (issue 29): the editor's context items (files, selections,
diagnostics, images, MCP resources) and the mentions in the text (`@path`, `@path#L10-20`,
`@server:uri`), resolved when the prompt is sent into

- text blocks for the model, appended to the prompt (a file with its path and line numbers, read
  through read_file: the editor's open buffer, its limits and its redaction);
- chips for the transcript (toycoder/session/load shows what was attached);
- images, stored once by content (data dir/images/<sha256>), referenced from the message.

Anything refused is a BadInput naming the item (-32602 on the wire), before anything is recorded
or sent to the model.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from toycoder_daemon.core.errors import BadInput
from toycoder_daemon.core.ports import Frontend
from toycoder_daemon.core.util import secrets
from toycoder_daemon.core.util.atomic import atomic_write
from toycoder_daemon.tools.base import ToolContext, ToolError
from toycoder_daemon.tools.diagnostics import diagnostic_line
from toycoder_daemon.tools.files.read import read_file
from toycoder_daemon.tools.search.file_index import FileIndex
from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.workspace import OutsideWorkspace, Workspace

IMAGE_MAX_BYTES = 5 << 20
IMAGE_TYPES = {  # mime type -> how its bytes start (a renamed file of another type is refused)
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
MENTION = re.compile(r"(?<![\w@/])@([^\s@`'\"<>]+)")
LINES = re.compile(r"#L(\d+)(?:-L?(\d+))?$")
_HEADER = re.compile(r"^.*: lines (\d+)-(\d+) of (\d+)")

ResourceReader = Callable[[str, str], Awaitable[str]]
"""(server, uri) -> the resource's text (resources/read); raises ValueError with the reason."""


@dataclass
class Attached:
    blocks: list[str] = field(default_factory=list)
    """Text for the model, after the prompt."""
    chips: list[dict[str, Any]] = field(default_factory=list)
    """What the transcript shows (wire ContextChip shapes)."""
    images: list[dict[str, str]] = field(default_factory=list)
    """{"path", "mimeType", "sha256"} of each image (llm.base.for_api sends them as image_url parts)."""

    def __bool__(self) -> bool:
        return bool(self.blocks or self.images)

    def content(self, text: str) -> str:
        return "\n\n".join([text, *self.blocks])


def uri_path(uri: str) -> str | None:
    """A file:// URI's path, a plain path as is; None for another scheme (untitled:, vscode-notebook:)."""
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    if re.match(r"^[a-zA-Z][\w+.-]+:", uri):
        return None
    return uri


def _line_range(item: dict[str, Any]) -> tuple[int, int] | None:
    """A 1-based, inclusive line range from an LSP range (0-based; an end at character 0 of a later
    line leaves that line out, as a selection of whole lines ends there)."""
    r = item.get("range")
    if not r:
        return None
    start, end = r["start"]["line"] + 1, r["end"]["line"] + 1
    if r["end"].get("character", 0) == 0 and end > start:
        end -= 1
    return start, max(start, end)


class Attacher:
    """Resolves one prompt's context (App keeps one per workspace: its FileIndex is shared)."""

    def __init__(self, workspace: Workspace, settings: ToolSettings, images_dir: Path, files: FileIndex):
        self.workspace, self.settings, self.images_dir, self.files = workspace, settings, images_dir, files

    async def resolve(self, text: str, items: list[dict[str, Any]], frontend: Frontend,
                      servers: frozenset[str], read_resource: ResourceReader | None) -> Attached:
        out = Attached()
        ctx = ToolContext(self.workspace, frontend, "", self.settings)
        for i, item in enumerate(items):
            await self._item(out, ctx, f"context[{i}]", item, read_resource)
        for m in MENTION.finditer(text):
            mention = m.group(1).rstrip(".,;:!?)]}")
            await self._mention(out, ctx, mention, servers, read_resource)
        return out

    # ---- one item ---------------------------------------------------------------------------------

    async def _item(self, out: Attached, ctx: ToolContext, where: str, item: dict[str, Any],
                    read_resource: ResourceReader | None) -> None:
        kind = item.get("type")
        if kind == "file":
            await self._file(out, ctx, where, item["uri"], _line_range(item))
        elif kind == "selection":
            rel = self._label(where, item["uri"])
            start, end = _line_range(item) or (1, 1)
            numbered = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(item["text"].splitlines(), start))
            out.blocks.append(secrets.redact(f"Selected in {rel} (lines {start}-{end}):\n{numbered}"))
            out.chips.append({"type": "selection", "label": f"{rel}:{start}-{end}", "uri": item["uri"]})
        elif kind == "diagnostics":
            rel = self._label(where, item["uri"])
            lines = [diagnostic_line(rel, d) for d in item["items"] if isinstance(d, dict)]
            out.blocks.append(f"Editor diagnostics for {rel}:\n" + ("\n".join(lines) or "(none)"))
            out.chips.append({"type": "diagnostics", "label": f"{rel} ({len(lines)} problems)", "uri": item["uri"]})
        elif kind == "image":
            self._image(out, where, item["mimeType"], item["data"])
        elif kind == "resource":
            await self._resource(out, where, item["server"], item["uri"], read_resource)

    def _label(self, where: str, uri: str) -> str:
        """The workspace-relative path a chip and a block name (refused outside the workspace)."""
        path = uri_path(uri)
        if path is None:
            return uri
        try:
            return self.workspace.relative(self.workspace.resolve(path))
        except OutsideWorkspace:
            raise BadInput(f"{where}: {uri} is outside the workspace") from None

    async def _file(self, out: Attached, ctx: ToolContext, where: str, uri: str, lines: tuple[int, int] | None) -> None:
        path = uri_path(uri)
        if path is None:
            raise BadInput(f"{where}: {uri} is not a file:// URI or a path")
        try:
            p = self.workspace.resolve(path)
        except OutsideWorkspace:
            raise BadInput(f"{where}: {uri} is outside the workspace") from None
        rel = self.workspace.relative(p)
        if p.is_dir():
            raise BadInput(f"{where}: {rel} is a directory")
        try:
            hidden = p.exists() and not await self.files.visible(Path(rel).as_posix())
        except ToolError as e:
            raise BadInput(f"{where}: cannot tell whether the ignore rules hide {rel}: {e}") from None
        if hidden:
            raise BadInput(f"{where}: {rel} is hidden by the ignore rules (.gitignore)")
        offset, limit = (lines[0], lines[1] - lines[0] + 1) if lines else (1, None)
        try:
            shown = await read_file.func(ctx, path=rel, offset=offset, limit=limit)
        except ToolError as e:
            raise BadInput(f"{where}: {e}") from None
        head = _HEADER.match(shown)
        if head:
            end, total = int(head.group(2)), int(head.group(3))
            wanted = min(lines[1], total) if lines else total
            if end < wanted:
                raise BadInput(f"{where}: {rel} is over the read limit ({self.settings.read_max_bytes} bytes, "
                               f"{self.settings.read_default_lines} lines); attach a range of it")
        out.blocks.append(secrets.redact(f"Attached file {shown}"))
        label = f"{rel}:{lines[0]}-{lines[1]}" if lines else rel
        out.chips.append({"type": "file", "label": label, "uri": p.as_uri()})

    def _image(self, out: Attached, where: str, mime: str, data: str) -> None:
        if mime not in IMAGE_TYPES:
            raise BadInput(f"{where}: image type {mime!r} is not one of {', '.join(IMAGE_TYPES)}")
        if len(data) > (IMAGE_MAX_BYTES * 4) // 3 + 8:
            raise BadInput(f"{where}: the image is over {IMAGE_MAX_BYTES >> 20} MiB")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadInput(f"{where}: the image data is not valid base64") from None
        if len(raw) > IMAGE_MAX_BYTES:
            raise BadInput(f"{where}: the image is over {IMAGE_MAX_BYTES >> 20} MiB")
        if not raw.startswith(IMAGE_TYPES[mime]) or (mime == "image/webp" and raw[8:12] != b"WEBP"):
            raise BadInput(f"{where}: the data is not a {mime} image")
        sha = hashlib.sha256(raw).hexdigest()
        path = self.images_dir / sha
        if not path.exists():  # stored once: the same image in many prompts is one file
            self.images_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(path, raw)
        out.images.append({"path": str(path), "mimeType": mime, "sha256": sha})
        n = len(out.images)
        out.chips.append({"type": "image", "label": f"image {n} ({mime.partition('/')[2]})", "mimeType": mime,
                          "image": sha})

    async def _resource(self, out: Attached, where: str, server: str, uri: str,
                        read_resource: ResourceReader | None) -> None:
        if read_resource is None:
            raise BadInput(f"{where}: no MCP server {server!r}")
        try:
            text = await read_resource(server, uri)
        except ValueError as e:
            raise BadInput(f"{where}: {server}:{uri}: {e}") from None
        cap = self.settings.read_max_bytes
        if len(text.encode()) > cap:
            raise BadInput(f"{where}: {server}:{uri} is over the read limit ({cap} bytes)")
        out.blocks.append(secrets.redact(f"MCP resource {server}:{uri}:\n{text}"))
        out.chips.append({"type": "resource", "label": f"{server}:{uri}", "uri": uri})

    # ---- mentions in the text -----------------------------------------------------------------

    async def _mention(self, out: Attached, ctx: ToolContext, mention: str, servers: frozenset[str],
                       read_resource: ResourceReader | None) -> None:
        where = f"@{mention}"
        server, colon, uri = mention.partition(":")
        if colon and server in servers:
            await self._resource(out, where, server, uri, read_resource)
            return
        lines = None
        if m := LINES.search(mention):
            start = int(m.group(1))
            lines = (start, max(start, int(m.group(2) or start)))
            mention = mention[:m.start()]
        try:
            p = self.workspace.resolve(mention)
        except OutsideWorkspace:
            named = Path(mention).expanduser()
            if (named if named.is_absolute() else self.workspace.root / named).exists():  # `@../x` too
                raise BadInput(f"{where}: {mention} is outside the workspace") from None
            return
        if not p.is_file():
            return  # not a file (an e-mail address, a decorator, a folder): the text stays as it is
        await self._file(out, ctx, where, str(p), lines)

