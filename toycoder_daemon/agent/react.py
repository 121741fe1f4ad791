"""The ReAct loop: think (stream a reply), act (run its tool calls), observe (append results), repeat.

`run_turn` appends to `messages` as it goes, so the caller keeps the conversation (any object with
append/extend/iteration: a session's Conversation writes each message to disk, a sub-agent's is a list). The invariant
the model API demands holds on every exit, cancel and provider error included: every assistant
`tool_calls` entry is answered by a `tool` message before the next model request, and tool-call
ids are unique within a reply (`unique_call_ids`: duplicates are renamed and run, not dropped).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from toycoder_daemon.agent.hooks.engine import Hooks
from toycoder_daemon.core.messages import INTERRUPTED_MARK, AssistantMessage, Message, ToolMessage
from toycoder_daemon.core.ports import (
    Frontend,
    RetryScheduled,
    StopReason,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageReport,
)
from toycoder_daemon.core.util import safejson
from toycoder_daemon.core.util.visible import visible
from toycoder_daemon.llm import overflow, tools_ignored
from toycoder_daemon.llm.base import ChatModel, ChatResponse, ContextOverflow, RetryNotice, ToolCall, Usage, for_api
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.diagnostics import WRITERS, EditCheck
from toycoder_daemon.tools.registry import ToolOutcome, ToolRegistry

log = logging.getLogger(__name__)


class TurnMessages(Protocol):
    """What the engine needs of a conversation: read it, add to it (never rewrite or remove)."""

    def __iter__(self) -> Iterator[Message]: ...

    def __len__(self) -> int: ...

    def append(self, message: Message) -> None: ...

    def extend(self, messages: Iterable[Message]) -> None: ...

CANCELLED_OBSERVATION = "cancelled: the user stopped the turn before this tool call finished"
INTERRUPTED_OBSERVATION = "interrupted: the daemon stopped before this tool call finished"
"""What repair_tool_calls answers a call with that a stopped (killed) daemon left open."""
TRUNCATED_OBSERVATION = (
    "error: your reply hit the output length limit before its tool calls were complete, so none was run. "
    "Send them again with smaller arguments (e.g. write a big file in several edits)."
)
MAX_CONTINUATIONS = 2
"""Times a reply cut by the output limit (finish_reason "length", no tool calls) is asked to go on."""
CONTINUE_PROMPT = (
    "[your reply was cut by the output length limit; continue exactly where it stopped, "
    "without repeating anything]"
)
LENGTH_NOTICE = (
    "[the reply was cut by the output length limit (max_tokens) and is incomplete; ask for a shorter "
    "answer, or raise the provider's max_tokens in the config]"
)
WINDOW_NOTICE = (
    "[the reply was cut: it filled the model's context window{size} and is incomplete; /compact makes room "
    "for the next prompt, or give the server a larger context (llama-server -c, Ollama num_ctx)]"
)


def window_notice(model: ChatModel) -> str:
    window = getattr(model, "context_tokens", None)
    return WINDOW_NOTICE.format(size=f" ({window} tokens)" if window else "")


def over_window(model: ChatModel, messages: list[Message], tools: list[dict[str, Any]] | None) -> ContextOverflow | None:
    """The overflow a request would meet, when the server's known window cannot hold it: it is not sent."""
    window = getattr(model, "context_tokens", None)
    if not window:
        return None
    tokens = overflow.request_tokens(for_api(messages), tools)
    if tokens <= window:
        return None
    return ContextOverflow(model.provider, f"the request (about {tokens} tokens) is over the model's context "
                           f"window ({window} tokens), so it was not sent", None, window)


@dataclass
class TurnResult:
    stop_reason: StopReason
    text: str
    """The final reply (or the max_steps notice)."""
    usage: Usage
    steps: int


def unique_call_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """The reply's calls with ids unique within the reply: an empty id, or one already used by an
    earlier call of the same reply, gets a fresh one (`<id>-dup2`, ...). Every call still runs; only
    its id changes, so the stored conversation pairs each call with exactly one result, which strict
    providers demand (some models and proxies repeat ids or send them empty)."""
    seen = {tc.id for tc in calls if tc.id}
    used: set[str] = set()
    out: list[ToolCall] = []
    for tc in calls:
        new_id, n = tc.id, 1
        while not new_id or new_id in used:
            n += 1
            new_id = f"{tc.id or 'call'}-dup{n}"
            if new_id in seen:
                new_id = ""
        used.add(new_id)
        out.append(tc if new_id == tc.id else ToolCall(new_id, tc.name, tc.arguments))
    return out


