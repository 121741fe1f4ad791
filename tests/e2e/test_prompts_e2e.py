"""A broken prompts file is reported by the daemon process at start (window/showMessage). Templates
themselves are tested in-process: unit/prompts/test_prompts.py."""

from __future__ import annotations

from pathlib import Path

from rpc import Daemon


async def test_daemon_reports_a_broken_prompts_file_at_start(tmp_path: Path, workspace: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("main:\n  system: 'Hi {oops}'\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"prompts_file: {bad}\nproviders: {{openai: {{api_keys: [k]}}}}\n")
    d = await Daemon.start("--config", str(cfg))
    try:
        await d.initialize(workspace)
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        assert "oops" in shown[0]["params"]["message"]
    finally:
        await d.close()
