"""The permission request's panel: the diff, command or arguments, titled with the call and with
the level in its footer. The footer is never cut: the panel is at least as wide as it."""

from __future__ import annotations

import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

MAX_PREVIEW_LINES = 120


def permission_panel(params: dict[str, Any], clip: bool, console: Console) -> Panel:
    preview = params.get("preview") or {}
    cut = clip_lines if clip else (lambda text: text.rstrip("\n"))
    body: RenderableType
    if preview.get("kind") == "diff" and preview.get("diff") is not None:
        body = Syntax(cut(preview["diff"]), "diff", theme="ansi_dark", background_color="default", word_wrap=True)
    elif preview.get("kind") == "command":
        body = Group(Syntax(preview.get("command") or "", "bash", theme="ansi_dark", background_color="default",
                            word_wrap=True),
                     Text(f"in {preview.get('cwd') or '.'}", style="dim"))
    else:
        body = Text(cut(json.dumps(params.get("arguments"), indent=2, ensure_ascii=False)))
    level = params.get("level", "")
    style = "red" if level == "dangerous" else "yellow"
    title = Text(f"{params.get('title') or params.get('tool')}", style="bold")
    subtitle = Text(f"{level} · permission needed", style=style)
    # Rich widens a fitted panel for its title but not for its footer: size it ourselves (an
    # expanded panel of that width; a fitted one takes `width` only as its limit).
    content = Measurement.get(console, console.options, body).maximum + 4  # borders and padding
    width = min(console.width, max(content, cell_len(title.plain) + 6, cell_len(subtitle.plain) + 6))
    return Panel(body, title=title, subtitle=subtitle, title_align="left", subtitle_align="left",
                 border_style=style, expand=True, width=width)


def clip_lines(text: str, limit: int = MAX_PREVIEW_LINES) -> str:
    lines = text.splitlines()
    if len(lines) <= limit:
        return text.rstrip("\n")
    return "\n".join(lines[:limit] + [f"… {len(lines) - limit} more lines"])
