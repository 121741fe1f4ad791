"""A session's plan comes back with it: read from its conversation (the last accepted update_plan,
or the planner's seed), it ends the history a load answers (LSP: a `plan` transcript entry; ACP: a
`plan` update ending the replay; session/resume sends it just after its answer), a second daemon's clients
hear it with the turn that changed it, and the planner's seeding rule sees it after a load. In-process;
a load by a second daemon process: e2e/test_plan_restore_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp_client import acp_face
from acp_client import new_session as acp_new_session
from helpers import IN_PROGRESS, PLANNER_ANSWER, SEEDED, plan_call, planner_call
from inproc_app import InProc, eventually
from test_planner_plan import shown

from toycoder_daemon.core.ports import PlanEntry, PlanUpdated
from toycoder_daemon.sessions.context import compact
from toycoder_daemon.sessions.conversation import Conversation
from toycoder_daemon.sessions.session import Session, TranscriptEntry
from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.testing.scripted_model import ScriptedModel
from toycoder_daemon.tools.plan.text import listing, seeded
from toycoder_daemon.tools.plan.tool import session_plan
from toycoder_daemon.tools.registry import ToolRegistry

ALL_DONE = [("read the code", "completed"), ("fix the bug", "completed")]


def entries_of(steps: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """As plan_call sends them: the first step high, the others medium."""
    return [(c, "high" if i == 0 else "medium", s) for i, (c, s) in enumerate(steps)]


def restored(transcript: list[TranscriptEntry]) -> list[tuple[str, str, str]] | None:
    plans = [e for e in transcript if e.role == "plan"]
    assert len(plans) <= 1 and (not plans or transcript[-1] is plans[0]), "the plan is one entry, the last"
    return shown(plans[0].plan) if plans else None


def calls(*made: tuple[str, str, str]) -> list[Any]:
    """(tool, arguments, result) -> the assistant/tool messages a conversation stores."""
    messages: list[Any] = []
    for i, (name, arguments, result) in enumerate(made):
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": arguments}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return messages


def plan_args(*steps: tuple[str, str]) -> str:
    return json.dumps(plan_call(*steps)["tool_calls"][0]["arguments"])


# ---- reading the plan out of a conversation ----------------------------------------------------

def test_the_plan_is_the_last_accepted_update() -> None:
    messages = calls(("update_plan", plan_args(*IN_PROGRESS), "plan updated: 1/3 completed"),
                     ("update_plan", json.dumps({"entries": []}), "error: a plan needs at least one entry"))
    plan = session_plan(messages)
    assert plan is not None and plan.progress == (1, 3)
    assert shown(plan.entries) == entries_of(IN_PROGRESS)  # the refused update changed nothing
    assert session_plan(calls(("update_plan", "{}", "error: a plan needs at least one entry"))) is None


def test_a_seed_is_read_back_from_the_planners_note() -> None:
    steps = (PlanEntry("Add tests (high)", "low", "pending"), PlanEntry("Ship it", "medium", "pending"))
    quoted = "The last plan said: [These 9 steps are now the session's plan, shown to the user]\n1. x (low)\n"
    note = f"{quoted}\n\n[These 2 steps are now the session's plan, shown ..., all pending:\n{listing(steps)}\nKeep ...]"
    assert seeded(note) == (2, steps)  # the note is the last one; a tag inside a step stays in it
    plan = session_plan(calls(("planner", "{}", note)))
    assert plan is not None and plan.progress == (0, 2) and plan.entries == steps
    # a note whose listing cannot be read back whole: the session has a plan, none to show again
    assert seeded("[These 2 steps are now the session's plan, shown ...]") == (2, ())
    hand_edited = session_plan(calls(("update_plan", "not json", "plan updated: 0/1 completed")))
    assert hand_edited is not None and hand_edited.entries == ()


def test_a_seed_note_quoted_in_a_planner_answer_is_no_seed() -> None:
    quoted = ("Earlier: [These 2 steps are now the session's plan, shown to the user as a checklist, all pending:\n"
              "1. Old (high)\n2. Older (low)\nKeep ...]")
    steps = (PlanEntry("One", "medium", "pending"), PlanEntry("Two", "medium", "pending"))
    not_shown = (f"{quoted}\n\n[The session already has a plan in progress (1/3 completed), so these 2 steps "
                 f"were not shown to the user:\n{listing(steps)}\nIf they change the plan, merge ...]")
    assert seeded(quoted) is None and seeded(not_shown) is None
    plan = session_plan(calls(("update_plan", plan_args(*IN_PROGRESS), "plan updated: 1/3 completed"),
                              ("planner", "{}", not_shown)))
    assert plan is not None and plan.progress == (1, 3)  # the plan in progress stays the plan


def test_a_poll_that_splits_a_plan_call_from_its_result_still_sends_the_plan() -> None:
    steps = (PlanEntry("One", "medium", "pending"), PlanEntry("Two", "medium", "pending"))
    note = f"1. One\n2. Two\n\n[These 2 steps are now the session's plan, shown ..., all pending:\n{listing(steps)}\nKeep ...]"
    planner, slow = calls(("planner", "{}", note)), calls(("run_command", "{}", "ok"))
    update = calls(("update_plan", plan_args(*IN_PROGRESS), "plan updated: 1/3 completed"))
    update[0]["tool_calls"][0]["id"] = "u"  # one assistant message: a slow command, then the update
    update[1]["tool_call_id"] = "u"
    both = {**slow[0], "tool_calls": slow[0]["tool_calls"] + update[0]["tool_calls"]}
    batches = [[{"role": "user", "content": "plan"}, planner[0]], [planner[1], {"role": "assistant", "content": "ok"}],
               [{"role": "user", "content": "go"}, both, slow[1]], [update[1]]]
    s = Session(id="s", title="", tools=ToolRegistry())
    heard = []
    for batch in batches:  # as a second daemon's poll reads them: the calls stored before they run
        s.messages = Conversation("", [*s.messages.history(), *batch])
        heard.append([shown(e.plan) for e in s.transcript(messages=batch) if e.role == "plan"])
    assert heard == [[], [shown(steps)], [], [entries_of(IN_PROGRESS)]]
    reused = calls(("read_file", "{}", "text"))  # a model that numbers its calls anew each turn: "c0" again
    s.messages = Conversation("", [*s.messages.history(), *reused])
    assert not [e for e in s.transcript(messages=reused[1:]) if e.role == "plan"]  # answers the read, not the planner


def test_a_malformed_stored_message_does_not_fail_a_load() -> None:
    s = Session(id="s", title="", tools=ToolRegistry())
    update = calls(("update_plan", plan_args(*IN_PROGRESS), "plan updated: 1/3 completed"))
    for broken in ({"role": "tool", "content": "plan updated: 1/3 completed"},  # no tool_call_id
                   {"role": "tool", "tool_call_id": "c0", "content": None}):
        s.messages = Conversation("", [*update, broken])
        assert restored(s.transcript()) == entries_of(IN_PROGRESS)
    for odd in ({"role": "tool", "tool_call_id": ["c0"], "content": "x"},
                {"role": "assistant", "content": None, "tool_calls": [None, {"id": "c9"}, {"function": "x"}]}):
        plan = session_plan([*update, odd])
        assert plan is not None and shown(plan.entries) == entries_of(IN_PROGRESS)
    odd_arguments = calls(("update_plan", None, "plan updated: 0/1 completed"))  # not JSON text
    s.messages = Conversation("", odd_arguments)
    assert restored(s.transcript()) is None
    plan = session_plan(odd_arguments)
    assert plan is not None and plan.progress == (0, 1) and plan.entries == ()


# ---- in-process: a second App on the same data directory is the daemon restarted ------------------

async def plan_then_reload(inproc: Any, *script: dict[str, Any]) -> tuple[InProc, str]:
    a: InProc = inproc()
    a.script.add(*script)
    sid = a.new_session()
    await a.prompt(sid, "fix it")
    await a.close()
    return inproc(), sid


async def test_a_plan_in_progress_comes_back_after_a_restart(inproc) -> None:
    b, sid = await plan_then_reload(inproc, plan_call(*IN_PROGRESS), {"text": "working"})
    s = await b.app.load(sid)
    assert restored(b.app.transcript(s)) == entries_of(IN_PROGRESS)


async def test_an_all_completed_plan_comes_back_completed(inproc) -> None:
    b, sid = await plan_then_reload(inproc, plan_call(("read the code", "in_progress"), ("fix the bug", "pending")),
                                    plan_call(*ALL_DONE), {"text": "done"})
    assert restored(b.app.transcript(await b.app.load(sid))) == entries_of(ALL_DONE)


async def test_a_refused_update_is_not_restored(inproc) -> None:
    refused = {"tool_calls": [{"name": "update_plan", "arguments": {"entries": []}}]}
    b, sid = await plan_then_reload(inproc, plan_call(*IN_PROGRESS), refused, {"text": "hm"})
    assert restored(b.app.transcript(await b.app.load(sid))) == entries_of(IN_PROGRESS)
    c, other = await plan_then_reload(inproc, refused, {"text": "no plan"})
    assert restored(c.app.transcript(await c.app.load(other))) is None


async def test_a_seeded_plan_comes_back_and_the_planner_then_merges(inproc) -> None:
    b, sid = await plan_then_reload(inproc, planner_call(), {"text": PLANNER_ANSWER}, {"text": "Planned."})
    assert restored(b.app.transcript(await b.app.load(sid))) == SEEDED
    # the plan in progress (0/3) was restored: the planner's next steps go to the model to merge
    b.script.add(planner_call("plan it again"), {"text": "1. One\n2. Two"}, {"text": "ok"})
    await b.prompt(sid, "plan again")
    assert b.frontend.of(sid, "plan") == []
    note = [m for m in b.script.calls[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "already has a plan in progress (0/3 completed)" in note


async def test_a_session_without_a_plan_loads_as_before(inproc, tmp_path: Path, workspace: Path) -> None:
    b, sid = await plan_then_reload(inproc, {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
                                    {"text": "A tiny project."})
    assert [e.role for e in b.app.transcript(await b.app.load(sid))] == ["user", "tool_call", "tool", "assistant"]


async def watched(inproc: Any) -> tuple[InProc, InProc, str, list[list[TranscriptEntry]]]:
    """Daemon a's new session, open in daemon b too; `got`: what b's clients hear of a's turns."""
    a: InProc = inproc()
    b: InProc = inproc()
    got: list[list[TranscriptEntry]] = []
    b.app.sharing.interval = 0.01
    b.app.sharing.on_changed = lambda sid, entries, reset, untold: got.append(entries)
    sid = a.new_session()
    await b.app.load(sid)
    return a, b, sid, got


