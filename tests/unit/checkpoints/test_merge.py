"""merge.revert: the agent's change taken back out of a text the person edited since (issue 32)."""

from __future__ import annotations

import pytest

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
