"""ToolSettings: the limits and timeouts tools read, as a plain dataclass.

tools/ does not read the config: app/factories.py (`tool_settings`) fills this from the `tools:`
section, and the defaults here are the only copy tools fall back on (tests, benches).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class RunCommandSettings:
    """run_command's OS sandbox (tools/shell/sandbox/, docs/security.md)."""

    sandbox: Literal["auto", "required", "off"] = "auto"
    writable: tuple[str, ...] = ()
    """Extra writable paths besides the workspace and a private temp dir."""
    network: bool = False


@dataclass(frozen=True)
class ToolSettings:
    read_max_bytes: int = 100_000
    """Most bytes read_file returns in one call."""
    read_default_lines: int = 2000
    """Lines read_file returns when no limit is given."""
    list_max_entries: int = 500
    """Most entries list_directory shows."""
    command_timeout: float = 120.0
    """Default run_command timeout, seconds."""
    command_max_timeout: float = 600.0
    """Largest timeout a run_command call may ask for, seconds."""
    output_max_bytes: int = 30_000
    """Cap on a tool's output sent to the model."""
    run_command: RunCommandSettings = field(default_factory=RunCommandSettings)
    diagnostics_wait_ms: int = 1500
    """How long the editor may take to report diagnostics after an edit."""
    diagnostics_level: str = "warnings"
    """errors | warnings | off: which new diagnostics an edit's observation shows."""