def _assistant_message(resp: ChatResponse) -> AssistantMessage:
    msg: AssistantMessage = {"role": "assistant", "content": resp.content or (None if resp.tool_calls else "")}
    if resp.tool_calls:
        msg["tool_calls"] = [
            {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
            for tc in resp.tool_calls
        ]
    return msg


def _told_tools_ignored(messages: TurnMessages) -> bool:
    return any(m["role"] == "assistant" and tools_ignored.MARK in str(m.get("content") or "") for m in messages)


def _no_tools_first(model: ChatModel, tools: ToolRegistry, messages: TurnMessages, frontend: Frontend,
                    told: str | None) -> str:
    """A server already known to take no tools (llama.cpp's /props, Ollama's /api/show) is said before the
    session's first reply streams, once per conversation, unless the session was `told` so as it opened;
    the notice, or "" when there is nothing to say."""
    say = getattr(model, "no_tools_notice", None)
    notice = say() if say is not None and tools.schemas() else None
    if not notice or notice == told or _told_tools_ignored(messages):
        return ""
    log.warning("%s", notice.strip("[]"))
    frontend.emit(TextDelta(notice + "\n\n"))
    return str(notice)


def _tell_tools_ignored(resp: ChatResponse, messages: TurnMessages, frontend: Frontend, told: str | None) -> None:
    """Once per conversation (the notice stays in its reply, so a reload remembers it too): the server
    seems to ignore the tools, which leaves the agent answering without ever looking."""
    notice = resp.tools_ignored
    if not notice or notice == told or _told_tools_ignored(messages):
        return
    log.warning("%s", notice.strip("[]"))
    frontend.emit(TextDelta("\n\n" + notice))
    resp.content = (resp.content + "\n\n" + notice).lstrip()


def _decode(arguments: str) -> Any:
    """The arguments for display; text that does not decode (or nests too deep) is shown raw."""
    try:
        return safejson.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _tool_message(tool_call_id: str, content: str, status: str) -> ToolMessage:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content, "status": status}


def answer_open_tool_calls(messages: TurnMessages, observation: str = CANCELLED_OBSERVATION,
                           status: str = "cancelled") -> int:
    """Answer every tool call of the last assistant message that has no tool message yet."""
    items = list(messages)
    for i in range(len(items) - 1, -1, -1):
        m = items[i]
        if m["role"] == "assistant":
            answered = {t["tool_call_id"] for t in items[i + 1:] if t["role"] == "tool"}
            missing = [c["id"] for c in m.get("tool_calls") or () if c["id"] not in answered]
            messages.extend(_tool_message(cid, observation, status) for cid in missing)
            return len(missing)
    return 0


def repair_tool_calls(messages: list[Message]) -> list[Message]:
    """`messages` with every unanswered tool call answered right after its group of results (a
    crash mid-turn, or an unreadable line skipped on load). The same list when nothing is missing."""
    out: list[Message] = []
    pending: list[str] = []

    def close_group() -> None:
        out.extend(_tool_message(cid, INTERRUPTED_OBSERVATION, "cancelled") for cid in pending)
        pending.clear()

    for m in messages:
        if m["role"] == "tool":
            if m.get("tool_call_id") in pending:
                pending.remove(m["tool_call_id"])
        else:
            close_group()
            if m["role"] == "assistant":
                pending.extend(c["id"] for c in m.get("tool_calls") or ())
        out.append(m)
    close_group()
    return messages if len(out) == len(messages) else out


