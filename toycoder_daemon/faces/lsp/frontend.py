"""The Frontend port over the LSP-framed connection: updates out, permission and questions in.
Text deltas are coalesced (rpc/coalesce.py). It talks to the connection through `EditorLink` (the
server implements it), so it does not know the server module."""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path
from typing import Any, Protocol

from toycoder_daemon.core.ports import (
    CommandRunner,
    Decision,
    EditApplied,
    Event,
    FileDiagnostics,
    McpWaiting,
    PermissionRequest,
    TextDelta,
    ToolCallStarted,
    TrustDecision,
    TrustRequest,
)
from toycoder_daemon.faces.lsp.mapping import apply_edit_params, trust_params, update_payload
from toycoder_daemon.rpc.coalesce import TextCoalescer
from toycoder_daemon.rpc.reply_wait import reply_within
from toycoder_daemon.wire import protocol as wire

log = logging.getLogger(__name__)

_ids = itertools.count(1)
APPLY_EDIT = "workspace/applyEdit"

FALLBACK_ACTIONS: dict[str, Decision] = {"Allow": "allow_once", "Always allow": "allow_always", "Deny": "reject"}


class EditorLink(Protocol):
    """What a turn needs of the editor connection."""

    def notify(self, method: str, params: Any) -> None: ...
    def send_request(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]: ...
    def send_show_message_request(self, kind: int, message: str, actions: list[str],
                                  msg_id: str) -> asyncio.Future[Any]: ...
    def drop_request(self, msg_id: str) -> None: ...
    def client_can(self, feature: str) -> bool: ...
    def client_can_apply_edit(self) -> bool: ...
    def edit_version(self, path: Path, before: str) -> int | None: ...
    def supports_progress(self) -> bool: ...
    def permission_timeout(self) -> float: ...
    async def progress_create(self, token: str) -> None: ...
    def progress_begin(self, token: str, message: str) -> None: ...
    def progress_report(self, token: str, message: str) -> None: ...
    def progress_end(self, token: str, message: str) -> None: ...


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # an error reply nobody waits for any more is not an unhandled error


