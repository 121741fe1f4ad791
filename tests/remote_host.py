"""Another machine for the editors' tests (docs/remote.md): `make_host` makes the directory that
tests/ssh_like runs the daemon "on", and returns the command an editor is given, as it would be
`ssh -T host toycoder-daemon`. That machine has its own HOME with its user config and key (the
client passes none), its own data dir, `toycoder-daemon` on its PATH, and its own copy of the
workspace, which the daemon sees at the workspace's absolute path while the editor sees the local one.

`python tests/remote_host.py HOST WORKSPACE BASE_URL` does the same for the VS Code tests (Node) and
prints the command as JSON.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

SSH_LIKE = Path(__file__).resolve().parent / "ssh_like"
REMOTE_KEY = "remote-key"
"""The API key in the remote's own config: a model request carrying it went through that config."""


class Host:
    def __init__(self, path: Path, workspace: Path):
        self.path, self.workspace = path, workspace
        self.home = path / "home"
        self.copy = path / "copy"
        """Its copy of the workspace: what the daemon reads and writes at `workspace`."""
        self.data = self.home / ".local" / "share" / "toycoder"

    def command(self, *args: str) -> list[str]:
        return [str(SSH_LIKE), str(self.path), "toycoder-daemon", *args]

    def remote(self, relative: str) -> Path:
        """Where the daemon's `workspace/relative` is, seen from here."""
        return self.copy / relative


def make_host(path: Path, workspace: Path, base_url: str) -> Host:
    """The other machine, its copy of `workspace` taken now (change either side afterwards)."""
    host = Host(path, workspace.resolve())
    config = host.home / ".config" / "toycoder" / "config.yaml"
    config.parent.mkdir(parents=True)
    # the same config helpers.write_config gives a local daemon, with the remote's key
    config.write_text(
        f'providers:\n  openai:\n    api_keys: ["{REMOTE_KEY}"]\n'
        f"    base_url: {base_url}\n    models: {{default: fake-model, fast: fake-fast}}\n"
        "default_provider: openai\n"
        "agent: {max_steps: 16, max_retries: 2, retry_interval: 0.05, auto_title: false}\n")
    bin_dir = path / "bin"
    bin_dir.mkdir()
    daemon = bin_dir / "toycoder-daemon"  # as installed over there (pipx): this venv's daemon
    daemon.write_text(f'#!/bin/sh\nexec {sys.executable} -P -m toycoder_daemon "$@"\n')
    daemon.chmod(0o755)
    shutil.copytree(host.workspace, host.copy)
    (path / "workspace").write_text(str(host.workspace))
    return host


if __name__ == "__main__":
    made = make_host(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
    print(json.dumps({"command": made.command(), "copy": str(made.copy), "data": str(made.data)}))
