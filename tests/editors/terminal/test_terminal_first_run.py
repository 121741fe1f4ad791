"""A new user's first minutes: scripts/run setting up its virtualenv, a daemon that cannot start (in
every terminal client), a model server that does not answer, and `toycoder --init-config`."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from helpers import ROOT, kill_process_groups
from test_terminal_cli import ANSI, TOYCODER, toycoder
from waiting import scaled, wait_until

RUN = ROOT / "scripts" / "run"
ONESHOT = ROOT / "clients" / "terminal" / "oneshot.sh"


def no_provider_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TOYCODER_CONFIG", "NO_COLOR")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "TERM": "xterm-256color", **extra}


def spawn(argv: list[str], env: dict[str, str], cwd: Path) -> pexpect.spawn:
    return pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), dimensions=(40, 120), encoding="utf-8",
                         codec_errors="replace", timeout=scaled(30))


def screen_until(child: pexpect.spawn, text: str, timeout: float = 30) -> str:
    """Everything the pty showed (escapes removed) once `text` is among it."""
    seen = [""]

    def shown() -> bool:
        try:
            seen[0] += child.read_nonblocking(1 << 16, timeout=0.1)
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            return text in ANSI.sub("", seen[0]) or bool(child.terminate(force=True))
        return text in ANSI.sub("", seen[0])

    wait_until(shown, timeout, f"{text!r} on the terminal", interval=0, describe=lambda: ANSI.sub("", seen[0]))
    return ANSI.sub("", seen[0])


# ---- scripts/run's first run -------------------------------------------------------------------------

def test_first_run_with_an_empty_venv_location_says_it_is_setting_up(tmp_path: Path) -> None:
    venv = tmp_path / "empty-venv"
    child = spawn([str(RUN)], no_provider_env(tmp_path, TOYCODER_VENV=str(venv)), tmp_path)
    try:
        shown = screen_until(child, "about 2 minutes")
        assert f"first run: setting up {venv}" in shown
    finally:
        kill_process_groups([child.pid])  # the pty's session: the script and its venv/pip children
        child.close(force=True)


def test_the_end_of_set_up_prints_the_line_that_puts_toycoder_on_path(tmp_path: Path) -> None:
    """A stand-in venv whose python 'installs' a stand-in toycoder: the script's own flow, in seconds."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake_python = venv / "bin" / "python"
    fake_python.write_text("#!/bin/sh\n"  # `python -m pip install ...`: show progress, make bin/toycoder
                           'echo "Installing collected packages: toycoder-daemon"\n'
                           f'printf \'#!/bin/sh\\necho "toycoder ran with: $*"\\n\' > "{venv}/bin/toycoder"\n'
                           f'chmod +x "{venv}/bin/toycoder"\n')
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    child = spawn([str(RUN)], no_provider_env(tmp_path, TOYCODER_VENV=str(venv)), tmp_path)
    try:
        shown = screen_until(child, "toycoder ran with: --demo")
    finally:
        child.close(force=True)
    assert "setting up" in shown and "Installing collected packages" in shown  # pip's own output shows
    assert f'export PATH="{venv}/bin:$PATH"' in shown and "pipx install" in shown
    second = spawn([str(RUN)], no_provider_env(tmp_path, TOYCODER_VENV=str(venv)), tmp_path)
    try:
        again = screen_until(second, "toycoder ran with: --demo")
    finally:
        second.close(force=True)
    assert "setting up" not in again and "export PATH" not in again  # set up once


# ---- a daemon that cannot start ------------------------------------------------------------------------

def test_oneshot_sh_with_a_missing_daemon_exits_127_with_one_line_every_time(tmp_path: Path) -> None:
    for daemon in ["/nope/toycoder-daemon"] * 20 + ["false"] * 5:
        p = subprocess.run(["bash", str(ONESHOT), "hi"], capture_output=True, text=True, timeout=scaled(30),
                           stdin=subprocess.DEVNULL, cwd=str(tmp_path), env={**os.environ, "TOYCODER_DAEMON": daemon})
        assert p.stdout == "", (daemon, p.stdout)
        lines = p.stderr.splitlines()
        assert len(lines) == 1, (daemon, p.stderr)
        if daemon == "false":  # it starts, then exits at once: an error, not "cannot start", never SIGPIPE
            assert p.returncode == 1 and lines[0].startswith("oneshot: the daemon exited"), p
        else:
            assert p.returncode == 127 and lines[0].startswith("oneshot: cannot start the daemon"), p
            assert "/nope/toycoder-daemon" in lines[0]