class EditorFrontend:
    def __init__(self, link: EditorLink, session_id: str, turn_id: str):
        self.link = link
        self.session_id = session_id
        self.turn_id = turn_id
        self._text = TextCoalescer(lambda parent, text: self._send(wire.TextDeltaUpdate(text=text), parent))
        self._progress_token: str | None = None
        self._progress_ready: asyncio.Future[None] | None = None
        self._ended = False

    # ---- updates ------------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._text.add(event.parent_tool_call_id, event.text)
            return
        self.flush()
        self._send(update_payload(event), event.parent_tool_call_id)
        if isinstance(event, ToolCallStarted):
            self.progress(f"running {event.name}")
        elif isinstance(event, McpWaiting):
            self.progress(f"starting MCP servers: {', '.join(event.servers)}" if event.state == "waiting" else "thinking")

    def flush(self) -> None:
        self._text.flush()

    def _send(self, update: wire.Update, parent: str | None) -> None:
        params = wire.UpdateParams(session_id=self.session_id, turn_id=self.turn_id, parent_tool_call_id=parent,
                                   update=update)
        self.link.notify(wire.UPDATE, params.dump())

    # ---- $/progress ---------------------------------------------------------------------------

    def begin_progress(self) -> None:
        if not self.link.supports_progress():
            return
        token = f"toycoder-{self.turn_id}"

        async def create() -> None:
            try:
                # shielded: a token the client grants after the turn ended is harmless, while a
                # cancelled wait would leave pygls a reply to a cancelled future
                await asyncio.wait_for(asyncio.shield(self.link.progress_create(token)), 10)
            except Exception as e:  # a client that cannot show progress still gets the turn
                log.debug("progress token refused: %s", e)
                return
            if self._ended:
                return
            self._progress_token = token
            self.link.progress_begin(token, "thinking")

        self._progress_ready = asyncio.ensure_future(create())

    def progress(self, message: str) -> None:
        if self._progress_token:
            self.link.progress_report(self._progress_token, message)

    def end_progress(self, message: str) -> None:
        self.flush()
        self._ended = True
        if self._progress_ready and not self._progress_ready.done():
            self._progress_ready.cancel()
        if self._progress_token:
            self.link.progress_end(self._progress_token, message)
            self._progress_token = None

    # ---- questions to the person --------------------------------------------------------------

    async def _wait(self, fut: asyncio.Future[Any], msg_id: str, timeout: float) -> Any:
        """Wait for the editor's answer; on cancel or timeout tell the editor to drop its prompt.
        The reply future itself is never cancelled (shielded), so a late reply finds it intact."""
        fut.add_done_callback(_retrieve)
        try:
            return await reply_within(asyncio.shield(fut), timeout)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            self.link.drop_request(msg_id)
            raise

    async def _request(self, method: str, params: Any, timeout: float) -> Any:
        msg_id = f"toycoder-{next(_ids)}"
        return await self._wait(self.link.send_request(method, params, msg_id), msg_id, timeout)

    async def _show_message_request(self, kind: int, message: str, actions: list[str], timeout: float) -> str | None:
        """The standard LSP fallback for clients without our capabilities."""
        msg_id = f"toycoder-{next(_ids)}"
        answer = await self._wait(self.link.send_show_message_request(kind, message, actions, msg_id), msg_id, timeout)
        return getattr(answer, "title", None)

    async def confirm(self, request: PermissionRequest) -> Decision:
        return await self.permission(request) or "reject"

    async def permission(self, request: PermissionRequest) -> Decision | None:
        """The person's decision; None for a timeout, an error or malformed reply, a dismissed
        fallback prompt (core.ports.Asker: confirm makes it a "reject")."""
        self.flush()
        timeout = self.link.permission_timeout()
        params = wire.PermissionParams(
            session_id=self.session_id, turn_id=self.turn_id, tool_call_id=request.tool_call_id, tool=request.tool,
            level=request.level, title=request.title, arguments=request.arguments,
            preview=request.preview,  # type: ignore[arg-type]  # validated into DiffPreview | CommandPreview
        ).dump()
        self.progress(f"waiting for your permission: {request.title}")
        try:
            if self.link.client_can("permissionRequest"):
                result = await self._request(wire.REQUEST_PERMISSION, params, timeout)
                return wire.PermissionResult.model_validate(result or {}).decision
            answer = await self._show_message_request(
                2, f"ToyCoder wants to run {request.title}", list(FALLBACK_ACTIONS), timeout
            )
            return FALLBACK_ACTIONS.get(answer or "")
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer: not a yes
            log.info("permission for %s not granted (%s)", request.title, type(e).__name__)
            return None

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        self.flush()
        timeout = self.link.permission_timeout()
        try:
            if self.link.client_can("askUser"):
                params = wire.AskUserParams(session_id=self.session_id, turn_id=self.turn_id, question=question,
                                            options=options).dump()
                result = wire.AskUserResult.model_validate(await self._request(wire.ASK_USER, params, timeout) or {})
                return None if result.cancelled else result.answer
            if options:
                return await self._show_message_request(3, question, options, timeout)
            return None
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.info("question not answered (%s)", type(e).__name__)
            return None

    async def trust_workspace(self, request: TrustRequest) -> TrustDecision:
        """toycoder/workspace/trust, to a client that announced `workspaceTrust`; else "unanswered"."""
        self.flush()
        if not self.link.client_can("workspaceTrust"):
            return "unanswered"
        self.progress("waiting for you to trust this workspace's settings")
        try:
            result = await self._request(wire.WORKSPACE_TRUST, trust_params(request).dump(),
                                         self.link.permission_timeout())
            return wire.WorkspaceTrustResult.model_validate(result or {}).decision
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer: not a yes, nor a no
            log.info("workspace trust not answered (%s)", type(e).__name__)
            return "unanswered"

    # ---- edits through the editor (workspace/applyEdit) ---------------------------------------

    def can_apply_edit(self) -> bool:
        return self.link.client_can_apply_edit()

    async def editor_text(self, path: Path) -> str | None:
        return None  # open buffers arrive as textDocument/did* (workspace.open_documents)

    def writes_all_files(self) -> bool:
        return False  # files not open in the editor are written by the daemon

    def command_runner(self) -> CommandRunner | None:
        return None  # LSP has no terminals to lend: commands run here

    async def diagnostics(self, uris: list[str], wait_ms: int) -> list[FileDiagnostics] | None:
        """toycoder/diagnostics, for a client that declared `diagnostics`; it may wait `wait_ms`
        (plus a second for the round trip) before anything but a well-formed answer counts as none."""
        if not self.link.client_can("diagnostics"):
            return None
        self.flush()
        params = wire.DiagnosticsParams(uris=uris, wait_ms=wait_ms).dump()
        try:
            answer = await self._request(wire.DIAGNOSTICS, params, wait_ms / 1000 + 1.0)
            result = wire.DiagnosticsResult.model_validate(answer or {})
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer: no diagnostics
            log.info("no diagnostics from the editor (%s)", type(e).__name__)
            return None
        return [FileDiagnostics(f.uri, tuple(f.diagnostics)) for f in result.items]

    async def apply_edit(self, path: Path, before: str, after: str) -> EditApplied:
        self.flush()
        # versioned when the client can check it: a keystroke since `before` was read is refused
        params = apply_edit_params(path.as_uri(), before, after, f"ToyCoder: edit {path.name}",
                                   self.link.edit_version(path, before))
        try:
            result = await self._request(APPLY_EDIT, params, self.link.permission_timeout())
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply: not applied
            return EditApplied(False, f"the editor answered with an error ({type(e).__name__}: {e})")
        applied = result.get("applied") if isinstance(result, dict) else getattr(result, "applied", None)
        reason = (result.get("failureReason") if isinstance(result, dict) else getattr(result, "failure_reason", None))
        return EditApplied(applied is True, None if applied is True else reason or "the editor refused it")
