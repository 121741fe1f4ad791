"""Pure-Python .gitignore matching, a gitignore-aware walker and ripgrep-style globs.

The semantics follow ripgrep 14.1 (crates `ignore` 0.4 and `globset` 0.4.14) run as the search
tools run it (`--hidden --no-require-git --no-ignore-global --no-ignore-dot --no-ignore-parent
--no-ignore-exclude`, plus the rules it must not find itself passed with `--ignore-file`, see
`IgnoreMatcher.rules_above`), so that the tools give the same answer with rg and with this fallback:

* Rules come from `.gitignore` files (the workspace root's and nested ones, each relative to its
  own directory) and the workspace's `.git/info/exclude` (as git, which never reads a nested
  repository's), never from above the workspace root. A deeper file beats a shallower one; inside
  a file the last matching line wins; every `.gitignore` beats the exclude file.
* Lines: `#` comments, blank lines, `!` negation, `\\!` / `\\#` escapes, trailing spaces trimmed
  unless escaped (`\\ `), trailing `/` = directories only, a leading or middle `/` anchors the
  pattern to the file's directory (otherwise it matches the name at any depth), `*` `?` `[...]`
  (`[!..]`/`[^..]`), `**` (leading `**/`, trailing `/**`, middle `/**/`), and, like ripgrep (not
  git), `{a,b}` alternation. A line that is not a valid glob is skipped.
* An ignored directory is not entered, so nothing inside it can be re-included. The directory a
  walk starts from is never itself checked (asking for it explicitly wins, as with `rg PATH`).
* Walks skip `.git`, include hidden files, and do not follow symbolic links (links are skipped).

Like globset, globs match bytes: `?` and `*` count bytes of the UTF-8 encoded path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GlobError", "IgnoreMatcher", "PathGlob", "compile_glob", "parse_gitignore_line"]


class GlobError(ValueError):
    """A glob that globset would refuse; the message is globset's reason."""


# -- globs: a port of globset 0.4.14's parser, with literal_separator and backslash_escape -------

_LIT, _ANY, _STAR, _RPRE, _RSUF, _RZOM, _CLASS, _ALT = range(8)
_UNCLOSED_ALT = "unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)"


class _GlobParser:
    def __init__(self, glob: str):
        self.glob = glob
        self.i = 0
        self.prev: str | None = None
        self.cur: str | None = None
        self.stack: list[list[tuple]] = [[]]

    def bump(self) -> str | None:
        self.prev = self.cur
        if self.i < len(self.glob):
            self.cur = self.glob[self.i]
            self.i += 1
        else:
            self.cur = None
        return self.cur

    def peek(self) -> str | None:
        return self.glob[self.i] if self.i < len(self.glob) else None

    def push(self, tok: tuple) -> None:
        self.stack[-1].append(tok)

    def parse(self) -> list[tuple]:
        while (c := self.bump()) is not None:
            if c == "?":
                self.push((_ANY,))
            elif c == "*":
                self._star()
            elif c == "[":
                self._class()
            elif c == "{":
                if len(self.stack) > 1:
                    raise GlobError("nested alternate groups are not allowed")
                self.stack.append([])
            elif c == "}":
                alts = []
                while len(self.stack) >= 2:
                    alts.append(self.stack.pop())
                self.push((_ALT, alts))
            elif c == ",":
                if len(self.stack) <= 1:
                    self.push((_LIT, ","))
                else:
                    self.stack.append([])
            elif c == "\\":
                nxt = self.bump()
                if nxt is None:
                    raise GlobError("dangling '\\'")
                self.push((_LIT, nxt))
            else:
                self.push((_LIT, c))
        if len(self.stack) > 1:
            raise GlobError(_UNCLOSED_ALT)
        return self.stack[0]

    def _star(self) -> None:
        prev = self.prev
        if self.peek() != "*":
            self.push((_STAR,))
            return
        self.bump()
        if not self.stack[-1]:
            if self.peek() is not None and self.peek() != "/":
                self.push((_STAR,))
                self.push((_STAR,))
            else:
                self.push((_RPRE,))
                self.bump()
            return
        if prev != "/" and (len(self.stack) <= 1 or prev not in (",", "{")):
            self.push((_STAR,))
            self.push((_STAR,))
            return
        nxt = self.peek()
        if nxt is None:
            self.bump()
            is_suffix = True
        elif nxt in (",", "}") and len(self.stack) >= 2:
            is_suffix = True
        elif nxt == "/":
            self.bump()
            is_suffix = False
        else:
            self.push((_STAR,))
            self.push((_STAR,))
            return
        last = self.stack[-1].pop()
        if last[0] in (_RPRE, _RSUF):
            self.push(last)
        else:
            self.push((_RSUF,) if is_suffix else (_RZOM,))

    def _class(self) -> None:
        ranges: list[list[str]] = []
        negated = self.peek() in ("!", "^")
        if negated:
            self.bump()
        first, in_range = True, False
        while True:
            c = self.bump()
            if c is None:
                raise GlobError("unclosed character class; missing ']'")
            if c == "]":
                if not first:
                    break
                ranges.append(["]", "]"])
            elif c == "-":
                if first:
                    ranges.append(["-", "-"])
                elif in_range:
                    self._extend(ranges[-1], "-")
                    in_range = False
                else:
                    in_range = True
            else:
                if in_range:
                    self._extend(ranges[-1], c)
                else:
                    ranges.append([c, c])
                in_range = False
            first = False
        if in_range:
            ranges.append(["-", "-"])
        self.push((_CLASS, negated, ranges))

    @staticmethod
    def _extend(r: list[str], c: str) -> None:
        r[1] = c
        if r[1] < r[0]:
            raise GlobError(f"invalid range; '{r[0]}' > '{r[1]}'")


