"""Issue 13 item 5: deny rules on run_command judge the program that runs, not the command string.

With `run_command(rm *)` denied and run_command allowed (by a rule or "always"), a path, a glob,
a wrapper or another deleting program must not run without a question.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.shell.run_command import run_command
from toycoder_daemon.tools.workspace import Workspace


def verdict(tmp_path: Path, command: str, deny: tuple[str, ...] = ("run_command(rm *)",),
            allow: tuple[str, ...] = ("run_command",)) -> str | None:
    gate = PermissionGate(list(allow), list(deny))
    v = gate.judge(run_command, {"command": command}, ToolContext(Workspace(tmp_path), None, "c")).rule  # type: ignore[arg-type]
    return v[0] if v else None


def must_ask_with_always(tmp_path: Path, command: str) -> bool:
    gate = PermissionGate([], ["run_command(rm *)"])
    gate.always.add("run_command")
    return gate.must_ask(gate.judge(run_command, {"command": command}, ToolContext(Workspace(tmp_path), None, "c")))  # type: ignore[arg-type]


# The exact inputs of the issue: each ran without a question before.
ISSUE_INPUTS = ["/bin/rm x", "/???/rm x", "setsid rm x", "stdbuf -o0 rm x", "flock f rm x", "ionice rm x",
                "taskset 1 rm x", "find . -delete", "unlink x", "perl -e unlink"]


@pytest.mark.parametrize("command", ISSUE_INPUTS + ["perl -e 'unlink \"x\"'"])
def test_issue_inputs_never_run_unasked(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, command) in ("deny", "ask")
    assert must_ask_with_always(tmp_path, command) or verdict(tmp_path, command) == "deny"


@pytest.mark.parametrize("command", [
    "/bin/rm x", "/???/rm x", "/usr/bin/rm -rf x", "./rm x", "$HOME/bin/rm x",
    "setsid rm x", "setsid -f rm x", "stdbuf -o0 rm x", "stdbuf -o 0 -e L rm x", "flock f rm x",
    "flock -w 5 f rm x", "ionice rm x", "ionice -c 3 rm x", "ionice -c3 -n7 rm x", "taskset 1 rm x",
    "taskset -c 0-3 rm x", "timeout 5 rm x", "timeout -s KILL -k 3 5 rm x", "nice rm x", "nice -n 5 rm x",
    "nice -5 rm x", "env rm x", "env -i A=1 rm x", "env -u HOME -- rm x", "env -i -- A=1 rm x", "nohup rm x",
    "xargs -0 rm",
    "command rm x", "builtin rm x", "exec rm x", "time rm x", "time -p rm x", "sudo rm x",
    "sudo -u root -E rm x", "doas rm x", "doas -u root rm x", "nice ionice -c2 setsid timeout 9 /bin/rm x",
    "sh -c 'rm x'", "bash -ec 'ls; rm x'", "env -S 'rm x'", "find . -name '*.o' -exec rm {} +",
    "find . -execdir /bin/rm {} ;", "ls; /bin/rm x", "echo $(/bin/rm x)", "X=1 Y=2 setsid rm x",
    "if true; then setsid rm x; fi", "for f in a b; do /bin/rm $f; done", "! /bin/rm x",
    "/bin/r? x",  # the glob is resolved the way the shell would: /bin/rm is among its matches
])
def test_wrapped_and_path_forms_are_judged_like_the_bare_program(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, command) == "deny"


@pytest.mark.parametrize("command", [
    "find . -delete", "unlink x", "rmdir d", "shred -u x", "perl -e unlink", "perl -e 'unlink \"x\"'",
    "python3 -c 'import os'", "ruby -e x", "node -e x", "awk 'BEGIN{system(\"rm x\")}'",
    "/nonexistent/r? x", "$RM x", "`which rm` x", "sh script.sh", "echo rm x | sh", "bash", "eval rm x",
    "env -S \"$X\"", "timeout --bogus 5 rm x", "python3", "cat <<EOF\n$(rm x)\nEOF",
    "alias r=rm\nr x", "hash -p /bin/rm r; r x", "trap 'rm x' EXIT", "node --eval=x",
    "echo 'unterminated", "case $x in a) make;; esac", "find -exec " * 5000 + "ls", "echo " + "x" * 70_000,
    "echo " + "$(echo " * 12 + "ls" + ")" * 12,
])
def test_what_cannot_be_judged_with_certainty_is_asked(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, command) == "ask"
    assert must_ask_with_always(tmp_path, command)


@pytest.mark.parametrize("command", [
    "ls -la", "setsid make", "nice -n 5 make test", "timeout 60 pytest -q", "/usr/bin/git status",
    "find . -name '*.py'", "python3 script.py", "xargs -0 grep foo",
])
def test_programs_judged_harmless_still_ride_the_allow_rule(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, command) == "allow"


@pytest.mark.parametrize("command", ["/bin/rm x", "find . -delete", "perl -e unlink", "setsid rm x"])
def test_no_deny_rule_no_question(tmp_path: Path, command: str) -> None:
    assert verdict(tmp_path, command, deny=()) == "allow"


def test_a_rule_on_arguments_judges_the_unwrapped_arguments(tmp_path: Path) -> None:
    deny = ("run_command(git push *--force*)",)
    assert verdict(tmp_path, "setsid /usr/bin/git push origin --force", deny) == "deny"
    assert verdict(tmp_path, "timeout 9 git push origin main", deny) == "allow"
    assert verdict(tmp_path, "git push origin $BRANCH", deny) == "ask"  # an expansion could be --force
    assert verdict(tmp_path, "git status", deny) == "allow"


def test_deleting_programs_ask_only_when_a_rule_denies_a_deleting_program(tmp_path: Path) -> None:
    assert verdict(tmp_path, "unlink x", deny=("run_command(curl *)",)) == "allow"
    assert verdict(tmp_path, "unlink x", deny=("run_command(rm -rf *)",)) == "ask"


@pytest.mark.parametrize("line, programs", [
    ("cat <<'EOF'\nrm x\nEOF\nls", ["cat", "ls"]),            # a here-document is data, not commands
    ("ls # ; rm x", ["ls"]),                                   # a comment
    ("make 2>&1 | tee log", ["make", "tee"]),                  # redirections are not argv
    ("a=$(rm y) b", ["rm", "b"]),                              # an assignment's substitution runs
    ("cat < <(rm x)", ["rm", "cat"]),                          # so does a process substitution
    ("echo \"`rm x`\" '$(not run)'", ["rm", "echo"]),
    ("/usr/bin/env bash -c 'nice rm -rf /'", ["rm"]),
    ("command -v rm", ["command"]),                            # -v only looks the program up
])
def test_shell_words_find_every_program_a_line_runs(line: str, programs: list[str]) -> None:
    from toycoder_daemon.tools.shell.programs import invocations
    found = invocations(line)
    assert [i.program for i in found] == programs
    assert not any(i.unsure for i in found)


def test_word_masks_mark_what_an_expansion_or_a_glob_can_change() -> None:
    from toycoder_daemon.tools.shell.words import parse
    script = parse("$HOME/bin/rm 'a b' \"$X\"c /???/x")
    assert not script.unsure and len(script.commands) == 1
    words = script.commands[0]
    assert [w.text for w in words] == ["$HOME/bin/rm", "a b", "$Xc", "/???/x"]
    assert [w.certain for w in words] == [False, True, False, False]
    assert words[0].mask == "X" * len("$HOME") + "L" * len("/bin/rm")  # the program's name is certain
    assert parse("echo 'open").unsure and parse("echo $(( $(rm x) ))").unsure
