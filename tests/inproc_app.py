"""The in-process test layer: an App with the scripted model (the fake server's dialect) and a
recording Frontend, on a session store in the test's temp dir. No daemon, no HTTP, no JSON-RPC:
core flows (prompt, cancel, compaction, model switching, commands, sub-agents, the permission gate)
run in milliseconds. The subprocess tiers keep one thin end-to-end test per flow."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from waiting import DEFAULT_TIMEOUT, wait_until_async

from toycoder_daemon.app.application import App, PromptOutcome
from toycoder_daemon.config.model import Config
from toycoder_daemon.core.messages import Message
from toycoder_daemon.core.ports import CommandRunner, Decision, EditApplied, EditorTextUnknown, Event, PermissionRequest
from toycoder_daemon.llm.base import ChatModel, ChatResponse, RetryNotice
from toycoder_daemon.sessions.store import SessionStore
from toycoder_daemon.testing.scripted_model import ScriptedModel


async def eventually(condition: Callable[[], bool], what: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Poll until `condition()` holds; fail naming `what` after the (scaled) deadline."""
    await wait_until_async(condition, timeout, what, interval=0.005)


class SharedScript(ScriptedModel):
    """One script for every model name, like the fake server: `calls[i]["model"]` says which name
    the request was for."""

    def factory(self, provider: str, name: str) -> ChatModel:
        return _Named(self, provider, name)


class _Named:
    def __init__(self, shared: SharedScript, provider: str, model: str):
        self.shared, self.provider, self.model = shared, provider, model

    async def stream_chat(self, messages: Sequence[Message], tools: list[dict[str, Any]] | None = None,
                          on_delta: Callable[[str], None] | None = None,
                          on_retry: Callable[[RetryNotice], None] | None = None) -> ChatResponse:
        self.shared.model = self.model  # recorded by the shared model before its first await
        return await self.shared.stream_chat(messages, tools, on_delta, on_retry)


class RecordingFrontend:
    """Records every event, permission request and question; answers from queues (default:
    reject, and no answer to a question)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Event]] = []
        self.requests: list[PermissionRequest] = []
        self.questions: list[tuple[str, list[str] | None]] = []
        self.decisions: list[Decision] = []
        self.default_decision: Decision = "reject"
        self.answers: list[str | None] = []
        self.hold: asyncio.Event | None = None
        """When set, a permission question waits for this event (a person who has not answered)."""
        self.on_confirm: Callable[[PermissionRequest], None] | None = None
        """Runs while a permission question is open (e.g. the person edits the file meanwhile)."""
        self.editor: EditApplied | None = None
        """None: an editor without workspace.applyEdit; else its answer to every edit (applied:
        the edit is applied to the workspace's open buffer, as an editor would)."""
        self.edits: list[tuple[Path, str, str]] = []
        self.edit_hold: asyncio.Event | None = None
        """When set, the editor answers an edit only once this event is set (a slow editor)."""
        self.buffers: dict[Path, str] | None = None
        """The open buffers an applied edit changes (the App's workspace.open_documents)."""
        self.served: dict[Path, str] | None = None
        """None: an editor that serves no files; else what it answers editor_text with (an ACP client
        with fs.readTextFile: its view, unsaved buffers included; a path not in it gets None)."""
        self.text_asks: list[Path] = []
        self.text_error: EditorTextUnknown | None = None
        """When set, editor_text raises it: an editor that serves files but could not answer."""
        self.writes_all = False
        """The editor is the source of truth for every file (an ACP client with fs.writeTextFile):
        an applied edit changes `served`, never the disk."""
        self.runner: CommandRunner | None = None
        """Where run_command runs instead of locally (None: locally, as the LSP face)."""

    def bind(self, session_id: str) -> _Bound:
        return _Bound(self, session_id)

    def of(self, session_id: str, kind: str | None = None) -> list[Event]:
        return [e for sid, e in self.events if sid == session_id and (kind is None or e.kind == kind)]

    def streamed_text(self, session_id: str) -> str:
        return "".join(getattr(e, "text", "") for e in self.of(session_id, "text_delta")
                       if e.parent_tool_call_id is None)


class _Bound:
    def __init__(self, recorder: RecordingFrontend, session_id: str):
        self.recorder, self.session_id = recorder, session_id

    def emit(self, event: Event) -> None:
        self.recorder.events.append((self.session_id, event))

    async def confirm(self, request: PermissionRequest) -> Decision:
        r = self.recorder
        r.requests.append(request)
        if r.on_confirm is not None:
            r.on_confirm(request)
        if r.hold is not None:
            await r.hold.wait()
        return r.decisions.pop(0) if r.decisions else r.default_decision

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        self.recorder.questions.append((question, options))
        return self.recorder.answers.pop(0) if self.recorder.answers else None

    def can_apply_edit(self) -> bool:
        return self.recorder.editor is not None

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        r = self.recorder
        assert r.editor is not None, "an edit through an editor that cannot apply edits"
        r.edits.append((path, before, after))
        if r.edit_hold is not None:
            await r.edit_hold.wait()
        if r.editor.applied and r.writes_all and r.served is not None:
            r.served[path] = after
        elif r.editor.applied and r.buffers is not None:
            assert r.buffers.get(path) == before, "the edit was made against another text than the buffer's"
            r.buffers[path] = after
        return r.editor

    async def editor_text(self, path: Path) -> str | None:
        r = self.recorder
        r.text_asks.append(path)
        if r.text_error is not None:
            raise r.text_error
        return None if r.served is None else r.served.get(path)

    def writes_all_files(self) -> bool:
        return self.recorder.writes_all

    def command_runner(self) -> CommandRunner | None:
        return self.recorder.runner

    async def diagnostics(self, uris: list[str], wait_ms: int) -> Any:
        return None  # the recording editor reports no diagnostics (the LSP tests drive them)


def config_for_tests(extra: dict[str, Any] | None = None) -> Config:
    """The subprocess tests' config (conftest.write_config) as a Config, with `extra` sections merged.
    The key is shorter than what `secrets` registers: the secret registry is process-wide, and an
    in-process App must not make later tests in this process redact a test key."""
    raw: dict[str, Any] = {
        "providers": {"openai": {"api_keys": ["k1"], "models": {"default": "fake-model", "fast": "fake-fast"}}},
        "default_provider": "openai",
        "agent": {"max_steps": 16, "max_retries": 2, "retry_interval": 0.05, "auto_title": False},
    }
    return Config.model_validate({**raw, **(extra or {})})


class InProc:
    """An App under test: `script` plays the model, `frontend` is the person."""

    def __init__(self, workspace: Path, data: Path, extra: dict[str, Any] | None = None,
                 script: SharedScript | None = None):
        self.script = script or SharedScript()
        self.frontend = RecordingFrontend()
        self.app = App(workspace, config_for_tests(extra), model_factory=self.script.factory,
                       store=SessionStore(data, workspace.resolve()))
        self.frontend.buffers = self.app.workspace.open_documents

    def new_session(self, title: str | None = None) -> str:
        return self.app.new_session(title).id

    async def prompt(self, session_id: str, text: str) -> PromptOutcome:
        return await self.app.prompt(session_id, text, lambda sid, turn: self.frontend.bind(sid))

    async def command(self, session_id: str, text: str) -> PromptOutcome:
        out = await self.prompt(session_id, text)
        assert out.result.stop_reason == "command", out
        return out

    def start_prompt(self, session_id: str, text: str) -> asyncio.Task[PromptOutcome]:
        return asyncio.ensure_future(self.prompt(session_id, text))

    async def close(self) -> None:
        await self.app.shutdown()