def _lit(c: str) -> bytes:
    if ord(c) < 0x80:
        return re.escape(c).encode()
    return b"".join(b"\\x%02x" % b for b in c.encode("utf-8", "surrogatepass"))


def _emit(tokens: list[tuple], out: list[bytes]) -> None:
    for tok in tokens:
        kind = tok[0]
        if kind == _LIT:
            out.append(_lit(tok[1]))
        elif kind == _ANY:
            out.append(b"[^/]")
        elif kind == _STAR:
            out.append(b"[^/]*")
        elif kind == _RPRE:
            out.append(b"(?:/?|.*/)")
        elif kind == _RSUF:
            out.append(b"/.*")
        elif kind == _RZOM:
            out.append(b"(?:/|/.*/)")
        elif kind == _CLASS:
            parts = [b"[^" if tok[1] else b"["]
            for lo, hi in tok[2]:
                parts.append(_lit(lo) if lo == hi else _lit(lo) + b"-" + _lit(hi))
            parts.append(b"]")
            out.append(b"".join(parts))
        else:  # alternation; empty branches are dropped, as globset does by default
            alts = []
            for branch in tok[1]:
                sub: list[bytes] = []
                _emit(branch, sub)
                if sub:
                    alts.append(b"".join(sub))
            if alts:
                out.append(b"(?:" + b"|".join(alts) + b")")


def glob_regex(glob: str) -> bytes:
    """The (unanchored) bytes regex globset builds for `glob`; match it with fullmatch."""
    tokens = _GlobParser(glob).parse()
    if len(tokens) == 1 and tokens[0][0] == _RPRE:
        return b".*"
    out: list[bytes] = []
    _emit(tokens, out)
    return b"".join(out)


# -- gitignore lines ---------------------------------------------------------------------------

# Rust's char::is_whitespace (what `str::trim_end` strips), not Python's str.isspace.
_RUST_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
           "\u2028\u2029\u202f\u205f\u3000"


@dataclass(frozen=True)
class _Line:
    body: str
    """The glob text without `!`, the leading `/` and the trailing `/`."""
    whitelist: bool
    dir_only: bool
    anchored: bool
    """Matched against the whole relative path (else against the name at any depth)."""
    regex: bytes


