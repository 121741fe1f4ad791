"""`toycoder doctor` (toycoder-daemon --doctor): one line per check, with the fix for each problem, and
exit status 0 only when everything works. Checked: the config (valid, which file), the provider
(reachable, the key accepted, the model served), whether the server takes tools (llama.cpp's /props,
Ollama's /api/show capabilities, else one tiny request offering a tool), the context size, the sandbox,
rg, the fork server, and the editor plugins installed (their versions)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toycoder_daemon.app.setup import SetupError, list_models
from toycoder_daemon.config.model import Config, load_config
from toycoder_daemon.core.errors import ConfigError
from toycoder_daemon.core.util.secrets import shown_url
from toycoder_daemon.llm import tools_ignored

PROBE_SECONDS = 30.0
"""How long the test request offering a tool may take (a local model loads on its first request)."""
SMALL_CONTEXT = 8192
"""Tokens under which the system prompt, the tools' schemas (~2,000 tokens) and a few files do not fit."""


@dataclass
class Line:
    ok: bool | None
    """True works, False broken, None: a note (not known, or not needed)."""
    what: str
    text: str
    fix: str = ""

    def render(self) -> str:
        mark = {True: "✓", False: "✗", None: "·"}[self.ok]
        return f"{mark} {self.what}: {self.text}" + (f" — fix: {self.fix}" if self.fix else "")


def check_config(path: str | None) -> tuple[Config | None, Line]:
    try:
        cfg, found = load_config(path)
    except ConfigError as e:
        return None, Line(False, "config", str(e), "edit the file, or run: toycoder setup")
    if found is None:  # not a problem in itself: $OPENAI_API_KEY may be all it needs (the provider line says)
        return cfg, Line(None, "config", "no config file: the built-in defaults (OpenAI, $OPENAI_API_KEY, "
                         "$OPENAI_BASE_URL)", "toycoder setup writes one")
    return cfg, Line(True, "config", f"{found} (valid)")


def check_provider(cfg: Config) -> list[Line]:
    from toycoder_daemon.llm.openai_client import OpenAIChatModel

    name, p = cfg.provider()
    url = (p.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
    shown = shown_url(url)  # a key in the URL's userinfo is not printed
    if not p.api_keys:
        return [Line(False, "provider", f"'{name}' at {shown} has no API key", "run: toycoder setup")]
    try:
        models = list_models(url, p.api_keys[0])
    except SetupError as e:
        refused = "refused" in str(e)
        return [Line(False, "provider", f"'{name}': {e}",
                     "run: toycoder setup (a new key)" if refused else "start the server, or fix its base_url")]
    lines = [Line(True, "provider", f"'{name}' at {shown} answered; the key was accepted")]
    model = p.models.default
    if models and model not in models:
        lines.append(Line(False, "model", f"{model!r} is not served (served: {', '.join(models[:10])})",
                          f"set providers.{name}.models.default, or run: toycoder setup"))
    else:
        lines.append(Line(True, "model", f"{model} (fast: {p.models.fast})"))
    client = OpenAIChatModel(name, model, url, p.api_keys, quirks=p.quirks, token_field=p.token_field,
                             request_timeout=PROBE_SECONDS)

    async def ask() -> tuple[str | None, int | None, bool | None, str]:
        try:
            info = await client.server_info()
            window = await client.learn_window()
            tools = await client.tools_supported()
            seen = ""
            if tools is None:  # the server says nothing: one tiny request with a tool tells
                tools, seen = await client.probe_tools()
            return (info.kind if info else client.kind), window, tools, seen
        finally:
            await client.aclose()

    kind, window, tools, seen = asyncio.run(ask())
    lines.append(tools_line(kind, model, tools, seen))
    if window is None:
        lines.append(Line(None, "context", "the server does not say its context size"))
    elif window < SMALL_CONTEXT:
        lines.append(Line(False, "context", f"{window} tokens: too small for the system prompt, the tools and a few "
                          "files", "give the server more (llama-server -c 16384; Ollama: num_ctx)"))
    else:
        lines.append(Line(True, "context", f"{window} tokens"))
    return lines


def tools_line(kind: str | None, model: str, tools: bool | None, seen: str) -> Line:
    """`seen`: what the probe request showed ("" when the server said it: /props, /api/show)."""
    said = {"llama.cpp": "/props says its chat template", "ollama": f"Ollama's /api/show says {model}"}.get(
        kind or "", "the server says it")
    if tools is False:
        why = f"the test request offering a tool: {seen}" if seen else f"{said} takes no tools"
        return Line(False, "tools", why, tools_ignored.fix_for(kind))
    if tools is None:
        return Line(None, "tools", f"not known ({kind or 'server kind unknown'}): {seen or 'it does not say'}; a "
                    "session says so if its replies show the tools were ignored")
    return Line(True, "tools", f"taken: {seen}" if seen else f"{said} takes tools")


def check_sandbox(cfg: Config) -> Line:
    from toycoder_daemon.tools.shell.sandbox.probe import status

    s = status(cfg.tools.run_command.sandbox)
    if s["mode"] == "off":
        return Line(None, "sandbox", "off (tools.run_command.sandbox): commands run unconfined")
    if s["available"]:
        return Line(True, "sandbox", str(s["summary"]).removeprefix("sandbox: "))
    return Line(False, "sandbox", str(s["summary"]).removeprefix("sandbox: "),
                "see docs/security.md (a kernel with Landlock and user namespaces)")


def check_rg() -> Line:
    from toycoder_daemon.tools.search.rg import find_rg

    rg = find_rg()
    if rg is None:
        return Line(False, "rg", "ripgrep not found", "pip install ripgrep (into this Python), or put rg on PATH")
    return Line(True, "rg", rg)


def check_fork_server() -> Line:
    if os.environ.get("TOYCODER_WARM") == "0":
        return Line(None, "fork server", "off (TOYCODER_WARM=0): every daemon starts cold")
    try:
        p = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--warm-status"], capture_output=True, text=True,
                           timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Line(False, "fork server", f"cannot ask it: {e}", "toycoder-daemon --warm-stop, then start again")
    if p.returncode == 0:
        return Line(True, "fork server", "running (warm starts)")
    return Line(None, "fork server", "not running; the next daemon starts it")


def editor_plugins(home: Path | None = None) -> list[Line]:
    """The editor plugins found where editors install them, with their versions."""
    home = home or Path.home()
    lines = []
    for ext in sorted((home / ".vscode" / "extensions").glob("*toycoder*")):
        try:
            version = json.loads((ext / "package.json").read_text()).get("version", "?")
        except (OSError, ValueError):
            version = "?"
        lines.append(Line(True, "VS Code", f"{ext.name} {version}"))
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    for pattern in ("nvim/lazy/toycoder*", "nvim/site/pack/*/start/toycoder*", "nvim/site/pack/*/opt/toycoder*"):
        for plugin in sorted(data.glob(pattern)):
            lines.append(Line(True, "Neovim", str(plugin)))
    if not lines:
        lines.append(Line(None, "editors", "no ToyCoder plugin found (VS Code extensions, Neovim lazy/pack)"))
    return lines


def run(config_path: str | None, write: Callable[[str], object] = print) -> int:
    cfg, line = check_config(config_path)
    lines = [line]
    if cfg is not None:
        lines += check_provider(cfg)
        lines.append(check_sandbox(cfg))
    lines += [check_rg(), check_fork_server(), *editor_plugins()]
    for one in lines:
        write(one.render())
    broken = [one for one in lines if one.ok is False]
    write(f"{len(broken)} problem(s)" if broken else "everything works")
    return 1 if broken else 0
