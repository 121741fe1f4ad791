"""What one search covers, said in rg's terms.

rg does all the matching (ignore rules and globs); this module only rewrites text for it:

* Ignore rules rg must not look for itself. The tools run rg from the workspace root with
  `--no-ignore-parent` (a dotfiles repository with `*` in ~/.gitignore would hide everything) and
  `--no-ignore-exclude` (a nested repository's .git/info/exclude does not count, as with git). What
  rg then misses, the workspace's .git/info/exclude and, when it starts in a sub-directory, the
  .gitignore files of the directories above it, goes to rg as one `--ignore-file`, each line
  rewritten to be relative to the workspace root, lowest precedence first (`rules_above`).
* The caller's glob, relative to the searched directory, rewritten the same way for `rg --glob`,
  plus what kind of filter it is (`GlobFilter`): rg's `--glob` overrides ignore rules, so a
  positive glob must not be handed to rg alone (see rg_runs.py).

The line syntax follows ripgrep 14.1's `ignore` crate (the pinned `ripgrep` wheel).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from toycoder_daemon.tools.files.safe_fs import read_if_regular

# Rust's char::is_whitespace (what the ignore crate's `trim_end` strips), not Python's str.isspace.
_RUST_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
           "\u2028\u2029\u202f\u205f\u3000"


class Rule(NamedTuple):
    """One gitignore line, split as the ignore crate splits it."""

    body: str
    """The glob without `!`, the leading `/` and the trailing `/`."""
    whitelist: bool
    dir_only: bool
    anchored: bool
    """Relative to the file's directory (else it matches a name at any depth)."""


def parse_rule(line: str) -> Rule | None:
    """A gitignore line; None for comments and blank lines."""
    if line.startswith("#"):
        return None
    if not line.endswith("\\ "):
        line = line.rstrip(_RUST_WS)
    if not line:
        return None
    whitelist = absolute = False
    if line.startswith(("\\!", "\\#")):
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
    return Rule(line, whitelist, dir_only, absolute or "/" in line)


def _glob_literal(text: str) -> str:
    return "".join(c if c.isalnum() or c in "/._-" else "\\" + c for c in text)


def rebase(rule: Rule, base: str) -> str:
    """The same rule written for the workspace root instead of the directory `base`
    (workspace-relative, "" = the root)."""
    prefix = "/" + (_glob_literal(base) + "/" if base else "")
    if not rule.body:  # "!" alone: everything below base
        text = prefix + "**"
    elif rule.anchored:
        text = prefix + rule.body
    else:
        text = prefix + "**/" + rule.body
    return ("!" if rule.whitelist else "") + text + ("/" if rule.dir_only else "")


def _rules_of(path: Path, base: str) -> list[str]:
    data = read_if_regular(path)  # a FIFO named .gitignore must not block the search
    if data is None:
        return []
    out = []
    for i, raw in enumerate(data.split(b"\n")):
        raw = raw.removesuffix(b"\r")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            break  # rg stops reading an ignore file at its first line that is not UTF-8
        rule = parse_rule(text.lstrip("\ufeff") if i == 0 else text)
        if rule is not None:
            out.append(rebase(rule, base))
    return out


def rules_above(root: Path, rel_dir: str, *, own: bool = False) -> list[str]:
    """The rules rg misses when it searches the directory `rel_dir` ("" = the root): the
    workspace's exclude file, then the .gitignore files from the root down to the parent of
    `rel_dir` (with `own`, to `rel_dir` itself), as root-relative lines, lowest precedence first."""
    out = _rules_of(root / ".git" / "info" / "exclude", "")
    parts = rel_dir.split("/") if rel_dir else []
    for i in range(len(parts) + own):
        d = "/".join(parts[:i])
        out += _rules_of(root / d / ".gitignore", d)
    return out


# -- the caller's glob --------------------------------------------------------------------------

_META = set("*?[]{}\\")


def _name_glob(g: str) -> bool:
    """Whether rg's --type-add takes `g` as a file-name glob (its syntax is NAME:GLOB)."""
    return g not in ("", "*", "**") and ":" not in g and g == g.strip()


@dataclass(frozen=True)
class GlobFilter:
    """A glob (rg `--glob` syntax, relative to the searched directory) ready for rg."""

    text: str
    """As the caller wrote it, stripped."""
    rg_glob: str
    """For `rg --glob`, relative to the workspace root."""
    negated: bool
    """A leading `!`: rg may apply it alone (an exclusion never re-includes ignored files)."""
    name_glob: str | None
    """When the glob only constrains the file name: the glob for rg's `--type-add`, which (unlike
    `--glob`) narrows the files ignore rules leave, so rg can apply it alone."""
    dirs: tuple[str, ...] = ()
    """Literal leading directories of a path glob: every match lies below them."""
    last_name: str | None = None
    """A file-name glob every match of a path glob also matches (its last component)."""


def glob_filter(glob: str, base: str) -> GlobFilter | None:
    """`glob` relative to the directory `base`; None for an empty glob. rg reports invalid ones."""
    text = glob.strip()
    # A glob is never a comment: a leading '#' is literal.
    rule = parse_rule("\\" + text if text.startswith("#") else text)
    if rule is None:
        return None
    out = GlobFilter(text, rebase(rule, base), rule.whitelist, None)
    if rule.whitelist or rule.dir_only:
        return out
    # "**/NAME" (or "/**/NAME") below the searched directory is NAME at any depth.
    body = rule.body
    while body.startswith("**/"):
        body = body[3:]
    any_depth = not rule.anchored if body == rule.body else "/" not in body
    if any_depth:
        return GlobFilter(text, out.rg_glob, False, body if _name_glob(body) else None)
    if any(c in rule.body for c in "{}\\"):  # alternatives may span directories: no shortcuts
        return out
    *comps, last = rule.body.split("/")
    dirs: list[str] = []
    for comp in comps:
        if comp in ("", ".", "..") or any(c in _META for c in comp):
            break
        dirs.append(comp)
    name = last if _name_glob(last) and "**" not in last and not any(c in last for c in "[]") else None
    return GlobFilter(text, out.rg_glob, False, None, tuple(dirs), name)
