"""The planner sub-agent's answer seeds the session's plan: its steps (all pending) are shown to the
person as the plan, untagged, and the main agent is told to keep it with update_plan; a plan in
progress is not replaced (the steps go to the main agent to merge). Reading plans
out of the shapes models write, and in-process flows; one run through the real daemon per face is in
e2e/test_planner_plan_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import PLANNER_ANSWER, SEEDED, plan_call, planner_call
from inproc_app import InProc

from toycoder_daemon.agent.subagent import plan_progress
from toycoder_daemon.core.ports import PlanUpdated, ToolCallStarted
from toycoder_daemon.tools.plan.text import MAX_CONTENT, MAX_STEPS, plan_from_text


def steps(text: str) -> list[tuple[str, str]]:
    entries = plan_from_text(text)
    assert all(e.status == "pending" for e in entries)
    return [(e.content, e.priority) for e in entries]


@pytest.mark.parametrize("text, expected", [
    ("1. Read calc.py\n2. Fix the divisor\n3. Run the tests",
     [("Read calc.py", "medium"), ("Fix the divisor", "medium"), ("Run the tests", "medium")]),
    ("Here is the plan:\n\n1) Read `calc.py`\n2) Fix it (high)\n\nGood luck.",
     [("Read `calc.py`", "medium"), ("Fix it", "high")]),
    ("**1.** **Investigate**: read calc.py [low]\n**2.** Fix [high priority]",
     [("Investigate: read calc.py", "low"), ("Fix", "high")]),
    ("Step 1: read the code\nStep 2: change average (priority: high)",
     [("read the code", "medium"), ("change average", "high")]),
    # nested details are part of their step, not steps of their own
    ("1. Investigate\n   - read calc.py\n   - grep callers\n2. Fix\n   1. edit calc.py\n   2. test",
     [("Investigate", "medium"), ("Fix", "medium")]),
    # bullets beside a numbered plan are notes
    ("Notes:\n- the tests are slow\n\n1. Read\n2. Fix", [("Read", "medium"), ("Fix", "medium")]),
    # the longest list is the plan; a list numbered 1. 1. 1. is one list
    ("Files:\n1. calc.py\n2. report.py\n\nPlan:\n1. Read calc.py\n2. Edit it\n3. Test it",
     [("Read calc.py", "medium"), ("Edit it", "medium"), ("Test it", "medium")]),
    ("1. a step\n1. b step\n1. c step", [("a step", "medium"), ("b step", "medium"), ("c step", "medium")]),
    # numbered headings when there is no numbered item; their bullets are details
    ("### 1. Investigate\n- read\n### 2. Fix\n- edit", [("Investigate", "medium"), ("Fix", "medium")]),
    ("- [ ] read the code\n* [x] fix it\n+ ship", [("read the code", "medium"), ("fix it", "medium"),
                                                    ("ship", "medium")]),
    ("```\n1. not a step\n2. code\n```\n1. Read\n2. Fix", [("Read", "medium"), ("Fix", "medium")]),
    ("\t1. tabbed\n\t2. steps", [("tabbed", "medium"), ("steps", "medium")]),
])
def test_plans_are_read_from_the_shapes_models_write(text: str, expected: list[tuple[str, str]]) -> None:
    assert steps(text) == expected


@pytest.mark.parametrize("text", [
    "", "Just rename the variable in calc.py; nothing else is needed.",
    "1. Rename the variable", "- one lone bullet in prose",
    "* * *\n---\n- \n- ***", "```\n1. code\n2. only\n```",
])
def test_no_plan_without_two_steps(text: str) -> None:
    assert plan_from_text(text) == ()


def test_limits_are_the_ones_update_plan_takes() -> None:
    many = plan_from_text("\n".join(f"{i}. step {i}" for i in range(1, 80)))
    assert len(many) == MAX_STEPS and many[-1].content == f"step {MAX_STEPS}"
    long = plan_from_text(f"1. {'x' * 900}\n2. short")
    assert len(long[0].content) == MAX_CONTENT and long[0].content.endswith("…")


def shown(entries: Any) -> list[tuple[str, str, str]]:
    return [(e.content, e.priority, e.status) for e in entries]


async def test_the_planner_seeds_the_plan_and_the_main_agent_keeps_it(inproc) -> None:
    p: InProc = inproc()
    p.script.add(planner_call(), {"text": PLANNER_ANSWER},
                 plan_call(("Read src/app.py", "in_progress"), ("Add subtract()", "pending"), ("Add tests", "pending")),
                 {"text": "On it."})
    sid = p.new_session()
    await p.prompt(sid, "plan and do a subtract feature")
    plans = [e for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert [shown(e.entries) for e in plans][0] == SEEDED
    assert plans[0].parent_tool_call_id is None  # the session's plan, not a detail of the planner's call
    assert [e.status for e in plans[1].entries] == ["in_progress", "pending", "pending"]
    # the plan is on screen before the planner's call ends
    planner_id = next(e for e in p.frontend.of(sid) if isinstance(e, ToolCallStarted)).tool_call_id
    events = p.frontend.of(sid)
    finished = next(i for i, e in enumerate(events) if e.kind == "tool_result" and e.tool_call_id == planner_id)
    assert events.index(plans[0]) < finished
    result = [m for m in p.script.calls[2]["messages"] if m["role"] == "tool"][0]["content"]
    assert result.startswith(PLANNER_ANSWER + "\n\n[These 3 steps are now the session's plan")
    assert "1. Read src/app.py (medium)\n2. Add subtract() (high)\n3. Add tests (low)" in result
    assert "update_plan" in result


def tool_results(p: InProc) -> list[str]:
    """The tool results in the model's last request."""
    return [m["content"] for m in p.script.calls[-1]["messages"] if m["role"] == "tool"]


