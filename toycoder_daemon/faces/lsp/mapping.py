"""Core values -> the LSP face's wire types, in one place: the core returns dataclasses and events,
the handlers and the EditorFrontend hand them here and send what comes back (pydantic wire models,
validated when built)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

from lsprotocol import converters, types
from pydantic import TypeAdapter, ValidationError

from toycoder_daemon.app.application import PromptOutcome
from toycoder_daemon.checkpoints import Checkpoint
from toycoder_daemon.checkpoints import RestoreResult as CoreRestoreResult
from toycoder_daemon.commands.custom import CommandRow
from toycoder_daemon.core.ports import (
    ChangedFile,
    Compacted,
    Event,
    FilesChanged,
    HookRan,
    McpWaiting,
    ModelsInfo,
    PermissionResolved,
    PlanEntry,
    PlanUpdated,
    RetryScheduled,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolSummary,
    TrustRequest,
    UsageReport,
)
from toycoder_daemon.llm.base import Usage
from toycoder_daemon.sessions.session import TranscriptEntry
from toycoder_daemon.sessions.store import SessionSummary
from toycoder_daemon.wire import protocol as wire

_ACTION: TypeAdapter[wire.SwitchAction | wire.QuitAction] = TypeAdapter(wire.Action)

log = logging.getLogger(__name__)


def session_info(s: SessionSummary, cwd: str | None = None) -> wire.SessionInfo:
    return wire.SessionInfo(session_id=s.id, title=s.title, created_at=wire.iso_time(s.created_at),
                            updated_at=wire.iso_time(s.updated_at), message_count=s.message_count, mode=s.mode,
                            cwd=cwd, additional_directories=list(s.additional_directories) or None)


def transcript_entry(e: TranscriptEntry) -> wire.TranscriptEntry:
    return wire.TranscriptEntry(role=e.role, text=e.text, tool_call_id=e.tool_call_id, name=e.name,
                                status=cast(Any, e.status), turn_id=e.turn_id,
                                files=[changed_file(f) for f in e.files] if e.role == "changes" else None,
                                interrupted=e.interrupted or None, stop_reason=cast(Any, e.stop_reason),
                                usage=usage_info(e.usage) if e.usage is not None else None,
                                entries=plan_entries(e.plan) if e.role == "plan" else None, restore_of=e.restore_of,
                                context=context_chips(e.context) or None)


def context_chips(stored: tuple[dict[str, Any], ...]) -> list[wire.ContextChip]:
    """A prompt's stored chips; one a hand-edited or newer file made unreadable is left out."""
    out = []
    for c in stored:
        try:
            out.append(wire.ContextChip.model_validate(c))
        except ValidationError:
            log.debug("a stored context chip left out: %.120r", c)
    return out


def usage_info(u: Usage) -> wire.UsageInfo:
    return wire.UsageInfo(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                          total_tokens=u.total_tokens)


def changed_file(f: ChangedFile) -> wire.ChangedFileInfo:
    return wire.ChangedFileInfo(path=f.path, uri=f.uri, status=f.status, added=f.added, removed=f.removed,
                                in_editor=f.in_editor or None)


def checkpoint_list(rows: list[Checkpoint]) -> wire.CheckpointList:
    return wire.CheckpointList(checkpoints=[
        wire.CheckpointInfo(turn_id=c["turnId"], created_at=wire.iso_time(c["createdAt"]), prompt=c["prompt"],
                            files=[wire.CheckpointFile.model_validate({**f, "inEditor": f["inEditor"] or None})
                                   for f in c["files"]], restore_of=c["restoreOf"] or None)
        for c in rows])


def restore_result(r: CoreRestoreResult) -> wire.RestoreResult:
    return wire.RestoreResult(restored=r["restored"], turn_id=r["turnId"], note=r["note"],
                              in_editor=r["inEditor"] or None, conflicts=[wire.RestoreConflict(path=c["path"], reason=c["reason"])
                                         for c in r["conflicts"]])


def tool_info(t: ToolSummary) -> wire.ToolInfo:
    return wire.ToolInfo(name=t.name, description=t.description, permission=cast(Any, t.level), enabled=t.enabled,
                         source=t.source)


def command_info(c: CommandRow) -> wire.CommandInfo:
    return wire.CommandInfo(name=c.name, usage=c.usage, help=c.help, aliases=list(c.aliases), source=c.source)


def models_result(m: ModelsInfo) -> wire.ModelsResult:
    return wire.ModelsResult(
        current=wire.ModelRef(provider=m.provider, model=m.model),
        providers=[wire.ProviderInfo(name=p.name, base_url=p.base_url, models=p.models, key_count=p.key_count,
                                     served_models=None if p.served is None else list(p.served))
                   for p in m.providers],
    )


def prompt_result(outcome: PromptOutcome) -> wire.PromptResult:
    r, u = outcome.result, outcome.result.usage
    # a command's action is a camelCase dict from the command registry; the wire type checks it
    action = _ACTION.validate_python(outcome.action) if outcome.action else None
    return wire.PromptResult(turn_id=outcome.turn_id, stop_reason=cast(Any, r.stop_reason), text=r.text,
                             usage=wire.UsageInfo(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                                                  total_tokens=u.total_tokens),
                             action=action)


# ---- events -> toycoder/update payloads: one function per event type ----------------------------

