"""Where a fork of a session branches: its stored history (messages and compaction marks) up to a
turn. A fork keeps what the person saw before that turn and goes its own way from there; the
original is not touched."""

from __future__ import annotations

from toycoder_daemon.sessions.conversation import Mark, Stored

AtTurn = str | int | None
"""A turn's id (its checkpoint id, as transcripts and toycoder/checkpoint/list name it), or its
index (0 = the first turn); None: after the last turn (the whole history)."""


def turn_ids(records: list[Stored]) -> list[str]:
    """The ids of the turns the person prompted, in order (a restore's note is not a turn)."""
    out: list[str] = []
    for r in records:
        if isinstance(r, Mark) or r.get("role") != "user" or r.get("note"):
            continue
        turn = r.get("turn")
        if isinstance(turn, str) and turn not in out:
            out.append(turn)
    return out


def before_turn(records: list[Stored], at_turn: AtTurn) -> list[Stored]:
    """The records before turn `at_turn` began (a prefix: every mark in it points inside it).
    ValueError for a turn the history does not have."""
    if at_turn is None:
        return list(records)
    turns = turn_ids(records)
    if isinstance(at_turn, bool) or not isinstance(at_turn, (str, int)):
        raise ValueError(f"atTurn: a turn id or index, not {at_turn!r}")
    if isinstance(at_turn, int):
        if not 0 <= at_turn <= len(turns):
            raise ValueError(f"atTurn: {at_turn} is not a turn index of this session (it has {len(turns)} turns)")
        if at_turn == len(turns):
            return list(records)
        at_turn = turns[at_turn]
    if at_turn not in turns:
        raise ValueError(f"atTurn: no turn {at_turn!r} in this session")
    cut = next(i for i, r in enumerate(records)
               if not isinstance(r, Mark) and r.get("role") == "user" and r.get("turn") == at_turn)
    return list(records[:cut])