async def test_the_other_daemons_clients_hear_the_plan_with_its_turn(inproc) -> None:
    a, b, sid, got = await watched(inproc)
    a.script.add(plan_call(*IN_PROGRESS), {"text": "working"})
    await a.prompt(sid, "fix it")
    await eventually(lambda: any(e.role == "assistant" for es in got for e in es), "b to hear a's turn")
    plans = [shown(e.plan) for es in got for e in es if e.role == "plan"]
    assert plans[-1] == entries_of(IN_PROGRESS)
    a.script.add({"text": "no plan change"})
    await a.prompt(sid, "and?")
    await eventually(lambda: sum(e.role == "assistant" for es in got for e in es) == 2, "b to hear a's 2nd turn")
    assert len([e for es in got for e in es if e.role == "plan"]) == len(plans)  # the plan is news only when it changed
    b.script.add(plan_call(*ALL_DONE), {"text": "done"})
    await b.prompt(sid, "finish")  # b's own update goes out live, as ever
    assert [shown(e.entries) for e in b.frontend.of(sid) if isinstance(e, PlanUpdated)] == [entries_of(ALL_DONE)]


async def test_the_other_daemons_clients_hear_a_seed_whose_call_came_in_an_earlier_poll(inproc) -> None:
    a, b, sid, got = await watched(inproc)
    # the planner's model is slow: b's polls read the stored call long before its result
    a.script.add(planner_call(), {"text": PLANNER_ANSWER, "delay": 0.3}, {"text": "Planned."})
    await a.prompt(sid, "plan it")
    await eventually(lambda: any(e.role == "assistant" and e.text == "Planned." for es in got for e in es), "b hears")
    call_batch = next(i for i, es in enumerate(got) if any(e.role == "tool_call" for e in es))
    assert not any(e.role == "tool" for e in got[call_batch])  # the poll did split the call from its result
    assert [shown(e.plan) for es in got for e in es if e.role == "plan"] == [SEEDED]


