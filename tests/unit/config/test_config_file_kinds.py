"""`--config` / `configPath` pointing at something that is not a config file (issue 28): /dev/zero
(read whole, it grew the daemon by GBs), a FIFO (the start hung), a directory, a file over 1 MiB.
Each is a clear ConfigError at once, and on the LSP face every request that needs the config
answers -32013 while the daemon keeps serving."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from inproc import start_lsp
from rpc import RpcError
from waiting import scaled

from toycoder_daemon.config.model import MAX_CONFIG_BYTES, load_config
from toycoder_daemon.core.errors import ConfigError


def load_within_deadline(path: Path) -> BaseException | None:
    """load_config(path) on a thread; fails the test if it does not return in time (a FIFO without a
    writer blocked an open without O_NONBLOCK: a writer is then opened, to let the thread go)."""
    out: list[BaseException | None] = []

    def run() -> None:
        try:
            load_config(str(path))
            out.append(None)
        except BaseException as e:  # noqa: BLE001  # handed to the test
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(scaled(10))
    if t.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked open
        t.join(scaled(10))
        pytest.fail(f"load_config({path}) did not return")
    return out[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "config.fifo"
    os.mkfifo(path)
    return path


def test_dev_zero_is_refused(tmp_path: Path) -> None:
    e = load_within_deadline(Path("/dev/zero"))
    assert isinstance(e, ConfigError) and "/dev/zero" in str(e) and "not a regular file" in str(e)


def test_a_fifo_is_refused_without_waiting_for_a_writer(fifo: Path) -> None:
    e = load_within_deadline(fifo)
    assert isinstance(e, ConfigError) and str(fifo) in str(e) and "not a regular file" in str(e)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    e = load_within_deadline(tmp_path)
    assert isinstance(e, ConfigError) and "not a regular file" in str(e)


def test_a_file_over_the_cap_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))
    e = load_within_deadline(big)
    assert isinstance(e, ConfigError) and str(MAX_CONFIG_BYTES) in str(e)
    at = tmp_path / "at.yaml"
    at.write_bytes(b"agent:\n  max_steps: 7\n" + b"#" * (MAX_CONFIG_BYTES - 23) + b"\n")
    assert at.stat().st_size == MAX_CONFIG_BYTES
    assert load_config(str(at))[0].agent.max_steps == 7


@pytest.mark.parametrize("which", ["/dev/zero", "fifo"])
async def test_config_path_at_a_device_or_fifo_is_a_config_error_on_the_lsp_face(
        which: str, fifo: Path, workspace: Path) -> None:
    path = str(fifo) if which == "fifo" else which
    d = await start_lsp()
    try:
        await d.initialize(workspace, options={"configPath": path})
        shown = await d.wait_for(lambda: [n for n in d.notifications if n["method"] == "window/showMessage"])
        assert "not a regular file" in shown[0]["params"]["message"]
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        with pytest.raises(RpcError) as e:
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert e.value.code == -32013 and path in e.value.message
    finally:
        assert await d.close() == 0