E = TypeVar("E")
_UPDATES: dict[type, Callable[[Any], wire.Update]] = {}


def _maps(event_type: type[E]) -> Callable[[Callable[[E], wire.Update]], Callable[[E], wire.Update]]:
    def register(fn: Callable[[E], wire.Update]) -> Callable[[E], wire.Update]:
        _UPDATES[event_type] = fn
        return fn

    return register


@_maps(TextDelta)
def _text(e: TextDelta) -> wire.Update:
    return wire.TextDeltaUpdate(text=e.text)


@_maps(ToolCallStarted)
def _tool_call(e: ToolCallStarted) -> wire.Update:
    return wire.ToolCallUpdate(tool_call_id=e.tool_call_id, name=e.name, title=e.title, arguments=e.arguments,
                               permission=e.permission)


@_maps(ToolCallFinished)
def _tool_result(e: ToolCallFinished) -> wire.Update:
    return wire.ToolResultUpdate(tool_call_id=e.tool_call_id, status=e.status, output=e.output,
                                 changed_paths=list(e.changed_paths) or None)


@_maps(UsageReport)
def _usage(e: UsageReport) -> wire.Update:
    return wire.UsageUpdate(prompt_tokens=e.prompt_tokens, completion_tokens=e.completion_tokens,
                            total_tokens=e.total_tokens)


@_maps(RetryScheduled)
def _retry(e: RetryScheduled) -> wire.Update:
    return wire.RetryUpdate(attempt=e.attempt, delay_seconds=e.delay_seconds, reason=e.reason)


@_maps(McpWaiting)
def _mcp_wait(e: McpWaiting) -> wire.Update:
    return wire.McpWaitUpdate(state=e.state, servers=list(e.servers), failed=list(e.failed) or None)


@_maps(HookRan)
def _hook(e: HookRan) -> wire.Update:
    return wire.HookUpdate(event=e.event, command=e.command, outcome=e.outcome, duration_ms=e.duration_ms,
                           reason=e.reason, source=e.source)


@_maps(PermissionResolved)
def _permission_resolved(e: PermissionResolved) -> wire.Update:
    return wire.PermissionResolvedUpdate(tool_call_id=e.tool_call_id, decision=e.decision, by=e.by)


def trust_params(r: TrustRequest) -> wire.WorkspaceTrustParams:
    return wire.WorkspaceTrustParams(root=r.root, settings_path=r.settings_path, adds=wire.TrustAdds(
        hooks=list(r.hooks), mcp_servers=list(r.mcp_servers), allow=list(r.allow), agents=list(r.agents)))


@_maps(Compacted)
def _compaction(e: Compacted) -> wire.Update:
    return wire.CompactionUpdate(strategy=e.strategy, before=e.before, after=e.after)


@_maps(FilesChanged)
def _changes(e: FilesChanged) -> wire.Update:
    return wire.ChangesUpdate(files=[changed_file(f) for f in e.files], restore_of=e.restore_of)


@_maps(PlanUpdated)
def _plan(e: PlanUpdated) -> wire.Update:
    return wire.PlanUpdate(entries=plan_entries(e.entries))


def plan_entries(entries: tuple[PlanEntry, ...]) -> list[wire.PlanEntryInfo]:
    return [wire.PlanEntryInfo(content=p.content, priority=p.priority, status=p.status) for p in entries]


def update_payload(event: Event) -> wire.Update:
    """The `update` of a toycoder/update notification for a core event."""
    try:
        return _UPDATES[type(event)](event)
    except KeyError:
        raise ValueError(f"no wire mapping for {type(event).__name__}") from None


# ---- workspace/applyEdit: a buffer's change as one TextEdit over the part that differs -------------

def _position(text: str, offset: int) -> dict[str, int]:
    """LSP position of `offset` in `text`: line, and UTF-16 code units into it (LSP's default)."""
    head = text[:offset]
    line = head.count("\n")
    col = head[head.rfind("\n") + 1:]
    return {"line": line, "character": len(col.encode("utf-16-le")) // 2}


def workspace_edit(uri: str, before: str, after: str, version: int | None = None) -> dict[str, Any]:
    """A WorkspaceEdit turning `before` (the buffer's text) into `after`, replacing only the middle
    that differs, so the editor keeps the cursor and marks elsewhere and undo sees one change.
    With the buffer `version` `before` was read at, a TextDocumentEdit (documentChanges): the
    editor refuses it if the buffer moved on, even where the range would still fit."""
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end_b, end_a = len(before), len(after)
    while end_b > start and end_a > start and before[end_b - 1] == after[end_a - 1]:
        end_b, end_a = end_b - 1, end_a - 1
    edit = {"range": {"start": _position(before, start), "end": _position(before, end_b)},
            "newText": after[start:end_a]}
    if version is not None:
        return {"documentChanges": [{"textDocument": {"uri": uri, "version": version}, "edits": [edit]}]}
    return {"changes": {uri: [edit]}}


def apply_edit_params(uri: str, before: str, after: str, label: str,
                      version: int | None = None) -> types.ApplyWorkspaceEditParams:
    """workspace/applyEdit's params as pygls sends them (it serialises the method's lsprotocol type)."""
    params = {"label": label, "edit": workspace_edit(uri, before, after, version)}
    return converters.get_converter().structure(params, types.ApplyWorkspaceEditParams)
