"""The ACP client hears of a tool call before the daemon asks it anything for that call: reading a
file (fs/read_text_file), writing one (fs/write_text_file) or creating a terminal wait until the
updates sent before them (the `tool_call`) are out. Driven at the seam (AcpFrontend with a client
whose session/update is held), since over a fast in-process pipe the race hardly ever shows."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from inproc_app import InProc, eventually

from toycoder_daemon.core.ports import CommandNotStarted, CommandRequest, ToolCallStarted
from toycoder_daemon.faces.acp.client import ClientError
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.faces.acp.terminal import Terminals


class HeldClient:
    """Records what the frontend sends, in order; a session/update waits for `release`."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        kind = params["update"]["sessionUpdate"]
        self.calls.append(f"update {kind} (started)")
        await self.release.wait()
        self.calls.append(f"update {kind}")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.calls.append(method)
        if method == "terminal/create":  # not started: the command would run locally
            raise ClientError(-32601, "Method not found", {"method": method})
        return {"content": "x = 1\n"} if method == "fs/read_text_file" else {}


def read(f: AcpFrontend, path: Path) -> Awaitable[Any]:
    return f.editor_text(path)


def write(f: AcpFrontend, path: Path) -> Awaitable[Any]:
    return f.apply_edit(path, "x = 1\n", "x = 2\n")


async def create(f: AcpFrontend, path: Path) -> Any:
    runner = f.command_runner()
    assert runner is not None
    with pytest.raises(CommandNotStarted):
        await runner.run(CommandRequest("c1", ("/bin/true",), {}, "/", 5.0, 100))


@pytest.mark.parametrize("ask, method", [(read, "fs/read_text_file"), (write, "fs/write_text_file"),
                                         (create, "terminal/create")])
async def test_the_tool_call_goes_out_before_the_client_is_asked_for_it(
        tmp_path: Path, workspace: Path, ask: Callable[[AcpFrontend, Path], Awaitable[Any]], method: str) -> None:
    p = InProc(workspace, tmp_path / "data")
    try:
        client = HeldClient()
        f = AcpFrontend(client, p.app, "s1", can_read=True, can_write=True, terminals=Terminals(usable=True))
        path = workspace / "calc.py"
        f.emit(ToolCallStarted("c1", "edit_file", "edit_file calc.py", {"path": "calc.py"}, "sensitive"))
        asking = asyncio.ensure_future(ask(f, path))
        await eventually(lambda: "update tool_call (started)" in client.calls, "the tool call being sent")
        client.release.set()
        await asking
        assert client.calls == ["update tool_call (started)", "update tool_call", method]
    finally:
        await p.close()