@pytest.mark.parametrize("argv", [
    [sys.executable, str(ROOT / "clients/terminal/rpc_chat.py"), "--daemon", "/nope/daemon", "hi"],
    [sys.executable, str(ROOT / "clients/terminal/demo.py"), "--daemon", "/nope/daemon", "--approve", "deny"],
    [*TOYCODER, "--daemon", "/nope/daemon", "-p", "hi", "--config", os.devnull],
], ids=["rpc_chat.py", "demo.py", "toycoder"])
def test_python_clients_with_a_missing_daemon_exit_127_without_a_traceback(argv: list[str], tmp_path: Path) -> None:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(60), stdin=subprocess.DEVNULL,
                       cwd=str(tmp_path))
    assert p.returncode == 127, p.stdout + p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    assert "cannot start the daemon `/nope/daemon`" in p.stderr + p.stdout


def test_demo_py_under_a_python_without_toycoder_says_which_python_to_use(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "clients/terminal/demo.py")], capture_output=True,
                       text=True, timeout=scaled(30), stdin=subprocess.DEVNULL, cwd=str(tmp_path))
    assert p.returncode == 127 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1 and "./scripts/run" in p.stderr


# ---- a model server that does not answer ----------------------------------------------------------------

def test_a_connection_error_names_the_url_it_tried(tmp_path: Path, workspace: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"providers:\n  local:\n    api_keys: [k]\n    base_url: {url}\n    models: {{default: m}}\n"
                   "default_provider: local\nagent: {max_retries: 0}\n")
    p = toycoder(["--config", str(cfg), "-p", "hello"], workspace)
    assert p.returncode == 1, p.stderr
    assert url in p.stderr and "connection problem" in p.stderr, p.stderr


# ---- --init-config ------------------------------------------------------------------------------------------

def test_init_config_writes_the_shipped_example_and_never_overwrites(tmp_path: Path, workspace: Path) -> None:
    env = no_provider_env(tmp_path)
    target = tmp_path / "xdg" / "toycoder" / "config.yaml"
    p = toycoder(["--init-config"], workspace, env=env)
    assert p.returncode == 0 and str(target) in p.stderr, p.stderr
    text = target.read_text()
    assert text.startswith("# ToyCoder configuration") and "${OPENAI_API_KEY:-}" in text
    from toycoder_daemon.config.model import load_config

    assert load_config(str(target))[0].default_provider == "openai"  # what it writes is a config the daemon takes
    target.write_text("# mine\n")
    again = toycoder(["--init-config"], workspace, env=env)
    assert again.returncode == 1 and "exists already" in again.stderr
    assert target.read_text() == "# mine\n"


def test_without_toycoder_on_path_the_demo_and_the_no_provider_message_say_how(tmp_path: Path,
                                                                               workspace: Path) -> None:
    env = {**no_provider_env(tmp_path), "PATH": "/usr/bin:/bin"}  # this installation's bin not on it
    line = f'export PATH="{Path(sys.executable).parent}:$PATH"'
    demo = subprocess.run([sys.executable, str(ROOT / "clients/terminal/demo.py"), "--approve", "allow"],
                          capture_output=True, text=True, timeout=scaled(120), stdin=subprocess.DEVNULL, env=env,
                          cwd=str(tmp_path))
    assert demo.returncode == 0, demo.stderr
    assert line in demo.stdout.split("That was the scripted demo.")[1] and "pipx install ." in demo.stdout
    no_key = toycoder(["-p", "hi"], workspace, env=env)
    assert no_key.returncode == 1 and line in no_key.stderr and "--init-config" in no_key.stderr