# ---- through the faces ----------------------------------------------------------------------------


@pytest.mark.parametrize("resume", [False, True])
async def test_acp_load_and_resume_end_with_the_plan(tmp_path: Path, llm: FakeLLM, workspace: Path,
                                                     resume: bool) -> None:
    llm.add(plan_call(*IN_PROGRESS), {"text": "working"})
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        sid = await acp_new_session(conn, workspace)
        await conn.prompt(session_id=sid, prompt=[text_block("fix it")])
        live = editor.updates("plan")[-1]
    async with acp_face(tmp_path, llm) as (conn, editor, _):
        if resume:
            await conn.resume_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        else:
            await conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
        answered = max(i for i, f in enumerate(editor.frames) if "result" in f)
        sent = [f["params"]["update"] for f in editor.frames[:answered] if f.get("method") == "session/update"]
        kinds = [u["sessionUpdate"] for u in sent]
        if resume:  # resume replays nothing before its answer; the plan, current state, comes after it
            assert kinds == []
            await eventually(lambda: editor.updates("plan"), "the plan after resume's answer")
            after = [f["params"]["update"] for f in editor.frames[answered:] if f.get("method") == "session/update"]
            assert [u["sessionUpdate"] for u in after].count("plan") == 1
            assert next(u for u in after if u["sessionUpdate"] == "plan") == live
        else:
            assert kinds[-2:] == ["plan", "session_info_update"]  # the history, its plan, then its title
            assert kinds.count("plan") == 1
            assert sent[kinds.index("plan")] == live


