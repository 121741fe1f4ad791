"""`session/prompt` on the ACP face: the turn ToyCoderAgent.prompt runs, over an
acp_client.RawClient, and its result dict; core errors and their JSON-RPC errors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toycoder_daemon.app.application import App
from toycoder_daemon.core.errors import (
    MAX_SESSION_ID,
    BadInput,
    ConfigError,
    InvalidSessionId,
    ProviderError,
    SessionBusy,
    SessionNotFound,
)
from toycoder_daemon.faces.acp import client as acp_client
from toycoder_daemon.faces.acp.client import RESOURCE_NOT_FOUND
from toycoder_daemon.faces.acp.content import prompt_parts
from toycoder_daemon.faces.acp.frontend import AcpFrontend
from toycoder_daemon.faces.acp.terminal import Terminals
from toycoder_daemon.wire import codes as wire

STOP_REASONS = {"end_turn": "end_turn", "max_steps": "max_turn_requests", "max_tokens": "max_tokens",
                "cancelled": "cancelled", "command": "end_turn"}


class EmptyPrompt(ValueError):
    """The prompt has no text (-32602)."""


@dataclass(frozen=True)
class Caps:
    """What the client declared in `initialize` that a turn uses."""

    elicit: bool = False
    read: bool = False
    write: bool = False


def core_error(e: Exception) -> tuple[int, str, Any] | None:
    """(code, message, data) of the JSON-RPC error for a core error; None for anything else."""
    if isinstance(e, InvalidSessionId):
        return wire.INVALID_PARAMS, str(e), {"sessionId": e.session_id[:MAX_SESSION_ID]}
    if isinstance(e, SessionNotFound):
        return RESOURCE_NOT_FOUND, str(e), {"sessionId": e.session_id}
    if isinstance(e, SessionBusy):
        return wire.SESSION_BUSY, str(e), {"sessionId": e.session_id}
    if isinstance(e, ProviderError):
        return wire.PROVIDER_ERROR, str(e), {"provider": e.provider}
    if isinstance(e, ConfigError):
        return wire.CONFIG_ERROR, str(e), None
    if isinstance(e, BadInput):
        return wire.INVALID_PARAMS, f"Invalid params: {e}", None
    return None


def action_note(action: dict[str, Any] | None) -> str:
    """ACP lets the client, not the agent, pick the session: say what to do instead."""
    if not action:
        return ""
    if action.get("kind") == "switch":
        return f"\n(open session {action['sessionId']} from your editor's session list to continue there)"
    return "\n(close the agent from your editor to quit)"


async def run_prompt(app: App, session_id: str, blocks: list[Any], client: acp_client.RawClient, caps: Caps,
                     terminals: Terminals | None, begun: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """One turn: its updates go to `client`, all of them before the result (as the SDK dumps
    PromptResponse) is returned. EmptyPrompt, or the core's errors (core_error), are raised.
    `begun` is called when the turn begins (App.prompt loads the session and takes its lock first)."""
    text, context = prompt_parts(blocks, app.workspace.root)
    if not text.strip() and context:
        text = "(see the attached context)"
    if not text.strip():
        raise EmptyPrompt("the prompt is empty")
    frontends: list[AcpFrontend] = []

    def frontend_for(sid: str, turn_id: str) -> AcpFrontend:
        begun()
        frontends.append(AcpFrontend(client, app, sid, can_elicit=caps.elicit, can_write=caps.write,
                                     can_read=caps.read, terminals=terminals))
        return frontends[-1]

    try:
        # /new and /switch leave the session open: the client still holds it (and gave its MCP servers)
        outcome = await app.prompt(session_id, text, frontend_for, close_on_switch=False, context=context)
        r = outcome.result
        if r.stop_reason in ("command", "max_steps") and r.text and frontends:
            frontends[0].send(acp_client.chunk(r.text + action_note(outcome.action)))
    finally:
        for f in frontends:  # every update reaches the client before the answer does
            await f.drain()
    u = r.usage
    return answer(r.stop_reason, u.total_tokens, u.prompt_tokens, u.completion_tokens)


def answer(stop_reason: str, total: int = 0, prompt: int = 0, completion: int = 0) -> dict[str, Any]:
    """session/prompt's result (PromptResponse as the SDK dumps it)."""
    return {"stopReason": STOP_REASONS.get(stop_reason, "end_turn"),
            "usage": {"totalTokens": total, "inputTokens": prompt, "outputTokens": completion}}