async def run_turn(
    model: ChatModel,
    messages: TurnMessages,
    tools: ToolRegistry,
    frontend: Frontend,
    *,
    max_steps: int,
    make_context: Callable[[str], ToolContext],
    on_usage: Callable[[Usage], None] | None = None,
    make_room: Callable[[ContextOverflow], Awaitable[bool]] | None = None,
    hooks: Hooks | None = None,
    told: str | None = None,
) -> TurnResult:
    """`make_room`: called when a request is over the context window; it shrinks the conversation
    (compaction, trimming) and says whether it did, and then that request is sent once more. Over
    again, it is called once more (to leave a usable history) and the error is raised.
    `hooks`: PreToolUse/PostToolUse around each call, Stop (SubagentStop) before the turn ends.
    `told`: the notice the session's client got as the session opened (its server takes no tools):
    not said again in a reply."""
    usage = Usage()
    partial: list[str] = []  # text of the reply being streamed, dropped on retry

    def on_delta(text: str) -> None:
        partial.append(text)
        frontend.emit(TextDelta(text))

    def on_retry(notice: RetryNotice) -> None:
        partial.clear()
        frontend.emit(RetryScheduled(notice.attempt, notice.delay_seconds, notice.reason))

    async def ask(extra: list[Message]) -> ChatResponse:
        """One request: the conversation and `extra` (not yet in it); never sent over the known window."""
        request, schemas = list(messages) + extra, tools.schemas() or None
        if (too_big := over_window(model, request, schemas)) is not None:
            raise too_big
        return await model.stream_chat(request, schemas, on_delta, on_retry)

    said_first = _no_tools_first(model, tools, messages, frontend, told)  # kept in the first reply's text
    step = 0
    cut_parts: list[str] = []  # the pieces of a reply cut by the output limit, continued so far
    stops = 0  # times a Stop hook made the agent go on
    going_on: list[Message] = []  # the cut reply and the request to go on: kept once that request is taken
    try:
        while step < max_steps:
            step += 1
            partial.clear()
            try:
                resp = await ask(going_on)
            except ContextOverflow as e:
                if going_on:  # a reply cut at the full window: going on cannot fit, so the turn ends with it
                    notice = window_notice(model)
                    log.info("continuation over the context window (%s); ending the turn", e.reason)
                    frontend.emit(TextDelta("\n\n" + notice))
                    cut = cast(AssistantMessage, going_on[0])
                    messages.append({**cut, "content": (str(cut.get("content") or "") + "\n\n" + notice).lstrip()})
                    return TurnResult("max_tokens", ("".join(cut_parts) + "\n\n" + notice).lstrip(), usage, step)
                # once per step: the same request over the window again means making room did not work
                if make_room is None or not await make_room(e):
                    raise
                partial.clear()
                try:
                    resp = await ask([])
                except ContextOverflow as again:
                    await make_room(again)  # failed for good: leave a history the next prompt fits in
                    if again.status is None and (forget := getattr(model, "forget_window", None)):
                        forget()  # refused here, not by the server: the next turn asks the server again
                    raise
            messages.extend(going_on)
            going_on = []
            partial.clear()
            if resp.usage:
                usage = usage + resp.usage
                if on_usage:
                    on_usage(resp.usage)
                frontend.emit(UsageReport(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens))
            else:  # the server sent no usage: count the reply as unknown rather than as 0 tokens
                usage = usage + Usage(unreported=1)
                if on_usage:
                    on_usage(Usage(unreported=1))
            resp.tool_calls = unique_call_ids(resp.tool_calls)
            if said_first:
                resp.content, resp.tools_ignored, said_first = f"{said_first}\n\n{resp.content}", None, ""
            _tell_tools_ignored(resp, messages, frontend, told)
            if not resp.tool_calls and resp.finish_reason == "length":
                # Cut by the output limit: a cut reply must never read as complete. Ask the model to
                # go on (the incumbents' "continue"); still cut after that, say so.
                cut_parts.append(resp.content)
                if len(cut_parts) <= MAX_CONTINUATIONS and step < max_steps:
                    going_on = [_assistant_message(resp), {"role": "user", "content": CONTINUE_PROMPT}]
                    continue
                frontend.emit(TextDelta("\n\n" + LENGTH_NOTICE))
                resp.content = (resp.content + "\n\n" + LENGTH_NOTICE).lstrip()
                messages.append(_assistant_message(resp))
                return TurnResult("max_tokens", ("".join(cut_parts) + "\n\n" + LENGTH_NOTICE).lstrip(), usage, step)
            messages.append(_assistant_message(resp))
            if not resp.tool_calls:
                if hooks is not None and stops < hooks.max_continuations:
                    verdict = await hooks.stop(frontend, stops > 0)
                    if verdict.blocked and step < max_steps:  # the reason is the agent's next instruction
                        stops += 1
                        messages.append({"role": "user", "content": f"[a stop hook says: {verdict.reason}]"})
                        continue
                return TurnResult("end_turn", "".join(cut_parts) + resp.content, usage, step)
            if resp.finish_reason == "length":
                # The output limit cut the reply: its last call's arguments may be incomplete, and
                # running `{}` or half a file would be worse than asking again.
                for tc in resp.tool_calls:
                    shown = visible(tc.name)  # a model's tool name, shown: no control characters
                    frontend.emit(ToolCallStarted(tc.id, shown, shown, _decode(tc.arguments), "safe"))
                    frontend.emit(ToolCallFinished(tc.id, "failed", TRUNCATED_OBSERVATION))
                    messages.append(_tool_message(tc.id, TRUNCATED_OBSERVATION, "failed"))
                continue
            for tc in resp.tool_calls:
                t = tools.get(tc.name)
                args = _decode(tc.arguments)
                title = t.describe_call(args) if t and isinstance(args, dict) else visible(tc.name)
                ctx = make_context(tc.id)
                call = tools.prepare(tc.name, tc.arguments, ctx)
                blocked = None
                if hooks is not None and call.ended is None and call.judgement is not None:
                    verdict = await hooks.pre_tool(frontend, tc.name, args)
                    if verdict.blocked:
                        blocked = ToolOutcome("denied", f"denied by a PreToolUse hook: {verdict.reason}")
                    elif verdict.decision:
                        call.judgement = tools.gate.steer(call.judgement, verdict.decision)
                frontend.emit(ToolCallStarted(tc.id, visible(tc.name), title, args, t.level if t else "safe",
                                              will_ask=blocked is None and tools.will_ask(call)))
                check = EditCheck(ctx.frontend, ctx.workspace, ctx.settings.diagnostics_wait_ms,
                                  ctx.settings.diagnostics_level, args.get("path") if isinstance(args, dict) else None)
                try:
                    if blocked is not None:
                        outcome = blocked
                    else:
                        if call.tool is not None and call.tool.name in WRITERS and call.ended is None:
                            await check.before()  # what the editor reports now: the edit's new ones stand out
                        outcome = await tools.run(call)
                        # not only when the disk changed: an edit applied in the editor's buffer
                        # (workspace/applyEdit) writes no file, and its diagnostics matter most
                        if outcome.status == "completed" and (note := await check.note()):
                            outcome = replace(outcome, output=outcome.output + note)
                except asyncio.CancelledError:
                    changed = tuple(ctx.changed or ())
                    wrote = f" (it had already written {', '.join(changed)})" if changed else ""
                    note = CANCELLED_OBSERVATION + wrote
                    frontend.emit(ToolCallFinished(tc.id, "cancelled", note, changed))
                    messages.append(_tool_message(tc.id, note, "cancelled"))
                    raise
                frontend.emit(ToolCallFinished(tc.id, outcome.status, outcome.output, tuple(outcome.changed)))
                observation = outcome.output
                if hooks is not None and blocked is None and call.ended is None:
                    after = await hooks.post_tool(frontend, tc.name, args, outcome.status, outcome.output)
                    if after.additional_context:
                        observation += f"\n\n[context from a PostToolUse hook]\n{after.additional_context}"
                    if after.blocked:
                        observation += f"\n\n[a PostToolUse hook says: {after.reason}]"
                messages.append(_tool_message(tc.id, observation, outcome.status))
        notice = (
            f"[stopped after {max_steps} steps (max_steps) before the task was finished; "
            "send another message to let the agent continue]"
        )
        return TurnResult("max_steps", notice, usage, step)
    except asyncio.CancelledError:
        # Keep what the person already saw, then make the conversation valid again.
        messages.extend(going_on[:1])  # a cut reply whose continuation was under way
        if partial:
            messages.append({"role": "assistant", "content": "".join(partial) + INTERRUPTED_MARK, "interrupted": True})
        answer_open_tool_calls(messages)
        raise
    except BaseException:
        messages.extend(going_on[:1])  # what streamed stays, whatever stopped the continuation
        answer_open_tool_calls(messages, "error: the turn failed before this tool call finished", "failed")
        raise
