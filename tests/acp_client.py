"""The ACP SDK's client side as the tests' editor: `Editor` records every frame the daemon sends, in wire
order, and answers permission requests and questions; `acp_face` runs the face in-process
(tests/inproc.py), `acp_daemon` as `python -m toycoder_daemon --acp`; both yield an initialized
connection. Used by the in-process tier and the e2e tier alike."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    Implementation,
    RequestPermissionResponse,
)
from helpers import ROOT, write_config
from inproc import acp_agent
from waiting import DEFAULT_TIMEOUT, wait_until_async

from toycoder_daemon.testing.fake_llm import FakeLLM


class Editor:
    """The client side: records every frame from the daemon, answers permission and questions."""

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.choice: str | None = "allow_once"  # option id; None answers "cancelled"
        self.answer: str | None = None
        self.asked: list[dict[str, Any]] = []
        self.conn: Any = None

    def observe(self, event: Any) -> None:
        if event.direction == "incoming":
            self.frames.append(event.message)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        pass  # read from self.frames, in wire order

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **_: Any) -> Any:
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> Any:
        self.asked.append({"message": message, "schema": mode.requested_schema.model_dump(mode="json")})
        return AcceptElicitationResponse(action="accept", content={"answer": self.answer})

    # ---- reading the frames ---------------------------------------------------------------------

    def updates(self, kind: str | None = None) -> list[dict[str, Any]]:
        ups = [f["params"]["update"] for f in self.frames if f.get("method") == "session/update"]
        return [u for u in ups if kind is None or u["sessionUpdate"] == kind]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.updates(kind))

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [f["params"] for f in self.frames if f.get("method") == method and "id" in f]

    def index(self, pred: Any) -> int:
        return next(i for i, f in enumerate(self.frames) if pred(f))

    async def wait_for(self, pred: Any, timeout: float = DEFAULT_TIMEOUT) -> None:
        await wait_until_async(lambda: any(pred(f) for f in self.frames), timeout, "a matching frame",
                               describe=lambda: f"frames: {self.frames}")


@asynccontextmanager
async def acp_face(tmp_path: Path, llm: FakeLLM, *, config: Path | None = None,
                   caps: ClientCapabilities | None = None, editor: Editor | None = None,
                   name: str | None = None) -> AsyncIterator[tuple[Any, Editor, Any]]:
    """The face in-process, initialized (`editor`: a client with more methods than Editor's; `name`:
    the clientInfo.name it gives)."""
    config = config or write_config(tmp_path / "config.yaml", llm)
    editor = editor or Editor()
    async with acp_agent(editor, config, observers=[editor.observe], use_unstable_protocol=caps is not None) as (
            conn, proc):
        editor.conn = conn
        info = Implementation(name=name, version="1") if name else None
        init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps, client_info=info)
        assert init.protocol_version == 1
        yield conn, editor, proc
    assert proc.returncode == 0


@asynccontextmanager
async def acp_daemon(tmp_path: Path, llm: FakeLLM, *, config: Path | None = None,
                     caps: ClientCapabilities | None = None, editor: Editor | None = None,
                     command: list[str] | None = None) -> AsyncIterator[tuple[Any, Editor, Any]]:
    """The face as a daemon subprocess, initialized (`editor` as for acp_face; `command`: the daemon's
    instead of this venv's, with no config given: tests/remote_host.py's)."""
    if command is None:
        config = config or write_config(tmp_path / "config.yaml", llm)
        command = [sys.executable, "-m", "toycoder_daemon", "--acp", "--config", str(config), "--log-level", "INFO"]
    editor = editor or Editor()
    log_path = tmp_path / f"daemon-{len(list(tmp_path.glob('daemon-*.log')))}.log"
    with open(log_path, "wb") as log:
        try:
            async with spawn_agent_process(
                editor, *command, env=dict(os.environ), cwd=ROOT, transport_kwargs={"stderr": log},
                observers=[editor.observe], use_unstable_protocol=caps is not None,
            ) as (conn, proc):
                editor.conn = conn
                init = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
                assert init.protocol_version == 1
                yield conn, editor, proc
        finally:
            # shown by pytest only when the test failed
            print(f"--- {log_path.name} ---\n{log_path.read_text(errors='replace')}")


async def new_session(conn: Any, workspace: Path) -> str:
    return (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id


async def delete(conn: Any, session_id: Any) -> Any:
    return await conn._conn.send_request("session/delete", {"sessionId": session_id})


def streaming(session_id: str) -> Any:
    """A frame predicate: the session's turn is streaming its reply."""
    return lambda f: (f.get("params", {}).get("sessionId") == session_id
                      and f["params"].get("update", {}).get("sessionUpdate") == "agent_message_chunk")
