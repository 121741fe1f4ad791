"""Which programs a shell line runs: the command word's basename, seen through wrappers.

`invocations(line)` parses the line (words.py) and, for each simple command, strips the
wrappers that run their arguments as a command (env, nice, ionice, setsid, stdbuf, timeout,
flock, taskset, nohup, xargs, command, builtin, exec, time, sudo, doas, busybox), each with its
own option syntax, so `/usr/bin/nice -n 5 /bin/rm x` is judged as `rm x`. `sh -c STRING`,
`env -S STRING` and `find -exec CMD ;` are followed into the command they run. What cannot be
followed with certainty (an expansion as the program, an option a wrapper does not have, a
shell reading a script or stdin, eval) sets `unsure`; an interpreter given code inline (perl -e,
python -c, awk) sets `runs_code`; deleting without rm (unlink, find -delete) sets `deletes`.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from toycoder_daemon.tools.shell.words import EXPANDED, GLOB, MAX_DEPTH, Word, parse, split_words

DELETERS = frozenset({"rm", "unlink", "rmdir", "shred"})
"""Programs whose job is deleting files: a deny rule on one makes the others ask."""
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "csh", "tcsh"})
INLINE_CODE = {"perl": "eE", "python": "c", "ruby": "e", "node": "ep", "nodejs": "ep", "php": "rR", "lua": "e",
               "luajit": "e", "Rscript": "e", "pwsh": "c", "deno": "", "bun": "e", "tclsh": "", "jshell": ""}
"""Interpreters and the short options that give them code on the command line."""
TEXT_RUNNERS = frozenset({"eval", "source", ".", "trap", "alias", "hash", "enable", "fc"})
"""Builtins that run a string later or give a program another name (`alias r=rm`, `hash -p`)."""
AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
INFO_ONLY = frozenset({"--version", "-V", "--help", "-h", "-v"})
MAX_WRAPS = 32


@dataclass(frozen=True)
class Spec:
    """A wrapper's option syntax: short flags, short options taking a value, long ones likewise,
    and how many operands come before the command (timeout's duration, flock's file)."""
    flags: str = ""
    valued: str = ""
    long_flags: frozenset[str] = frozenset()
    long_valued: frozenset[str] = frozenset()
    operands: int = 0
    no_command: str = ""
    """Short options after which nothing is run (`command -v`, `ionice -p`)."""


def _spec(flags: str = "", valued: str = "", lf: str = "", lv: str = "", operands: int = 0, none: str = "") -> Spec:
    return Spec(flags, valued, frozenset(lf.split()), frozenset(lv.split()), operands, none)


WRAPPERS: dict[str, Spec] = {
    "env": _spec("i0v", "uCP", "ignore-environment null debug", "unset chdir block-signal default-signal "
                 "ignore-signal list-signal-handling"),
    "nice": _spec("", "n", "", "adjustment"),
    "ionice": _spec("t", "cnpPu", "ignore", "class classdata pid pgid uid", none="pPu"),
    "setsid": _spec("cfw", "", "ctty fork wait"),
    "stdbuf": _spec("", "ioe", "", "input output error"),
    "timeout": _spec("v", "sk", "preserve-status foreground verbose", "signal kill-after", operands=1),
    "flock": _spec("sexunoF", "wE", "shared exclusive unlock nonblock nb close no-fork verbose",
                   "timeout wait conflict-exit-code", operands=1),
    "taskset": _spec("ac", "", "all-tasks cpu-list", "", operands=1, none="p"),
    "nohup": _spec(),
    "xargs": _spec("0prtxo", "adEILnPs", "null interactive no-run-if-empty verbose exit show-limits open-tty",
                   "arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var"),
    "command": _spec("p", "", "", "", none="vV"),
    "builtin": _spec(),
    "exec": _spec("cl", "a"),
    "time": _spec("apvq", "fo", "append portability verbose quiet", "format output"),
    "sudo": _spec("AbBEHiknNPSs", "CDgprRtTUu", "askpass background bell preserve-env login non-interactive "
                  "preserve-groups stdin shell set-home reset-timestamp", "close-from chdir group prompt chroot "
                  "role type command-timeout other-user user host", none="eKlVv"),
    "doas": _spec("ns", "u", "", "", none="CL"),
    "busybox": _spec(),
}


@dataclass
class Invocation:
    program: str
    """The basename of the program that runs ("" when unknown)."""
    args: list[Word] = field(default_factory=list)
    unsure: str = ""
    """Why this program or its arguments cannot be known for certain ("" when they can)."""
    deletes: bool = False
    runs_code: bool = False


def invocations(line: str, cwd: Path | None = None, depth: int = 0) -> list[Invocation]:
    """Every program the line runs, seen through wrappers (see the module docstring)."""
    script = parse(line, depth)
    out = [Invocation("", unsure=why) for why in script.unsure]
    for words in script.commands:
        out.extend(_judge(words, cwd, depth))
    return out


def _judge(words: list[Word], cwd: Path | None, depth: int) -> list[Invocation]:
    if depth > MAX_DEPTH:
        return [Invocation("", words, unsure="commands nested too deep")]
    for _ in range(MAX_WRAPS):
        if not words:
            return []
        names = _program_names(words[0], cwd)
        if names is None:
            return [Invocation("", words[1:], unsure=f"the program {words[0].text!r} is not known before it runs")]
        if len(names) != 1:  # a glob naming several programs: judge each as the one that runs
            return [inv for n in names for inv in _judge([_literal(n)] + words[1:], cwd, depth)]
        name, args = names[0], words[1:]
        if name in WRAPPERS:
            rest = _unwrap(name, args)
            if isinstance(rest, str):
                return [Invocation(name, args, unsure=rest)]
            if rest is None:
                return [Invocation(name, args)]
            words = rest
            continue
        return _program(name, args, cwd, depth)
    return [Invocation("", words, unsure="too many wrappers")]


def _literal(text: str) -> Word:
    w = Word()
    w.add(text)
    return w


def _program_names(word: Word, cwd: Path | None) -> list[str] | None:
    """The basename(s) the command word runs: a path's last part, a glob's matches; None if unknown."""
    cut = word.text.rfind("/")
    name, mask = word.text[cut + 1:], word.mask[cut + 1:]
    if cut >= 0 and word.mask[cut] != "L":
        return None  # the slash came from an expansion
    if not name or EXPANDED in mask:
        return None
    if GLOB not in mask:
        return [name]
    if EXPANDED in word.mask:
        return None
    # The shell expands the glob before it looks the program up: resolve it the same way.
    pattern = word.text if word.text.startswith("/") or cwd is None else str(cwd / word.text)
    found = sorted(glob.glob(pattern))
    return sorted({os.path.basename(f) for f in found}) or None


def _unwrap(name: str, args: list[Word]) -> list[Word] | str | None:
    """The command a wrapper runs, None when it runs none, or why it cannot be known."""
    spec = WRAPPERS[name]
    i, operands = 0, spec.operands
    while i < len(args):
        a = args[i]
        if not a.certain:
            return f"{name} has an argument that is not known before it runs"
        t = a.text
        if t == "--":
            i += 1
            while name in ("env", "sudo") and i < len(args) and "=" in args[i].text:
                i += 1  # NAME=VALUE may follow the `--`
            break
        if name == "env" and (t == "-" or "=" in t and not t.startswith("-")):
            i += 1
            continue
        if name == "sudo" and "=" in t and not t.startswith("-"):
            i += 1
            continue
        if name == "nice" and re.fullmatch(r"--?\d+", t):
            i += 1
            continue
        if name == "env" and (t.startswith("-S") or t.startswith("--split-string")):
            value, i = _value_of(args, i, "-S", "--split-string")
            split = split_words(value) if value is not None else None
            if split is None:
                return "env -S splits a string that is not known for certain"
            return split + args[i:]
        if name == "flock" and (t in ("-c", "--command") or t.startswith("--command=")):
            return "flock -c runs a shell string"
        if t.startswith("--") and len(t) > 2:
            key, eq, _ = t[2:].partition("=")
            if key in spec.long_flags:
                i += 1
            elif key in spec.long_valued:
                i += 1 if eq else 2
            else:
                return f"{name} has an option this analysis does not know: {t}"
            continue
        if t.startswith("-") and len(t) > 1:
            j = 1
            while j < len(t):
                c = t[j]
                if c in spec.no_command:
                    return None
                if c in spec.valued:
                    if j == len(t) - 1:
                        i += 1  # the value is the next word
                    break
                if c not in spec.flags:
                    return f"{name} has an option this analysis does not know: -{c}"
                j += 1
            i += 1
            continue
        if operands:  # timeout's duration, flock's file, taskset's mask: the command follows
            operands -= 1
            i += 1
            if operands:
                continue
            if name == "flock" and i < len(args) and args[i].text in ("-c", "--command"):
                return "flock -c runs a shell string"
        break
    rest = args[i:]
    if name == "xargs":
        rest = rest or [_literal("echo")]
        stdin = Word()
        stdin.add("(arguments read from stdin)", EXPANDED)
        return rest + [stdin]
    if operands or not rest:
        return None
    return rest


def _value_of(args: list[Word], i: int, short: str, long: str) -> tuple[str | None, int]:
    t = args[i].text
    if t in (short, long):
        return (args[i + 1].text if i + 1 < len(args) and args[i + 1].certain else None), i + 2
    if t.startswith(long + "="):
        return t[len(long) + 1:], i + 1
    return t[len(short):], i + 1


def _program(name: str, args: list[Word], cwd: Path | None, depth: int) -> list[Invocation]:
    inv = Invocation(name, args, deletes=name in DELETERS)
    texts = [a.text for a in args]
    if name in SHELLS:
        return _shell(inv, cwd, depth)
    if name in TEXT_RUNNERS:
        inv.unsure = f"{name} runs or renames commands in a way this analysis does not follow"
    elif name == "find":
        return _find(inv, cwd, depth)
    elif name in AWKS:
        inv.runs_code = True
    else:
        base = re.sub(r"[\d.]+$", "", name)  # python3.12 -> python
        if base in INLINE_CODE:
            letters = INLINE_CODE[base]
            inline = any((re.fullmatch(r"-[A-Za-z]{1,4}", t) and any(c in t[1:] for c in letters))
                         or t.startswith(("--eval", "--print")) or t in ("eval", "-") for t in texts)
            script = any(not t.startswith("-") for t in texts)
            inv.runs_code = inline or not script and not any(t in INFO_ONLY for t in texts)
    return [inv]


def _shell(inv: Invocation, cwd: Path | None, depth: int) -> list[Invocation]:
    args, i, command_string = inv.args, 0, False
    while i < len(args):
        t = args[i].text
        if not args[i].certain:
            inv.unsure = f"{inv.program} has an argument that is not known before it runs"
            return [inv]
        if t in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if t == "--" or not t.startswith(("-", "+")) or t in ("-", "+"):
            break
        command_string = command_string or (t[0] == "-" and not t.startswith("--") and "c" in t)
        if not t.startswith("--") and "s" in t[1:]:
            break  # -s: commands from stdin
        i += 1
    if i < len(args) and args[i].text == "--":
        i += 1
    if command_string and i < len(args) and inv.program != "fish":
        if depth >= MAX_DEPTH:
            return [Invocation(inv.program, args, unsure="shells nested too deep")]
        return invocations(args[i].text, cwd, depth + 1)
    inv.unsure = f"{inv.program} runs a script or its stdin, which this analysis does not read"
    return [inv]


def _find(inv: Invocation, cwd: Path | None, depth: int) -> list[Invocation]:
    out, args, i = [inv], inv.args, 0
    while i < len(args):
        t = args[i].text
        if t == "-delete":
            inv.deletes = True
        elif t in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(args)) if args[j].text in (";", "+")), len(args))
            out.extend(_judge(args[i + 1:end], cwd, depth + 1))
            i = end
        i += 1
    return out
