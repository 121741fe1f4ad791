"""The test suite's own hygiene, checked by reading its source: nothing that kills by name, no fixed
sleep before an assertion, no process looked up by a fixed string, /proc read in one place, the
shared helpers not copied again; and the tiers: every test file in a tier folder, nothing in unit/
that starts the daemon process, no test module imported from another folder, no conftest imported.

Each rule is a small scanner over lines; each scanner is also shown a snippet it must flag, so a
scanner that silently stopped matching fails here too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from helpers import TESTS, TIERS

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


# The unit tier is the in-process one (`pytest -m unit`): what starts the daemon process belongs in
# e2e/ (or editors/, golden/). Starting other processes (a sandbox launcher, an MCP server, an
# interpreter that reports its imports) is fine.
DAEMON_PROCESS = re.compile(r"\bDaemon\.start\(|\bAcpDaemon\(|\bacp_daemon\(|\bspawn_agent_process\b|server_command\s*="
                            r"|[\"']-m[\"'],\s*[\"']toycoder_daemon(\.cli)?[\"']")


def daemon_process_in_unit(name: str, lines: list[str]) -> list[Finding]:
    if not name.startswith("unit/"):
        return []
    return [(name, i, line) for i, line in enumerate(lines, 1) if DAEMON_PROCESS.search(code(line))]


# Pytest puts each test file's folder on sys.path as it collects it, so a test module of another
# folder may import or not depending on what was collected first: shared code goes in a helper
# module at tests/ (helpers.py, acp_client.py, ...), fixtures in a conftest.py.
TEST_MODULE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(test_\w+)")


def other_folders_test_module(name: str, lines: list[str]) -> list[Finding]:
    folder = (TESTS / name).parent
    return [(name, i, line) for i, line in enumerate(lines, 1)
            if (m := TEST_MODULE_IMPORT.match(line)) and not (folder / f"{m.group(1)}.py").exists()]


# Every conftest.py outside a package is the module 'conftest': which one an import gets depends on
# the order pytest loaded them. Helpers are imported from their modules, fixtures are requested.
CONFTEST_IMPORT = re.compile(r"^\s*(?:from\s+conftest\s+import|import\s+conftest\b)")


def conftest_import(name: str, lines: list[str]) -> list[Finding]:
    return [(name, i, line) for i, line in enumerate(lines, 1) if CONFTEST_IMPORT.match(line)]


RULES: dict[str, tuple[Scanner, str, str]] = {  # scanner, a snippet it must flag, in a file of this name
    "kill by name": (kill_by_name, 'os.system("pkill -f \'sleep 175\'")\n', "test_example.py"),
    "sleep then assert": (sleep_then_assert, "    await asyncio.sleep(0.3)\n\n    assert procs() == []\n", "test_example.py"),
    "fixed process tag": (fixed_tag, 'await d.wait_for(lambda: processes_with(f"sleep 17{i}9"))\n', "test_example.py"),
    "/proc outside helpers.py": (proc_outside_helpers, 'for pid in os.listdir("/proc"):\n', "test_example.py"),
    "copied helper": (copied_helper, "class AllowAll:\n    pass\n", "test_example.py"),
    "daemon process in unit/": (daemon_process_in_unit, '    p = subprocess.run([sys.executable, "-m", "toycoder_daemon", "--acp"])\n',
                                "unit/faces/acp/test_example.py"),
    "test module of another folder": (other_folders_test_module, "from test_acp import acp_face\n", "e2e/test_example.py"),
    "conftest import": (conftest_import, "from conftest import write_config\n", "unit/test_example.py"),
}


@pytest.mark.parametrize("rule", RULES)
def test_the_scanner_flags_what_it_is_for(rule: str) -> None:
    scan, bad, name = RULES[rule]
    assert scan(name, bad.splitlines()), f"the {rule!r} scanner no longer flags:\n{bad}"
    assert scan(name, ["x = 1", "# pkill -f sleep; time.sleep(1)", "assert x"]) == []


@pytest.mark.parametrize("rule", RULES)
def test_no_test_breaks_the_rule(rule: str) -> None:
    scan, _, _ = RULES[rule]
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


def test_every_test_file_is_in_a_tier_folder() -> None:
    """conftest.py marks each test with its tier folder: a test file elsewhere would run in no tier."""
    tests = [name for name, _ in sources() if Path(name).name.startswith("test_")]
    assert len(tests) > 20, "the scan found too few test files: wrong directory?"
    assert [name for name in tests if Path(name).parts[0] not in TIERS] == []


def test_the_daemon_process_scanner_leaves_other_processes_and_other_tiers_alone() -> None:
    others = ['subprocess.run([sys.executable, "-m", "toycoder_daemon.testing.fake_llm"])',
              'subprocess.run([sys.executable, "-c", "import toycoder_daemon.faces.lsp.server"])',
              "from acp_client import acp_face"]
    assert daemon_process_in_unit("unit/test_example.py", others) == []
    assert daemon_process_in_unit("e2e/test_example.py", ["d = await Daemon.start()"]) == []
    assert daemon_process_in_unit("unit/test_example.py", ["d = await Daemon.start()"]) != []
