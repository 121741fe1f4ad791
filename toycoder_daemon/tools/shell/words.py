"""POSIX shell words: split a command line into the simple commands it runs, with their words.

Enough of sh's grammar to find every command a line starts: lists and pipelines, subshells and
groups, the bodies of if/while/for, command and process substitution (parsed recursively),
assignments and redirections (not part of argv), here-documents (skipped, unless an unquoted one
substitutes). Each word keeps its dequoted text and a per-character mask saying which characters
are certain: an expansion (`$x`, `$(...)`, `~`) or an unquoted glob or brace can become anything.
What this parser does not follow (case, functions, arithmetic, unterminated quotes, deep nesting)
is reported in `Script.unsure`, so the caller asks instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LITERAL, EXPANDED, GLOB = "L", "X", "G"
"""Mask characters: certain text, text an expansion replaces, an unquoted glob character."""
MAX_DEPTH = 8
"""Nested substitutions deeper than this are not followed (and make the line unsure)."""
MAX_LENGTH = 65_536
"""A longer line is not parsed (it is unsure): the gate runs on the event loop."""

_BREAK = set(" \t\n;&|()<>")
_SKIPPED_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_UNSURE_KEYWORDS = {"case", "esac", "function", "select", "coproc", "[[", "]]", "(("}
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
           "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


@dataclass
class Word:
    text: str = ""
    """The word after quote removal; an expansion stays as its source text (`$HOME`)."""
    mask: str = ""
    """One of LITERAL, EXPANDED or GLOB per character of `text`."""

    @property
    def certain(self) -> bool:
        return all(m == LITERAL for m in self.mask)

    def add(self, text: str, kind: str = LITERAL) -> None:
        self.text += text
        self.mask += kind * len(text)


class _Builder:
    """A word being lexed, in pieces: appending to a str attribute would copy it every time."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.masks: list[str] = []

    def add(self, text: str, kind: str = LITERAL) -> None:
        self.texts.append(text)
        self.masks.append(kind * len(text))

    @property
    def empty(self) -> bool:
        return not any(self.texts)

    def word(self) -> Word:
        return Word("".join(self.texts), "".join(self.masks))


@dataclass
class Script:
    commands: list[list[Word]] = field(default_factory=list)
    """Every simple command the line runs (nested ones included), as its argv words."""
    unsure: list[str] = field(default_factory=list)
    """Why the parse cannot be trusted; empty when it can."""


def parse(src: str, depth: int = 0) -> Script:
    """The simple commands of a shell line (see the module docstring)."""
    out = Script()
    if depth > MAX_DEPTH:
        out.unsure.append("nested too deep")
        return out
    if len(src) > MAX_LENGTH:
        out.unsure.append("too long to analyse")
        return out
    _Parser(src, depth, out).run()
    return out


