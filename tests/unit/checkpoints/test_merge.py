"""merge.revert: the agent's change taken back out of a text the person edited since (issue 32)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from toycoder_daemon.checkpoints.merge import revert

BEFORE = "".join(f"l{i}\n" for i in range(1, 9))  # l1..l8
AFTER = BEFORE.replace("l3\n", "AGENT3\n").replace("l6\nl7\n", "")  # a line changed, two removed


def test_without_edits_since_the_before_text_comes_back() -> None:
    assert revert(BEFORE, AFTER, AFTER) == BEFORE


@pytest.mark.parametrize("now, expected", [
    ("top\n" + AFTER, "top\n" + BEFORE),  # typed above everything: kept, hunks shifted
    (AFTER + "end\n", BEFORE + "end\n"),
    (AFTER.replace("l2\n", "L2!\n"), BEFORE.replace("l2\n", "L2!\n")),  # the line right above the change
    (AFTER.replace("l4\n", "l4\nnew\n"), BEFORE.replace("l4\n", "l4\nnew\n")),  # right below it
    (AFTER.replace("l1\n", ""), BEFORE.replace("l1\n", "")),  # a deletion elsewhere
])
def test_the_persons_edits_outside_the_agents_lines_stay(now: str, expected: str) -> None:
    assert revert(BEFORE, AFTER, now) == expected


@pytest.mark.parametrize("now", [
    AFTER.replace("AGENT3\n", "AGENT3 and mine\n"),  # a line the agent wrote
    AFTER.replace("AGENT3\n", ""),  # removed it
    AFTER.replace("l5\nl8\n", "l5\nmine\nl8\n"),  # typed where the agent removed lines
])
def test_an_edit_of_the_agents_own_lines_is_a_conflict(now: str) -> None:
    assert revert(BEFORE, AFTER, now) is None


def test_a_created_text_is_taken_out_of_what_the_person_added_around_it() -> None:
    assert revert("", "made\n", "mine\nmade\n") == "mine\n"


# ---- property: the merge never misplaces ------------------------------------------------------

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n"]), max_size=7)


@st.composite
def edited(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(before, after, now, expected): the agent replaced before[i1:i2] by R; the person then replaced
    after[k1:k2] by S outside the agent's lines (above or below them); expected is the person's edit
    applied to `before` at the same place: the three-way result."""
    before = draw(LINES)
    i1 = draw(st.integers(0, len(before)))
    i2 = draw(st.integers(i1, len(before)))
    r = draw(LINES.filter(lambda r: len(r) <= 3))
    assume(r != before[i1:i2])
    after = before[:i1] + r + before[i2:]
    j2 = i1 + len(r)  # the agent's lines in `after`: [i1, j2)
    k1 = draw(st.integers(0, len(after)))
    k2 = draw(st.integers(k1, len(after)))
    assume(k2 <= i1 or k1 >= j2)
    assume(not (i1 == j2 == k1 == k2))  # an insertion where the agent removed lines: above or below?
    s = draw(LINES.filter(lambda s: len(s) <= 3))
    now = after[:k1] + s + after[k2:]
    shift = len(r) - (i2 - i1)
    expected = before[:k1] + s + before[k2:] if k2 <= i1 else before[:k1 - shift] + s + before[k2 - shift:]
    return "".join(before), "".join(after), "".join(now), "".join(expected)


@pytest.mark.parametrize("before, after, now", [
    ("b\nb\n", "a\nb\n", "a\na\nb\n"),  # the "a" typed above the agent's "a" (a b b) or below it (b a b)?
    ("x\nx\ny\n", "x\ny\n", "x\nz\ny\n"),  # which "x" did the agent remove: x x z y, or x z x y?
])
def test_an_edit_that_could_sit_on_either_side_of_the_agents_change_is_a_conflict(
        before: str, after: str, now: str) -> None:
    assert revert(before, after, now) is None  # no telling where it goes; the old merge guessed


@given(edited())
@settings(max_examples=2000, deadline=None, database=None, derandomize=True)
def test_the_merge_never_misplaces_the_persons_edits(case: tuple[str, str, str, str]) -> None:
    """Where the agent's change or the person's edit could be aligned more than one way among
    repeated lines, no answer (a conflict) is right; a wrong text never is."""
    before, after, now, expected = case
    result = revert(before, after, now)
    assert result is None or result == expected, (before, after, now, result, expected)