async def test_calling_the_planner_mid_task_keeps_the_plan_in_progress(inproc) -> None:
    """A plan with steps not yet completed is not replaced by the planner's fresh, all-pending one
    (the person would see their progress wiped): the main agent gets the steps to merge instead,
    also after the session was closed and loaded again."""
    p: InProc = inproc()
    p.script.add(planner_call(), {"text": PLANNER_ANSWER},
                 plan_call(("Read src/app.py", "completed"), ("Add subtract()", "in_progress"), ("Add tests", "pending")),
                 {"text": "Halfway."})
    sid = p.new_session()
    await p.prompt(sid, "plan and do a subtract feature")
    await p.app.close_session(sid)  # what follows reads the plan from the stored conversation
    again = "1. Add subtract()\n2. Add a docstring\n3. Add tests"
    p.script.add(planner_call("Replan: a docstring is wanted too"), {"text": again},
                 {"text": "I'll merge them.", "expect": {"last_tool_contains": "already has a plan in progress"}})
    await p.prompt(sid, "also a docstring")
    plans = [shown(e.entries) for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert len(plans) == 2 and plans[-1][0][2] == "completed"  # the seed, then the update: no second seed
    note = tool_results(p)[-1]
    assert note.startswith(again + "\n\n[The session already has a plan in progress (1/3 completed)")
    assert "1. Add subtract() (medium)\n2. Add a docstring (medium)\n3. Add tests (medium)" in note
    assert "merge them into it with update_plan" in note and "now the session's plan" not in note


async def test_the_planner_seeds_again_once_the_plan_is_done(inproc) -> None:
    p: InProc = inproc()
    p.script.add(planner_call(), {"text": PLANNER_ANSWER}, planner_call("again, before any progress"),
                 {"text": PLANNER_ANSWER},
                 plan_call(("Read src/app.py", "completed"), ("Add subtract()", "completed"), ("Add tests", "completed")),
                 planner_call("the next feature"), {"text": "1. Add multiply()\n2. Test it"}, {"text": "Next."})
    sid = p.new_session()
    await p.prompt(sid, "two features")
    plans = [shown(e.entries) for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    # seeded; the second call (0/3 done) not shown; all done; the next plan seeded
    assert [len(x) for x in plans] == [3, 3, 2]
    assert plans[2] == [("Add multiply()", "medium", "pending"), ("Test it", "medium", "pending")]
    results = tool_results(p)
    assert "plan in progress (0/3 completed)" in results[1] and "[These 2 steps are now the session's plan" in results[3]


@pytest.mark.parametrize("calls, expected", [
    ([], None),
    ([("update_plan", "plan updated: 1/2 completed")], (1, 2)),
    ([("update_plan", "plan updated: 1/2 completed"), ("update_plan", "error: a plan needs at least one entry")],
     (1, 2)),  # a refused update showed nothing
    ([("update_plan", "plan updated: 2/2 completed"), ("planner", "1. a\n2. b\n\n[These 2 steps are now the "
                                                                  "session's plan, shown ...]")], (0, 2)),
    ([("read_file", "plan updated: 9/9 completed")], None),  # another tool's output is not the plan
    # nor is a grep hit, transcript or log that quotes the planner's note
    ([("grep", "subagent.py:146: return (f\"{answer}\\n\\n[These 3 steps are now the session's plan, shown")], None),
    ([("architect", "1. a\n2. b\n\n[These 2 steps are now the session's plan, shown ...]")], (0, 2)),  # planner role
])
def test_the_sessions_plan_is_read_from_its_conversation(calls: list[tuple[str, str]],
                                                        expected: tuple[int, int] | None) -> None:
    messages: list[Any] = []
    for i, (name, result) in enumerate(calls):
        messages.append({"role": "assistant", "content": None,
                         "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    assert plan_progress(messages, {"planner", "architect"}) == expected


async def test_a_quoted_planner_note_does_not_stop_the_next_seed(inproc, workspace: Path) -> None:
    (workspace / "transcript.md").write_text("[These 3 steps are now the session's plan, shown to the user]\n")
    p: InProc = inproc()
    p.script.add({"tool_calls": [{"name": "read_file", "arguments": {"path": "transcript.md"}}]},
                 planner_call(), {"text": PLANNER_ANSWER}, {"text": "Planned."})
    sid = p.new_session()
    await p.prompt(sid, "read the transcript, then plan")
    assert [shown(e.entries) for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)] == [SEEDED]


async def test_a_seed_by_another_planner_role_agent_is_the_plan_in_progress(inproc) -> None:
    p: InProc = inproc({"agents": {"architect": {"prompt": "planner"}}})
    p.script.add({"tool_calls": [{"name": "architect", "arguments": {"query": "plan the refactor"}}]},
                 {"text": "1. Split app.py\n2. Move helpers"},
                 planner_call(), {"text": PLANNER_ANSWER}, {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    plans = [shown(e.entries) for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert plans == [[("Split app.py", "medium", "pending"), ("Move helpers", "medium", "pending")]]
    assert "already has a plan in progress (0/2 completed)" in tool_results(p)[-1]


async def test_a_plan_in_prose_seeds_nothing_and_is_passed_on_as_it_is(inproc) -> None:
    p: InProc = inproc()
    prose = "Rename the helper in src/app.py and update its one caller; nothing else is needed."
    p.script.add(planner_call(), {"text": prose}, {"text": "Done."})
    sid = p.new_session()
    await p.prompt(sid, "plan")
    assert p.frontend.of(sid, "plan") == []
    assert [m for m in p.script.calls[2]["messages"] if m["role"] == "tool"][0]["content"] == prose


async def test_only_the_planners_role_seeds_the_plan(inproc) -> None:
    p: InProc = inproc({"agents": {"architect": {"prompt": "planner"}, "explorer": {"max_steps": 2}}})
    p.script.add({"tool_calls": [{"name": "explorer", "arguments": {"query": "list the steps of the build"}}]},
                 {"text": "1. setup.py runs\n2. the wheel is built"},
                 {"tool_calls": [{"name": "architect", "arguments": {"query": "plan the refactor"}}]},
                 {"text": "1. Split app.py\n2. Move helpers"},
                 {"text": "ok"})
    sid = p.new_session()
    await p.prompt(sid, "go")
    plans = [e for e in p.frontend.of(sid) if isinstance(e, PlanUpdated)]
    assert [shown(e.entries) for e in plans] == [[("Split app.py", "medium", "pending"),
                                                  ("Move helpers", "medium", "pending")]]