class _Parser:
    def __init__(self, src: str, depth: int, out: Script):
        self.src, self.depth, self.out = src, depth, out
        self.i = 0
        self.words: list[Word] = []
        self.heredocs: list[tuple[str, bool, bool]] = []  # (delimiter, strip tabs, quoted)
        self.skip_to_separator = False  # the name and list of a `for` loop

    def unsure(self, why: str) -> None:
        self.out.unsure.append(why)

    def run(self) -> None:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and src.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":  # at the start of a word: a comment to the end of the line
                end = src.find("\n", self.i)
                self.i = len(src) if end < 0 else end
            elif c in "<>" and src.startswith("(", self.i + 1):
                self._word()  # process substitution: a word whose command runs
            elif c in "<>" or (c == "&" and src.startswith(">", self.i + 1)):
                self._redirect()
            elif c in ";&|()\n":
                if c == "(" and self.words:
                    self.unsure("a function definition")
                if src.startswith("((", self.i) and not self.words:
                    self.unsure("arithmetic")
                self._end_command()
                self.skip_to_separator = False
                self.i += 1
                if c == "\n":
                    self._skip_heredoc_bodies()
            else:
                self._word()
        self._end_command()
        if self.heredocs:
            self._skip_heredoc_bodies()

    def _end_command(self) -> None:
        if self.words:
            self.out.commands.append(self.words)
        self.words = []

    def _word(self) -> None:
        word = self._lex_word()
        if self.skip_to_separator:
            return
        # fd number of a redirection, like the 2 in 2>&1
        if word.text.isdigit() and word.certain and self.src[self.i:self.i + 1] in ("<", ">"):
            return
        if not self.words:
            if word.certain and word.text in _UNSURE_KEYWORDS:
                self.unsure(f"shell construct {word.text!r}")
                return
            if word.certain and word.text in _SKIPPED_KEYWORDS:
                return
            if word.certain and word.text == "for":
                self.skip_to_separator = True
                return
            if _is_assignment(word):
                return
        self.words.append(word)

    def _redirect(self) -> None:
        src, i = self.src, self.i
        op = next(o for o in ("<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&", "<>", ">|", "<", ">")
                  if src.startswith(o, i))
        self.i = i + len(op)
        while self.i < len(src) and src[self.i] in " \t":
            self.i += 1
        substitution = src[self.i:self.i + 1] in ("<", ">") and src.startswith("(", self.i + 1)
        if self.i >= len(src) or src[self.i] in _BREAK and not substitution:
            self.unsure("a redirection without a target")
            return
        start = self.i
        target = self._lex_word()
        if op in ("<<", "<<-"):
            quoted = any(q in src[start:self.i] for q in "'\"\\")
            self.heredocs.append((target.text, op == "<<-", quoted))

    def _skip_heredoc_bodies(self) -> None:
        for delim, strip, quoted in self.heredocs:
            body_start = self.i
            while self.i < len(self.src):
                end = self.src.find("\n", self.i)
                end = len(self.src) if end < 0 else end
                line = self.src[self.i:end]
                self.i = min(end + 1, len(self.src))
                if (line.lstrip("\t") if strip else line) == delim:
                    break
            body = self.src[body_start:self.i]
            if not quoted and ("$(" in body or "`" in body):
                self.unsure("a here-document that substitutes a command")
        self.heredocs = []

    # ---- words ------------------------------------------------------------------------------

    def _lex_word(self) -> Word:
        src, w = self.src, _Builder()
        brace = False
        while self.i < len(src):
            c = src[self.i]
            if c in "<>" and src.startswith("(", self.i + 1) and w.empty:
                self._substitution(self.i + 1, w)
            elif c in _BREAK:
                break
            elif c == "\\":
                nxt = src[self.i + 1:self.i + 2]
                self.i += 2
                if nxt != "\n":
                    w.add(nxt)
            elif c == "'":
                end = src.find("'", self.i + 1)
                if end < 0:
                    self.unsure("an unterminated quote")
                    self.i = len(src)
                    break
                w.add(src[self.i + 1:end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(w)
            elif c == "$":
                self._dollar(w)
            elif c == "`":
                self._backtick(w)
            elif c in "*?[":
                w.add(c, GLOB)
                self.i += 1
            elif c == "~" and w.empty:
                w.add(c, EXPANDED)
                self.i += 1
            else:
                brace = brace or c == "{"
                w.add(c, EXPANDED if brace and c in "{}," else LITERAL)
                self.i += 1
        return w.word()

    def _double_quoted(self, w: _Builder) -> None:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\" and src[self.i + 1:self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if src[self.i + 1] != "\n":
                    w.add(src[self.i + 1])
                self.i += 2
            elif c == "$":
                self._dollar(w)
            elif c == "`":
                self._backtick(w)
            else:
                w.add(c)
                self.i += 1
        self.unsure("an unterminated quote")

    def _dollar(self, w: _Builder) -> None:
        src, i = self.src, self.i
        nxt = src[i + 1:i + 2]
        if src.startswith("$((", i):
            end = _closing(src, i + 1)
            body = src[i + 3:end] if end > 0 else ""
            if end < 0 or "$(" in body or "`" in body:
                self.unsure("arithmetic that substitutes a command")
            self.i = len(src) if end < 0 else end + 1
            w.add(src[i:self.i], EXPANDED)
        elif nxt == "(":
            self._substitution(i + 1, w)
        elif nxt == "{":
            end = _closing(src, i + 1, "{", "}")
            if end < 0 or "$(" in src[i:end] or "`" in src[i:end]:
                self.unsure("a parameter expansion that substitutes a command")
            self.i = len(src) if end < 0 else end + 1
            w.add(src[i:self.i], EXPANDED)
        elif nxt == "'":
            self.i = i + 2
            self._ansi_c(w)
        elif nxt == '"':
            self.i = i + 2
            self._double_quoted(w)
        elif nxt and (nxt.isalnum() or nxt == "_"):
            j = i + 2
            if not nxt.isdigit():
                while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                    j += 1
            self.i = j
            w.add(src[i:j], EXPANDED)
        elif nxt and nxt in "@*#?$!-":
            self.i = i + 2
            w.add(src[i:i + 2], EXPANDED)
        else:
            self.i = i + 1
            w.add("$")

    def _ansi_c(self, w: _Builder) -> None:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c == "'":
                self.i += 1
                return
            if c != "\\":
                w.add(c)
                self.i += 1
                continue
            e = src[self.i + 1:self.i + 2]
            if e in _ANSI_C:
                w.add(_ANSI_C[e])
                self.i += 2
            else:  # \x41, \101, \u...: decoding them all is not worth it; the text is unknown
                w.add(src[self.i:self.i + 2], EXPANDED)
                self.i += 2
        self.unsure("an unterminated quote")

    def _substitution(self, open_at: int, w: _Builder) -> None:
        """`$(...)`, `<(...)` or `>(...)` with its `(` at open_at: its commands run too."""
        end = _closing(self.src, open_at)
        start = self.i
        if end < 0:
            self.unsure("an unterminated substitution")
            self.i = len(self.src)
        else:
            self._nested(self.src[open_at + 1:end])
            self.i = end + 1
        w.add(self.src[start:self.i], EXPANDED)

    def _backtick(self, w: _Builder) -> None:
        src, start = self.src, self.i
        j, inner = start + 1, []
        while j < len(src) and src[j] != "`":
            if src[j] == "\\" and src[j + 1:j + 2] in ("`", "\\", "$"):
                j += 1
            inner.append(src[j])
            j += 1
        if j >= len(src):
            self.unsure("an unterminated backquote")
            self.i = len(src)
        else:
            self._nested("".join(inner))
            self.i = j + 1
        w.add(src[start:self.i], EXPANDED)

    def _nested(self, src: str) -> None:
        inner = parse(src, self.depth + 1)
        self.out.commands.extend(inner.commands)
        self.out.unsure.extend(inner.unsure)


def _is_assignment(word: Word) -> bool:
    name, eq, _ = word.text.partition("=")
    return bool(eq) and name.isidentifier() and word.mask[:len(name) + 1] == LITERAL * (len(name) + 1)


def _closing(src: str, open_at: int, opening: str = "(", closing: str = ")") -> int:
    """Index of the bracket closing the one at open_at, skipping quoted text; -1 if none."""
    depth, i = 0, open_at
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            end = src.find("'", i + 1)
            if end < 0:
                return -1
            i = end + 1
            continue
        if c == '"':
            i += 1
            while i < len(src) and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            continue
        if c == opening:
            depth += 1
        elif c == closing:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def split_words(text: str) -> list[Word] | None:
    """The words of a string a program splits like the shell (`env -S`, `sh -c` arguments read
    as one simple command); None when it is more than one certain simple command."""
    script = parse(text)
    if script.unsure or len(script.commands) != 1:
        return None
    return script.commands[0]