def parse_gitignore_line(line: str, *, strict: bool = False) -> _Line | None:
    """One line as the `ignore` crate reads it; None for comments, blanks and (unless strict,
    which raises GlobError) invalid globs."""
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip(_RUST_WS)
    if not line:
        return None
    whitelist = absolute = False
    if line.startswith("\\!") or line.startswith("\\#"):
        line = line[1:]
        absolute = line.startswith("/")
    else:
        if line.startswith("!"):
            whitelist, line = True, line[1:]
        if line.startswith("/"):
            absolute, line = True, line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
        if line.endswith("\\"):
            line = line[:-1]
    actual = line
    anchored = absolute or "/" in line
    if not anchored and not (actual.startswith("**/") or actual == "**"):
        actual = "**/" + actual
    if actual.endswith("/**"):
        actual += "/*"
    try:
        regex = glob_regex(actual)
    except GlobError:
        if strict:
            raise
        return None
    return _Line(line, whitelist, dir_only, anchored, regex)


def _escape_glob_literal(text: str) -> str:
    return "".join(c if c.isalnum() or c in "/._-" else "\\" + c for c in text)


def rebase_line(rule: _Line, base: str) -> str:
    """The same rule written for a gitignore file at the root instead of at `base` (a relative
    directory): what rg gets through --ignore-file for rules above the directory it searches."""
    prefix = "/" + (_escape_glob_literal(base) + "/" if base else "")
    if not rule.body:  # "!" alone: everything below base
        text = prefix + "**"
    elif rule.anchored:
        text = prefix + rule.body
    else:
        text = prefix + "**/" + rule.body
    return ("!" if rule.whitelist else "") + text + ("/" if rule.dir_only else "")


class _RuleSet:
    """The lines of one ignore file, for paths relative to its directory `base`."""

    __slots__ = ("base", "prefix_len", "lines", "_files", "_dirs")

    def __init__(self, base: bytes, lines: list[_Line]):
        self.base = base
        self.prefix_len = len(base) + 1 if base else 0
        self.lines = lines
        self._files = self._combine([ln for ln in lines if not ln.dir_only])
        self._dirs = self._combine(lines)

    @staticmethod
    def _combine(lines: list[_Line]) -> tuple[re.Pattern[bytes], list[bool]] | None:
        if not lines:
            return None
        ordered = lines[::-1]  # the first alternative that matches is the last line that matches
        pattern = b"|".join(b"(" + ln.regex + b")" for ln in ordered)
        return re.compile(pattern), [False] + [ln.whitelist for ln in ordered]

    def decide(self, rel: bytes, is_dir: bool) -> bool | None:
        """True: ignored, False: whitelisted, None: no line matches. `rel` is root-relative."""
        combo = self._dirs if is_dir else self._files
        if combo is None:
            return None
        m = combo[0].fullmatch(rel[self.prefix_len:])
        if m is None:
            return None
        return not combo[1][m.lastindex or 0]


def _read_rules(path: bytes, base: bytes) -> _RuleSet | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    lines: list[_Line] = []
    for i, raw in enumerate(data.split(b"\n")):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            break  # ripgrep stops reading an ignore file at its first line that is not UTF-8
        if i == 0:
            text = text.lstrip("\ufeff")
        rule = parse_gitignore_line(text)
        if rule is not None:
            lines.append(rule)
    return _RuleSet(base, lines) if lines else None


_Chain = tuple[tuple[_RuleSet, ...], tuple[_RuleSet, ...]]
"""(.gitignore rule sets, exclude rule sets), shallowest first."""


def _decide(chain: _Chain, rel: bytes, is_dir: bool) -> bool:
    for group in chain:
        for rs in reversed(group):
            verdict = rs.decide(rel, is_dir)
            if verdict is not None:
                return verdict
    return False


