"""The Frontend port over the LSP-framed connection: updates out, permission and questions in.
Text deltas are coalesced (coalesce.py)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Any

from . import protocol as wire
from .coalesce import TextCoalescer
from .ports import Decision, Event, PermissionRequest, TextDelta, ToolCallStarted

if TYPE_CHECKING:
    from .server import ToyCoderServer

log = logging.getLogger(__name__)

_ids = itertools.count(1)

FALLBACK_ACTIONS: dict[str, Decision] = {"Allow": "allow_once", "Always allow": "allow_always", "Deny": "reject"}


def update_payload(event: Event) -> dict[str, Any]:
    """Event dataclass -> the `update` object of toycoder/update (camelCase, no Nones)."""
    k = event.kind
    if k == "text_delta":
        return {"kind": k, "text": event.text}  # type: ignore[union-attr]
    if k == "tool_call":
        e: Any = event
        return {"kind": k, "toolCallId": e.tool_call_id, "name": e.name, "title": e.title,
                "arguments": e.arguments, "permission": e.permission}
    if k == "tool_result":
        e = event
        out = {"kind": k, "toolCallId": e.tool_call_id, "status": e.status, "output": e.output}
        if e.changed_paths:
            out["changedPaths"] = list(e.changed_paths)
        return out
    if k == "usage":
        e = event
        return {"kind": k, "promptTokens": e.prompt_tokens, "completionTokens": e.completion_tokens,
                "totalTokens": e.total_tokens}
    if k == "retry":
        e = event
        return {"kind": k, "attempt": e.attempt, "delaySeconds": e.delay_seconds, "reason": e.reason}
    if k == "compaction":
        e = event
        return {"kind": k, "strategy": e.strategy, "before": e.before, "after": e.after}
    raise ValueError(f"unknown event kind {k}")


class EditorFrontend:
    def __init__(self, server: ToyCoderServer, session_id: str, turn_id: str):
        self.server = server
        self.session_id = session_id
        self.turn_id = turn_id
        self._text = TextCoalescer(lambda parent, text: self._send({"kind": "text_delta", "text": text}, parent))
        self._progress_token: str | None = None
        self._progress_ready: asyncio.Task | None = None

    # ---- updates ------------------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._text.add(event.parent_tool_call_id, event.text)
            return
        self.flush()
        self._send(update_payload(event), event.parent_tool_call_id)
        if isinstance(event, ToolCallStarted):
            self.progress(f"running {event.name}")

    def flush(self) -> None:
        self._text.flush()

    def _send(self, update: dict[str, Any], parent: str | None) -> None:
        params: dict[str, Any] = {"sessionId": self.session_id, "turnId": self.turn_id, "update": update}
        if parent is not None:
            params["parentToolCallId"] = parent
        self.server.protocol.notify(wire.UPDATE, params)

    # ---- $/progress ---------------------------------------------------------------------------

    def begin_progress(self) -> None:
        if not self.server.supports_progress():
            return
        token = f"toycoder-{self.turn_id}"

        async def create() -> None:
            from lsprotocol import types

            try:
                await asyncio.wait_for(self.server.work_done_progress.create_async(token), 10)
            except Exception as e:  # a client that cannot show progress still gets the turn
                log.debug("progress token refused: %s", e)
                return
            self._progress_token = token
            self.server.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title="ToyCoder", message="thinking", cancellable=True)
            )

        self._progress_ready = asyncio.ensure_future(create())

    def progress(self, message: str) -> None:
        if self._progress_token:
            from lsprotocol import types

            self.server.work_done_progress.report(self._progress_token, types.WorkDoneProgressReport(message=message))

    def end_progress(self, message: str) -> None:
        self.flush()
        if self._progress_ready and not self._progress_ready.done():
            self._progress_ready.cancel()
        if self._progress_token:
            from lsprotocol import types

            self.server.work_done_progress.end(self._progress_token, types.WorkDoneProgressEnd(message=message))
            self._progress_token = None

    # ---- questions to the person --------------------------------------------------------------

    async def _request(self, method: str, params: Any, timeout: float) -> Any:
        """Send a request to the editor; on cancel or timeout tell the editor to drop its prompt."""
        msg_id = f"toycoder-{next(_ids)}"
        fut = self.server.protocol.send_request_async(method, params, msg_id=msg_id)
        try:
            return await asyncio.wait_for(fut, timeout)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            from lsprotocol import types

            self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise

    async def _show_message_request(self, kind: int, message: str, actions: list[str], timeout: float) -> str | None:
        """The standard LSP fallback for clients without our capabilities."""
        from lsprotocol import types

        params = types.ShowMessageRequestParams(
            type=types.MessageType(kind), message=message, actions=[types.MessageActionItem(title=a) for a in actions]
        )
        answer = await self._request(types.WINDOW_SHOW_MESSAGE_REQUEST, params, timeout)  # type: ignore[arg-type]
        return getattr(answer, "title", None)

    async def confirm(self, request: PermissionRequest) -> Decision:
        self.flush()
        timeout = self.server.permission_timeout()
        params = wire.PermissionParams(
            session_id=self.session_id, turn_id=self.turn_id, tool_call_id=request.tool_call_id, tool=request.tool,
            level=request.level, title=request.title, arguments=request.arguments,
            preview=wire.Preview.model_validate(request.preview) if request.preview else None,
        ).dump()
        self.progress(f"waiting for your permission: {request.title}")
        try:
            if self.server.client_can("permissionRequest"):
                result = await self._request(wire.REQUEST_PERMISSION, params, timeout)
                return wire.PermissionResult.model_validate(result or {}).decision
            answer = await self._show_message_request(
                2, f"ToyCoder wants to run {request.title}", list(FALLBACK_ACTIONS), timeout
            )
            return FALLBACK_ACTIONS.get(answer or "", "reject")
        except asyncio.CancelledError:
            raise
        except Exception as e:  # timeout, error reply, malformed answer: not a yes
            log.info("permission for %s not granted (%s)", request.title, type(e).__name__)
            return "reject"

    async def ask(self, question: str, options: list[str] | None) -> str | None:
        self.flush()
        timeout = self.server.permission_timeout()
        try:
            if self.server.client_can("askUser"):
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