async def test_compaction_keeps_the_plan(inproc) -> None:
    a: InProc = inproc({"session": {"max_messages": 50, "compress_keep_recent": 1}})
    sid = a.new_session()
    a.script.add(plan_call(*IN_PROGRESS), {"text": "working"})
    await a.prompt(sid, "fix it")
    a.script.add({"text": "the user asked for a fix; a plan is in progress"})
    assert "summarised" in (await a.command(sid, "/compact")).result.text
    await a.close()
    b = inproc()
    s = await b.app.load(sid)
    assert restored(b.app.transcript(s)) == entries_of(IN_PROGRESS)  # kept after the summary, verbatim
    b.script.add({"text": "next"})
    await b.prompt(sid, "go on")
    assert [m["role"] for m in b.script.calls[-1]["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert b.script.violations == []  # the kept call and its result are a valid pair for the model


async def test_compaction_keeps_a_plan_seeded_by_a_configured_planner() -> None:
    """The session's own planners (an agent declared in config may seed the plan) decide what
    compaction keeps, not the built-in planner's name alone."""
    steps = (PlanEntry("Read it", "medium", "pending"), PlanEntry("Fix it", "high", "pending"))
    note = f"Steps.\n\n[These 2 steps are now the session's plan, shown ..., all pending:\n{listing(steps)}\nKeep ...]"
    messages: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "plan it"},
                           *calls(("scout", "{}", note)),
                           *[{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)]]
    kept = {}
    for planners in (frozenset({"scout"}), frozenset({"planner"})):
        model = ScriptedModel([{"text": "a summary"}])
        done = await compact(messages, model, "summarise", 2, planners)  # type: ignore[arg-type]
        assert done is not None and done.strategy == "summary"
        kept[planners] = session_plan(done.messages, planners)
    assert kept[frozenset({"scout"})] is not None and kept[frozenset({"scout"})].entries == steps
    assert kept[frozenset({"planner"})] is None  # "scout" is no planner there: nothing to keep
