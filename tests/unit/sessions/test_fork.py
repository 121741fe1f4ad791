"""sessions/fork.py: where a fork branches, compaction marks included."""

from __future__ import annotations

import pytest

from toycoder_daemon.sessions.conversation import Mark
from toycoder_daemon.sessions.fork import before_turn, turn_ids

MARK = Mark(2, ({"role": "user", "content": "summary"},), {"strategy": "summary"})
RECORDS = [{"role": "user", "content": "one", "turn": "t1"}, {"role": "assistant", "content": "a1"}, MARK,
           {"role": "user", "content": "restored", "turn": "t2", "note": True},
           {"role": "user", "content": "two", "turn": "t2"}, {"role": "assistant", "content": "a2"}]


def test_turns_and_cuts() -> None:
    assert turn_ids(RECORDS) == ["t1", "t2"]  # a restore's note is no turn of its own
    assert before_turn(RECORDS, None) == RECORDS and before_turn(RECORDS, 2) == RECORDS
    assert before_turn(RECORDS, 0) == [] and before_turn(RECORDS, "t1") == []
    # before t2: its note goes too (the first record of the turn), the compaction mark stays
    assert before_turn(RECORDS, "t2") == RECORDS[:3] and before_turn(RECORDS, 1) == RECORDS[:3]
    for bad in (-1, 3, "t9", True, 1.5):
        with pytest.raises(ValueError):
            before_turn(RECORDS, bad)  # type: ignore[arg-type]
