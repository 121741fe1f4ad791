"""The test suite's own hygiene, checked by reading its source: nothing that kills by name, no fixed
sleep before an assertion, no process looked up by a fixed string, /proc read in one place, and the
shared helpers not copied again.

Each rule is a small scanner over lines; each scanner is also shown a snippet it must flag, so a
scanner that silently stopped matching fails here too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from helpers import TESTS

THIS = Path(__file__).resolve()

Finding = tuple[str, int, str]  # (file, line number, line)
Scanner = Callable[[str, list[str]], list[Finding]]


def sources() -> Iterable[tuple[str, list[str]]]:
    for path in sorted(TESTS.rglob("*.py")):
        if path.resolve() != THIS:
            yield str(path.relative_to(TESTS)), path.read_text().splitlines()


def code(line: str) -> str:
    """The line without its comment (good enough for these scanners: no '#' in the patterns)."""
    return line.split("#", 1)[0]


# Killing processes by name or pattern reaches every matching process on the machine, including
# another run's: kill only the process groups a test started (helpers.kill_process_groups).
KILL_BY_NAME = re.compile(r"\b(pkill|killall|pgrep)\b|os\.system\(")


def kill_by_name(name: str, lines: list[str]) -> list[Finding]:
    return [(name, i, line) for i, line in enumerate(lines, 1) if KILL_BY_NAME.search(code(line))]


# A fixed sleep followed by an assertion passes on a fast machine and flakes on a loaded one:
# wait for the asserted condition instead (waiting.wait_until / wait_until_async).
SLEEP = re.compile(r"^\s*(await\s+asyncio\.sleep|time\.sleep)\(")


def sleep_then_assert(name: str, lines: list[str]) -> list[Finding]:
    """A sleep whose next statement, or the one after a plain read, is an assert. An await or a wait
    in between ends the look-ahead: the test then synchronises on something other than the clock."""
    found = []
    for i, line in enumerate(lines):
        if not SLEEP.match(code(line)):
            continue
        following = [code(x).strip() for x in lines[i + 1:i + 6] if code(x).strip()][:2]
        for statement in following:
            if statement.startswith(("assert ", "assert(")):
                found.append((name, i + 1, line))
                break
            if "await " in statement or "wait" in statement:
                break
    return found


# A fixed string names every run's processes alike: look processes up by a per-test unique marker
# (helpers.sleep_command, helpers.unique_marker), never by a literal.
FIXED_TAG = re.compile(r"\bprocesses_(with|running)\(\s*f?[\"']")


def fixed_tag(name: str, lines: list[str]) -> list[Finding]:
    return [(name, i, line) for i, line in enumerate(lines, 1) if FIXED_TAG.search(code(line))]


# Scanning processes is done by helpers.py alone (per-test markers, zombies excluded).
def proc_outside_helpers(name: str, lines: list[str]) -> list[Finding]:
    if name == "helpers.py":
        return []
    return [(name, i, line) for i, line in enumerate(lines, 1) if '"/proc' in code(line) or "'/proc" in code(line)]


# The helpers that used to be copied into several files live in helpers.py (and Daemon/Editor
# wait methods delegate to waiting.py).
SHARED_DEFINITIONS = re.compile(r"^\s*(async\s+def\s+new_session\(d\b|def\s+processes_(with|running)\(|class\s+AllowAll\b|"
                                r"def\s+(wait_until|wait_until_async)\(|def\s+write_call\()")


def copied_helper(name: str, lines: list[str]) -> list[Finding]:
    if name in ("helpers.py", "waiting.py"):
        return []
    return [(name, i, line) for i, line in enumerate(lines, 1) if SHARED_DEFINITIONS.match(line)]


RULES: dict[str, tuple[Scanner, str]] = {
    "kill by name": (kill_by_name, 'os.system("pkill -f \'sleep 175\'")\n'),
    "sleep then assert": (sleep_then_assert, "    await asyncio.sleep(0.3)\n\n    assert procs() == []\n"),
    "fixed process tag": (fixed_tag, 'await d.wait_for(lambda: processes_with(f"sleep 17{i}9"))\n'),
    "/proc outside helpers.py": (proc_outside_helpers, 'for pid in os.listdir("/proc"):\n'),
    "copied helper": (copied_helper, "class AllowAll:\n    pass\n"),
}


@pytest.mark.parametrize("rule", RULES)
def test_the_scanner_flags_what_it_is_for(rule: str) -> None:
    scan, bad = RULES[rule]
    assert scan("test_example.py", bad.splitlines()), f"the {rule!r} scanner no longer flags:\n{bad}"
    assert scan("test_example.py", ["x = 1", "# pkill -f sleep; time.sleep(1)", "assert x"]) == []


@pytest.mark.parametrize("rule", RULES)
def test_no_test_breaks_the_rule(rule: str) -> None:
    scan, _ = RULES[rule]
    files = list(sources())
    assert len(files) > 20, "the scan found too few test files: wrong directory?"
    findings = [f for name, lines in files for f in scan(name, lines)]
    assert findings == [], "\n".join(f"{name}:{n}: {line.strip()}" for name, n, line in findings)


def test_sleep_then_assert_sees_past_blank_lines_but_not_a_wait() -> None:
    waited = ["time.sleep(0.1)", "wait_until(lambda: done(), what='done')", "assert done()"]
    assert sleep_then_assert("t.py", waited) == []
    flagged = [("t.py", 1, "    time.sleep(0.1)")]
    assert sleep_then_assert("t.py", ["    time.sleep(0.1)", "", "    assert done()"]) == flagged
    read_then_assert = ["    time.sleep(0.1)", "    errors = notes()", "    assert not errors"]
    assert sleep_then_assert("t.py", read_then_assert) == flagged