class IgnoreMatcher:
    """Gitignore rules of one workspace. Paths given to it must lie inside `root`."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self._root_b = os.fsencode(str(self.root))
        self._own: dict[bytes, tuple[_RuleSet | None, _RuleSet | None]] = {}
        self._chains: dict[bytes, _Chain] = {}

    # -- rules per directory --------------------------------------------------------------
    def _abs(self, rel: bytes) -> bytes:
        return self._root_b + b"/" + rel if rel else self._root_b

    def _own_rules(self, rel: bytes) -> tuple[_RuleSet | None, _RuleSet | None]:
        got = self._own.get(rel)
        if got is None:
            d = self._abs(rel)
            exclude = _read_rules(d + b"/.git/info/exclude", rel) if not rel else None
            got = (_read_rules(d + b"/.gitignore", rel), exclude)
            self._own[rel] = got
        return got

    def _extend(self, chain: _Chain, rel: bytes) -> _Chain:
        gi, ex = self._own_rules(rel)
        if gi is None and ex is None:
            return chain
        return (chain[0] + ((gi,) if gi else ()), chain[1] + ((ex,) if ex else ()))

    def _chain(self, rel: bytes) -> _Chain:
        """Rules that apply to the entries of directory `rel` (its own file included)."""
        got = self._chains.get(rel)
        if got is None:
            parent = rel.rpartition(b"/")[0] if rel else None
            got = self._extend(((), ()) if parent is None else self._chain(parent), rel)
            self._chains[rel] = got
        return got

    def rel_bytes(self, path: str | os.PathLike[str]) -> bytes:
        p = Path(path)
        if not p.is_absolute():
            p = self.root / p
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            raise ValueError(f"{path} is outside {self.root}") from None
        s = rel.as_posix()
        return b"" if s == "." else os.fsencode(s)

    # -- questions ----------------------------------------------------------------------------
    def is_ignored(self, path: str | os.PathLike[str], is_dir: bool, *, check_parents: bool = True) -> bool:
        """Whether git would ignore `path`: it matches, or (with check_parents) one of the
        directories between the root and it does. `.git` and everything in it count as ignored."""
        rel = self.rel_bytes(path)
        if not rel:
            return False
        parts = rel.split(b"/")
        if b".git" in parts:
            return True
        start = 0 if check_parents else len(parts) - 1
        for i in range(start, len(parts)):
            parent = b"/".join(parts[:i])
            if _decide(self._chain(parent), b"/".join(parts[: i + 1]), is_dir or i < len(parts) - 1):
                return True
        return False

    def rules_above(self, path: str | os.PathLike[str]) -> list[str]:
        """Rules for rg's --ignore-file when it searches the directory `path` with
        --no-ignore-parent --no-ignore-exclude: the workspace's exclude file, then the .gitignore
        rules of the directories from the root down to the parent of `path`, rewritten as
        root-relative lines in precedence order (lowest first)."""
        rel = self.rel_bytes(path)
        gi, ex = self._chain(rel.rpartition(b"/")[0]) if rel else ((), self._chain(b"")[1])
        out = []
        for rs in (*ex, *gi):
            base = os.fsdecode(rs.base)
            out.extend(rebase_line(line, base) for line in rs.lines)
        return out

    # -- walking ------------------------------------------------------------------------------
    def walk_rel(self, start: str | os.PathLike[str] | None = None) -> Iterator[bytes]:
        """Root-relative paths (bytes) of the regular files below `start` that are not ignored."""
        start_rel = self.rel_bytes(start) if start is not None else b""
        abs_start = self._abs(start_rel)
        if not os.path.isdir(abs_start):
            if os.path.isfile(abs_start):
                yield start_rel
            return
        root_b = self._root_b
        own = self._own_rules
        stack: list[tuple[bytes, _Chain]] = [
            (start_rel, self._chain(start_rel.rpartition(b"/")[0]) if start_rel else ((), ()))
        ]
        while stack:
            rel, chain = stack.pop()
            try:
                with os.scandir(root_b + b"/" + rel if rel else root_b) as it:
                    entries = list(it)
            except OSError:
                continue
            if any(e.name == b".gitignore" or e.name == b".git" for e in entries):
                gi, ex = own(rel)
                if gi is not None or ex is not None:
                    chain = (chain[0] + ((gi,) if gi else ()), chain[1] + ((ex,) if ex else ()))
            prefix = rel + b"/" if rel else b""
            has_rules = bool(chain[0] or chain[1])
            for e in entries:
                name = e.name
                if name == b".git":
                    continue
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                    if not is_dir and not e.is_file(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                child = prefix + name
                if has_rules and _decide(chain, child, is_dir):
                    continue
                if is_dir:
                    stack.append((child, chain))
                else:
                    yield child

    def walk_files(self, start: str | os.PathLike[str] | None = None) -> Iterator[Path]:
        """Absolute paths of the regular files below `start` (default: the root) that are not
        ignored. Hidden files are included, `.git` is skipped, ignored directories are not
        entered, symbolic links are not followed."""
        for rel in self.walk_rel(start):
            yield self.root / os.fsdecode(rel)


# -- ripgrep -g style globs ------------------------------------------------------------------------

_META = set("*?[]{}\\")


class PathGlob:
    """A glob with ripgrep `--glob` semantics, for file paths relative to a search root: without a
    `/` it matches the file name at any depth; with one (or a leading `/`) it matches the whole
    relative path; `**` crosses directories; `{a,b}` alternates; a leading `!` negates."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        text = pattern.strip()
        if not text:
            raise GlobError("empty glob")
        # A glob is never a comment: a leading '#' is literal.
        rule = parse_gitignore_line("\\" + text if text.startswith("#") else text, strict=True)
        if rule is None:
            raise GlobError("empty glob")
        self.negated = rule.whitelist
        self.dir_only = rule.dir_only
        self._re = re.compile(rule.regex)
        self.name_glob: str | None = None
        """A glob every matching file name must match (for rg --type-add), if one is known."""
        self.dir_prefix: tuple[str, ...] = ()
        """Literal leading directories every matching path starts with."""
        if self.negated or self.dir_only or not rule.body:
            return
        body = rule.body
        if not rule.anchored:
            self.name_glob = body if _usable_name_glob(body) else None
            return
        if "{" in body or "}" in body or "\\" in body:
            return
        comps = body.split("/")
        prefix = []
        for comp in comps[:-1]:
            if comp in ("", ".", "..") or any(c in _META for c in comp):
                break
            prefix.append(comp)
        self.dir_prefix = tuple(prefix)
        last = comps[-1]
        if _usable_name_glob(last) and "[" not in last and "]" not in last and "**" not in last:
            self.name_glob = last

    def matches(self, rel: bytes | str) -> bool:
        """Whether the file at `rel` (relative to the search root) is selected. A negated glob
        also drops the files below a directory it matches, as `rg -g '!dir'` does."""
        if isinstance(rel, str):
            rel = os.fsencode(rel)
        fullmatch = self._re.fullmatch
        if not self.negated:
            return not self.dir_only and fullmatch(rel) is not None
        if not self.dir_only and fullmatch(rel) is not None:
            return False
        cut = rel.rfind(b"/")
        while cut > 0:
            rel = rel[:cut]
            if fullmatch(rel) is not None:
                return False
            cut = rel.rfind(b"/")
        return True


    def select(self, rels: list[bytes], strip: int = 0) -> list[bytes]:
        """The paths of `rels` whose part after `strip` bytes `matches` (in bulk, for speed)."""
        if self.negated:
            return [r for r in rels if self.matches(r[strip:])]
        if self.dir_only:
            return []
        fullmatch = self._re.fullmatch
        if strip:
            return [r for r in rels if fullmatch(r, strip)]
        return [r for r in rels if fullmatch(r)]


def _usable_name_glob(g: str) -> bool:
    return bool(g) and g not in ("*", "**") and ":" not in g and g == g.strip()


def compile_glob(pattern: str) -> PathGlob:
    """Compile a ripgrep-style glob; raises GlobError with globset's reason when invalid."""
    return PathGlob(pattern)
