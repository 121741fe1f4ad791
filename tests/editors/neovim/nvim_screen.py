"""What a headless Neovim draws: replays the `redraw` notifications of an attached UI (ext_linegrid)
into a grid of cells, and writes it as HTML (and PNG with Chromium) for a person to look at."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path
from typing import Any


class Screen:
    def __init__(self) -> None:
        self.width = 0
        self.height = 0
        self.cells: list[list[tuple[str, int]]] = []
        self.attrs: dict[int, dict[str, Any]] = {0: {}}
        self.fg, self.bg = 0xE0E2EA, 0x14161B  # Neovim's default dark colours until told otherwise

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.clear()

    def clear(self) -> None:
        self.cells = [[(" ", 0) for _ in range(self.width)] for _ in range(self.height)]

    def event(self, name: str, args: list[Any]) -> None:
        if name == "grid_resize":
            self.resize(args[1], args[2])
        elif name == "grid_clear":
            self.clear()
        elif name == "default_colors_set":
            self.fg = args[0] if args[0] >= 0 else self.fg
            self.bg = args[1] if args[1] >= 0 else self.bg
        elif name == "hl_attr_define":
            self.attrs[args[0]] = args[1]
        elif name == "grid_line":
            _, row, col, cells = args[:4]
            hl = 0
            for cell in cells:
                text = cell[0]
                if len(cell) > 1:
                    hl = cell[1]
                for _ in range(cell[2] if len(cell) > 2 else 1):
                    if 0 <= row < self.height and 0 <= col < self.width:
                        self.cells[row][col] = (text, hl)
                    col += 1
        elif name == "grid_scroll":
            _, top, bot, left, right, rows = args[:6]
            old = [list(r) for r in self.cells]
            for r in range(top, bot):
                src = r + rows
                if top <= src < bot:
                    self.cells[r][left:right] = old[src][left:right]

    def feed(self, batches: list[Any]) -> None:
        """The params of one `redraw` notification: [[event, args...], ...]."""
        for batch in batches:
            name = batch[0].decode() if isinstance(batch[0], bytes) else batch[0]
            for args in batch[1:]:
                self.event(name, list(args))

    def lines(self) -> list[str]:
        return ["".join(text for text, _ in row).rstrip() for row in self.cells]

    def hl_at(self, row: int, col: int) -> dict[str, Any]:
        return self.attrs.get(self.cells[row][col][1], {})

    def find(self, needle: str) -> tuple[int, int] | None:
        for r, line in enumerate(self.lines()):
            c = line.find(needle)
            if c >= 0:
                return r, len(line[:c])
        return None

    def html(self) -> str:
        def color(value: int | None, default: int) -> str:
            return f"#{(default if value is None else value):06x}"

        rows = []
        for row in self.cells:
            spans = []
            for text, hl in row:
                a = self.attrs.get(hl, {})
                fg, bg = a.get("foreground"), a.get("background")
                if a.get("reverse"):
                    fg, bg = bg if bg is not None else self.bg, fg if fg is not None else self.fg
                style = f"color:{color(fg, self.fg)};background:{color(bg, self.bg)}"
                if a.get("bold"):
                    style += ";font-weight:bold"
                if a.get("italic"):
                    style += ";font-style:italic"
                if a.get("underline"):
                    style += ";text-decoration:underline"
                spans.append(f'<span style="{style}">{html.escape(text or " ")}</span>')
            rows.append("".join(spans))
        body = "\n".join(rows)
        return ("<!doctype html><meta charset=utf-8><body style=\"margin:0;background:"
                f"{color(None, self.bg)}\"><pre style=\"margin:0;font:14px/1.25 'DejaVu Sans Mono',monospace\">"
                f"{body}</pre></body>")

    def save(self, base: Path) -> list[Path]:
        """base.html always; base.png too when Chromium is there to draw it."""
        base.parent.mkdir(parents=True, exist_ok=True)
        page = base.with_suffix(".html")
        page.write_text(self.html())
        out = [page]
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium:
            png = base.with_suffix(".png")
            size = f"{self.width * 9},{int(self.height * 17.5) + 4}"
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}",
                            f"--window-size={size}", page.as_uri()], capture_output=True, timeout=60)
            if png.exists():
                out.append(png)
        return out
