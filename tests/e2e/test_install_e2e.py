"""The installed package (issue 31), slow tier (TOYCODER_SLOW=1, as .ci/run sets): the wheel built from
this tree holds everything the daemon reads (prompt templates, tool schemas, the demo, the example config),
and once installed outside the repository it runs the demo and one LSP turn from an empty directory.

Each test runs twice: installed with `pipx install` (a temporary PIPX_HOME) and with `uv tool install`
(temporary uv dirs); pipx and uv themselves come from pip's configured index into a venv of the test's.
`uvx --from <wheel> toycoder-daemon --acp` (what the ACP registry entry runs) answers initialize."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT, new_session, write_config
from rpc import Daemon

from toycoder_daemon import __version__
from toycoder_daemon.testing.fake_llm import FakeLLM

pytestmark = pytest.mark.skipif(os.environ.get("TOYCODER_SLOW") != "1",
                                reason="builds and installs the wheel (~1-2 min); set TOYCODER_SLOW=1 (.ci/run does)")

INSIDE = ("toycoder_daemon/prompts/templates/agents.yaml", "toycoder_daemon/tools/schemas.json",
          "toycoder_daemon/cli/demo/script.json", "toycoder_daemon/cli/demo/sample_project/calc.py",
          "toycoder_daemon/cli/example_config.yaml")


def run(argv: list[str], **kw: object) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, f"{argv}: {p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p


def outside_env() -> dict[str, str]:
    """The test's environment without anything that would find the repository's copy."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "TOYCODER_CONFIG")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of what it is made of (an in-tree build/ could carry stale files)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "toycoder_daemon", src / "toycoder_daemon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "bin", src / "bin")  # the launcher's script (pyproject's script-files)
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)])
    (made,) = out.glob("*.whl")
    assert made.name == f"toycoder_daemon-{__version__}-py3-none-any.whl"
    return made


@pytest.fixture(scope="module")
def installers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding pipx and uv (from pip's configured index), as a user has them on PATH."""
    tools = tmp_path_factory.mktemp("installers") / "venv"
    run([sys.executable, "-m", "venv", str(tools)])
    run([str(tools / "bin" / "python"), "-m", "pip", "install", "-q", "pipx", "uv"], env=outside_env())
    return tools / "bin"


def uv_env(home: Path) -> dict[str, str]:
    # uv's own dirs in the test's tmp; the system's CA store (pip is told the same by PIP_CERT)
    return {**outside_env(), "UV_TOOL_DIR": str(home / "uv-tools"), "UV_TOOL_BIN_DIR": str(home / "bin"),
            "UV_CACHE_DIR": str(home / "uv-cache"), "UV_NATIVE_TLS": "1", "UV_PYTHON": sys.executable}


@pytest.fixture(scope="module", params=["pipx", "uv"])
def installed(request: pytest.FixtureRequest, wheel: Path, installers: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin directory of an installation made the way the README says: `pipx install` or
    `uv tool install` of the wheel."""
    home = tmp_path_factory.mktemp(f"install-{request.param}")
    if request.param == "pipx":
        env = {**outside_env(), "PIPX_HOME": str(home / "pipx"), "PIPX_BIN_DIR": str(home / "bin"),
               "PIPX_DEFAULT_PYTHON": sys.executable}
        run([str(installers / "pipx"), "install", str(wheel)], env=env)
    else:
        run([str(installers / "uv"), "tool", "install", str(wheel)], env=uv_env(home))
    yield home / "bin"


def test_the_wheel_holds_everything_the_daemon_reads(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in INSIDE if f not in names] == []
    assert not [n for n in names if n.startswith(("tests/", "clients/", "docs/"))]


def test_installed_it_runs_from_its_own_files(installed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in ("toycoder", "toycoder-daemon"):
        assert (installed / command).exists(), f"{command} is not installed in {installed}"
    # the Python the command runs (its #! line): it imports the installed package, not the repository's
    python = (installed / "toycoder").read_text().splitlines()[0].removeprefix("#!").split()[0]  # pipx adds -E
    where = run([python, "-c", "import toycoder_daemon; print(toycoder_daemon.__file__)"], cwd=empty,
                env=outside_env()).stdout.strip()
    assert not Path(where).is_relative_to(ROOT) and "site-packages" in where
    version = run([str(installed / "toycoder"), "--version"], cwd=empty, env=outside_env()).stdout
    assert version.strip() == f"toycoder {__version__}"


def test_installed_demo_runs_from_an_empty_directory(installed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    p = run([str(installed / "toycoder"), "--demo", "--approve", "allow"], cwd=empty, env=outside_env())
    assert "SCRIPTED" in p.stdout and "calc.py after the session:" in p.stdout
    assert "    return sum(numbers) / len(numbers)\n" in p.stdout.split("calc.py after the session:")[1]
    assert list(empty.iterdir()) == []  # the demo works on a temporary copy


async def test_installed_daemon_takes_an_lsp_turn_from_an_empty_directory(installed: Path, tmp_path: Path,
                                                                          llm: FakeLLM) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = write_config(tmp_path / "config.yaml", llm)
    llm.add({"text": "Looking.", "tool_calls": [{"name": "list_directory", "arguments": {"path": "."}}]},
            {"text": "It is empty."})
    daemon = await Daemon.start("--config", str(cfg), program=[str(installed / "toycoder-daemon")], cwd=str(empty),
                                env={"PYTHONPATH": ""})
    try:
        await daemon.initialize(empty)
        sid = await new_session(daemon)
        result = await daemon.call("toycoder/prompt", {"sessionId": sid, "text": "what is here?"}, timeout=60)
        assert result["stopReason"] == "end_turn" and result["text"] == "It is empty."
        tools = llm.requests[0]["body"]["tools"]  # the schemas and the system prompt came from the wheel
        assert {t["function"]["name"] for t in tools} >= {"read_file", "edit_file", "list_directory"}
        assert "ToyCoder" in llm.requests[0]["body"]["messages"][0]["content"]
    finally:
        await daemon.close()


def test_uvx_runs_the_acp_face_from_the_wheel(wheel: Path, installers: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    hello = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
    p = subprocess.run([str(installers / "uvx"), "--from", str(wheel), "toycoder-daemon", "--acp"], input=hello,
                       capture_output=True, text=True, timeout=300, cwd=empty,
                       env={**uv_env(tmp_path), "TOYCODER_WARM": "0", "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-3000:]
    answer = json.loads(p.stdout.splitlines()[0])
    assert answer["result"]["agentInfo"]["version"] == __version__
    assert [m["id"] for m in answer["result"]["authMethods"]] == ["setup"]
