"""A plan written as text (the planner sub-agent's answer) read as plan entries.

Models write plans as Markdown lists in many shapes: `1. step`, `1) step`, `**1.** step`,
`Step 1: step`, `### 1. step`, bullets, checkboxes, nested details, a second list of notes or
risks after the steps. The rules, in order:

- text inside code fences is never a step;
- numbered items win over bullets (bullets beside a numbered plan are details or notes); numbered
  headings (`### 1. Investigate`) count only when there is no numbered list item;
- only the outermost level counts (nested items are details of their step);
- where the numbering goes back, a new list begins, and the longest list is the plan (the first of
  equal ones), so "Files: 1. a 2. b / Plan: 1. ... 5. ..." gives the five steps;
- fewer than two steps is no plan (a one-step task needs no checklist, and a lone bullet in
  prose is not a plan).

Every step starts pending. Its priority is the planner's tag, `(high)`, `[low]`,
`(high priority)`, `[priority: low]` (taken out of the text); untagged steps are medium.
"""

from __future__ import annotations

import re
from typing import Literal, cast

from toycoder_daemon.core.ports import PlanEntry

MAX_STEPS = 50
MAX_CONTENT = 500
"""The limits update_plan takes (PlanItem), so the model can send the seeded plan back as it is."""

_FENCE = re.compile(r"^\s*(```|~~~)")
_NUMBERED = re.compile(r"^(?P<indent>\s*)(?P<heading>#{1,6}\s+)?(?:\*\*|__)?(?:step\s+)?(?P<num>\d{1,3})[.):]"
                       r"(?:\*\*|__)?\s+(?P<body>.+)$", re.IGNORECASE)
_BULLET = re.compile(r"^(?P<indent>\s*)[-*+•]\s+(?:\[[ xX]\]\s+)?(?P<body>.+)$")
_PRIORITY = re.compile(r"\s*[\[(]\s*(?:priority\s*[:=]?\s*)?(?P<p>high|medium|low)(?:\s+priority)?\s*[\])]",
                       re.IGNORECASE)
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_SEEDED = re.compile(r"\[These (\d+) steps are now the session's plan[^\n]*\n?")
_LISTED = re.compile(r"\d+\. (?P<content>.+) \((?P<p>high|medium|low)\)")

Priority = Literal["high", "medium", "low"]


def plan_from_text(text: str) -> tuple[PlanEntry, ...]:
    """The plan in `text` (all pending), or () when it holds fewer than two steps."""
    numbered: list[tuple[int, int, str]] = []  # (indent, number, body)
    headings: list[tuple[int, int, str]] = []
    bullets: list[tuple[int, int, str]] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = line.replace("\t", "    ")
        if m := _NUMBERED.match(line):
            where = headings if m["heading"] else numbered
            where.append((len(m["indent"]), int(m["num"]), m["body"]))
        elif m := _BULLET.match(line):
            bullets.append((len(m["indent"]), 0, m["body"]))
    items = _outermost(numbered) or _outermost(headings) or _outermost(bullets)
    steps = [entry for body in _longest_list(items) if (entry := _entry(body))]
    return tuple(steps[:MAX_STEPS]) if len(steps) >= 2 else ()


def _outermost(items: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
    if not items:
        return []
    top = min(indent for indent, _, _ in items)
    return [(num, body) for indent, num, body in items if indent == top]


def _longest_list(items: list[tuple[int, str]]) -> list[str]:
    """Split where the numbering starts again (a number below the one before: a list numbered
    `1. 1. 1.`, as Markdown allows, stays one); the longest part. Bullets (number 0) form one list."""
    runs: list[list[str]] = []
    last = 0
    for num, body in items:
        if not runs or num < last:
            runs.append([])
        runs[-1].append(body)
        last = num
    return max(runs, key=len) if runs else []


def _entry(body: str) -> PlanEntry | None:
    priority: Priority = "medium"
    if m := _PRIORITY.search(body):
        priority = cast(Priority, m["p"].lower())
        body = body[:m.start()] + body[m.end():]
    content = " ".join(_BOLD.sub(r"\2", body).split()).strip(" :")
    if not any(c.isalnum() for c in content):  # a rule (`* * *`) or an empty item
        return None
    if len(content) > MAX_CONTENT:
        content = content[:MAX_CONTENT - 1].rstrip() + "…"
    return PlanEntry(content, priority, "pending")


def listing(steps: tuple[PlanEntry, ...]) -> str:
    """The steps as the planner's note to the main agent lists them (`seeded` reads them back)."""
    return "\n".join(f"{i}. {s.content} ({s.priority})" for i, s in enumerate(steps, 1))


def seeded(result: str) -> tuple[int, tuple[PlanEntry, ...]] | None:
    """(steps, the steps as listed) of a planner result whose note made its steps the session's plan;
    None without that note. The steps are () when the listing cannot be read back whole (a note
    written by an older version), so a restore shows nothing rather than a part of the plan."""
    # seed_plan appends its note as the last paragraph, `\n\n[...]` (a note at the very start: a
    # result stored without the answer); a note quoted anywhere else in the answer is no seed.
    start = result.rfind("\n\n[")
    m = _SEEDED.match(result, start + 2 if start >= 0 else 0)
    if m is None:
        return None
    count = int(m[1])
    lines = result[m.end():].split("\n")[:count]
    steps = tuple(PlanEntry(x["content"], cast(Priority, x["p"]), "pending")
                  for line in lines if (x := _LISTED.fullmatch(line)))
    return count, steps if len(steps) == count else ()
