"""glob_search / grep_search through the registry (ripgrep does the matching): gitignore rules,
globs, output format and caps; list_directory hiding ignored entries; rg process handling."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from helpers import AllowAll
from waiting import scaled, wait_until_async

from toycoder_daemon.config.model import ToolsConfig
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files.read import list_directory
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.search import rg
from toycoder_daemon.tools.search import rg_runs as search_rg
from toycoder_daemon.tools.search.results import Hits, TopPaths
from toycoder_daemon.tools.search.tools import glob_search, grep_search
from toycoder_daemon.tools.workspace import Workspace


async def call(ws: Path, name: str, settings=None, **args):
    reg = ToolRegistry()
    for t in (glob_search, grep_search, list_directory):
        reg.register(t)
    return await reg.dispatch(name, json.dumps(args), ToolContext(Workspace(ws), AllowAll(), "c1", settings=settings))


async def out(ws: Path, name: str, **args) -> str:
    res = await call(ws, name, **args)
    assert res.status == "completed", res.output
    return res.output


def write(root: Path, rel: str, data: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        p.write_bytes(data)
    else:
        p.write_text(data, encoding="utf-8")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    files = {
        ".gitignore": "# build output\n*.log\n!keep.log\nbuild/\n/dist\nsecret*.txt\ntrailing.txt   \n\\#hash.txt\n",
        ".git/config": "needle in git\n",
        ".git/info/exclude": "local-only.txt\n",
        ".env": "API=needle\n",
        ".config/settings.json": '{"needle": true}\n',
        "README.md": "Needle in the README\nneedle lower\n",
        "main.py": "import os\n# needle here\n",
        "app.log": "needle\n",
        "keep.log": "needle kept\n",
        "local-only.txt": "needle\n",
        "secret1.txt": "needle\n",
        "trailing.txt": "needle\n",
        "#hash.txt": "needle\n",
        "build/out.py": "needle\n",
        "dist/bundle.js": "needle\n",
        "src/.gitignore": "*.gen.ts\n!keep.gen.ts\n/local/\n",
        "src/app.ts": "export const needle = 1;\n",
        "src/build": "a file named build: needle\n",
        "src/dist/x.ts": "needle\n",
        "src/debug.log": "needle\n",
        "src/a.gen.ts": "needle\n",
        "src/keep.gen.ts": "needle\n",
        "src/local/x.ts": "needle\n",
        "src/lib/util.ts": "// NEEDLE upper\n",
        "src/lib/b.gen.ts": "needle\n",
        "src/lib/local/y.ts": "needle\n",
        "src/lib/deep/more.ts": "x\n",
        "pkg/nested/deep/file.py": "def f():\n    return 'needle'\n",
        "docs/ünïcode.md": "café needle ünïcode\n",
        "data.bin": b"needle\x00\x01\x02",
        "src/lib/local-only.txt": "needle\n",  # the root's .git/info/exclude applies at any depth
        "vendor/.git/info/exclude": "*.py\n",  # a nested repository's exclude file is not read (as git)
        "vendor/v.py": "needle = 'vendored'\n",
        "empty.txt": "",
    }
    for rel, data in files.items():
        write(root, rel, data)
    return root


VISIBLE = [
    ".config/settings.json", ".env", ".gitignore", "README.md", "data.bin", "docs/ünïcode.md",
    "empty.txt", "keep.log", "main.py", "pkg/nested/deep/file.py", "src/.gitignore", "src/app.ts", "src/build",
    "src/dist/x.ts", "src/keep.gen.ts", "src/lib/deep/more.ts", "src/lib/local/y.ts", "src/lib/util.ts", "vendor/v.py",
]
"""Every file of `tree` that is not ignored, sorted."""


# -- glob_search ----------------------------------------------------------------------------------

async def test_glob_everything_is_gitignore_aware(tree: Path) -> None:
    # nested .gitignore, negation (keep.log, keep.gen.ts), dir-only (build/ but not the file src/build),
    # anchored (/dist but not src/dist; src's /local/ but not src/lib/local), .git/info/exclude,
    # trailing spaces, an escaped '#' (a pattern, not a comment), hidden files, and nothing from .git.
    assert (await out(tree, "glob_search", pattern="**")).splitlines() == VISIBLE


async def test_glob_basics(tree: Path) -> None:
    assert await out(tree, "glob_search", pattern="*.py") == "main.py\npkg/nested/deep/file.py\nvendor/v.py"
    assert (await out(tree, "glob_search", pattern="src/**/*.ts")).splitlines() == [
        "src/app.ts", "src/dist/x.ts", "src/keep.gen.ts", "src/lib/deep/more.ts", "src/lib/local/y.ts",
        "src/lib/util.ts"]
    assert await out(tree, "glob_search", pattern="file.py") == "pkg/nested/deep/file.py"  # a name at any depth
    # '*' stays in one directory
    assert await out(tree, "glob_search", pattern="src/*.ts") == "src/app.ts\nsrc/keep.gen.ts"
    assert await out(tree, "glob_search", pattern="*.{md,json}") == ".config/settings.json\nREADME.md\ndocs/ünïcode.md"
    assert await out(tree, "glob_search", pattern="!*.ts", path="src") == "src/.gitignore\nsrc/build"


async def test_glob_relative_to_path(tree: Path) -> None:
    # A glob with a '/' is relative to `path`; output paths stay workspace-relative.
    assert await out(tree, "glob_search", pattern="lib/*.ts", path="src") == "src/lib/util.ts"
    assert await out(tree, "glob_search", pattern="*.ts", path="src/lib") == \
        "src/lib/deep/more.ts\nsrc/lib/local/y.ts\nsrc/lib/util.ts"
    # The root's rules apply when searching a sub-directory (src/debug.log matches the root's *.log).
    assert (await out(tree, "glob_search", pattern="*", path="src")).splitlines() == \
        [p for p in VISIBLE if p.startswith("src/")]


async def test_rules_above_the_workspace_do_not_apply(tree: Path) -> None:
    (tree.parent / ".gitignore").write_text("*.md\nsrc/\n")  # e.g. a dotfiles repository around it
    assert (await out(tree, "glob_search", pattern="**")).splitlines() == VISIBLE
    assert await out(tree, "glob_search", pattern="*.md", path="docs") == "docs/ünïcode.md"


async def test_glob_hidden_included_git_excluded(tree: Path) -> None:
    assert await out(tree, "glob_search", pattern=".*") == ".env\n.gitignore\nsrc/.gitignore"
    assert await out(tree, "glob_search", pattern="config") == "no files match 'config'"
    res = await call(tree, "glob_search", pattern="*", path=".git")
    assert res.status == "failed" and ".git" in res.output


async def test_glob_cap_and_no_match(tmp_path: Path) -> None:
    for i in range(250):
        write(tmp_path, f"d/f{i:03}.txt", "x")
    lines = (await out(tmp_path, "glob_search", pattern="*.txt")).splitlines()
    assert len(lines) == 201 and lines[:2] == ["d/f000.txt", "d/f001.txt"] and lines[199] == "d/f199.txt"
    assert lines[-1] == "... and 50 more (narrow the pattern)"
    assert await out(tmp_path, "glob_search", pattern="*.nope") == "no files match '*.nope'"
    assert await out(tmp_path, "glob_search", pattern="*.nope", path="d") == "no files match '*.nope' in d"
    assert await out(tmp_path, "glob_search", pattern="missing/**/*.txt") == "no files match 'missing/**/*.txt'"


async def test_glob_invalid(tree: Path) -> None:
    res = await call(tree, "glob_search", pattern="src/[abc")
    assert res.status == "failed"
    assert res.output == "error: invalid glob 'src/[abc': unclosed character class; missing ']'"


# -- grep_search ----------------------------------------------------------------------------------

GREP_NEEDLE = """\
.config/settings.json:1: {"needle": true}
.env:1: API=needle
README.md:2: needle lower
docs/ünïcode.md:1: café needle ünïcode
keep.log:1: needle kept
main.py:2: # needle here
pkg/nested/deep/file.py:2:     return 'needle'
src/app.ts:1: export const needle = 1;
src/build:1: a file named build: needle
src/dist/x.ts:1: needle
src/keep.gen.ts:1: needle
src/lib/local/y.ts:1: needle
vendor/v.py:1: needle = 'vendored'"""


async def test_grep_format_order_ignores_binary(tree: Path) -> None:
    # Sorted by path then line; ignored files, .git and the binary data.bin left out.
    assert await out(tree, "grep_search", pattern="needle") == GREP_NEEDLE


async def test_grep_case(tree: Path) -> None:
    assert await out(tree, "grep_search", pattern="NEEDLE") == "src/lib/util.ts:1: // NEEDLE upper"
    got = (await out(tree, "grep_search", pattern="nEEdle", case_sensitive=False, path="README.md")).splitlines()
    assert got == ["README.md:1: Needle in the README", "README.md:2: needle lower"]


async def test_grep_glob_and_path(tree: Path) -> None:
    y = "src/lib/local/y.ts:1: needle"
    assert await out(tree, "grep_search", pattern="needle", glob="*.ts", path="src/lib") == y
    assert (await out(tree, "grep_search", pattern="needle", glob="lib/**", path="src")) == y
    assert (await out(tree, "grep_search", pattern="needle", glob="src/*.ts")).splitlines() == [
        "src/app.ts:1: export const needle = 1;", "src/keep.gen.ts:1: needle"]
    excluded = (await out(tree, "grep_search", pattern="needle", glob="!src")).splitlines()
    assert len(excluded) == 8 and not any(line.startswith("src/") for line in excluded)
    # Root rules apply below: src/debug.log (root *.log) and src/a.gen.ts (src's *.gen.ts) stay out.
    sub = await out(tree, "grep_search", pattern="needle", path="src")
    assert sub == "\n".join(line for line in GREP_NEEDLE.splitlines() if line.startswith("src/"))
    assert await out(tree, "grep_search", pattern="^def", path="pkg/nested/deep/file.py") == \
        "pkg/nested/deep/file.py:1: def f():"


async def test_grep_unicode_and_dash_pattern(tree: Path) -> None:
    assert await out(tree, "grep_search", pattern=r"caf\w \w+ ün") == "docs/ünïcode.md:1: café needle ünïcode"
    write(tree, "opts.txt", "run with --force please\n")
    assert await out(tree, "grep_search", pattern="--force") == "opts.txt:1: run with --force please"


async def test_grep_binary_file_skipped(tree: Path) -> None:
    assert await out(tree, "grep_search", pattern="needle", path="data.bin") == "no matches for 'needle' in data.bin"
    # A NUL byte far from the match still makes the file binary (rg notices it after printing the match).
    write(tree, "late.txt", b"needle early\n" + b"x" * 200_000 + b"\n\x00\n")
    assert "late.txt" not in await out(tree, "grep_search", pattern="needle")
    write(tree, "utf16.txt", b"\xff\xfe" + "needle in utf-16\n".encode("utf-16-le"))
    write(tree, "bom.txt", b"\xef\xbb\xbfneedle after a BOM\r\n")
    assert await out(tree, "grep_search", pattern="^needle (in|after)") == \
        "bom.txt:1: needle after a BOM\nutf16.txt:1: needle in utf-16"


async def test_grep_caps(tmp_path: Path) -> None:
    write(tmp_path, "a.txt", "".join(f"hit {i}\n" for i in range(1, 1006)))
    write(tmp_path, "b.txt", "hit\n")
    got = (await out(tmp_path, "grep_search", pattern="hit", max_results=3)).splitlines()
    assert got == ["a.txt:1: hit 1", "a.txt:2: hit 2", "a.txt:3: hit 3",
                   "... 1003 more matches not shown (narrow the search)"]
    got = (await out(tmp_path, "grep_search", pattern="hit", max_results=50_000)).splitlines()
    assert len(got) == 1001 and got[-1] == "... 6 more matches not shown (narrow the search)"  # hard cap 1000
    write(tmp_path, "long.txt", "hit " + "é" * 5000 + "\n")
    line = await out(tmp_path, "grep_search", pattern="hit", path="long.txt")
    assert line == "long.txt:1: hit " + "é" * 296 + " [...]"
    small = ToolsConfig(output_max_bytes=1000)  # the output budget also bounds the lines
    got = (await out(tmp_path, "grep_search", pattern="hit", settings=small)).splitlines()
    assert 50 < len(got) < 100 and got[-1].endswith(" more matches not shown (narrow the search)")


async def test_grep_errors_and_no_match(tree: Path) -> None:
    res = await call(tree, "grep_search", pattern="foo(")
    assert res.status == "failed" and res.output.startswith("error: invalid regex 'foo(': ")
    assert "unclosed group" in res.output
    assert await out(tree, "grep_search", pattern="zzz_nothing") == "no matches for 'zzz_nothing'"
    assert await out(tree, "grep_search", pattern="zzz", glob="*.py", path="src") == \
        "no matches for 'zzz' in src in files matching '*.py'"
    res = await call(tree, "grep_search", pattern="x", path="nope")
    assert res.status == "failed" and res.output == "error: not found: nope"


async def test_paths_confined(tree: Path) -> None:
    (tree.parent / "outside").mkdir()
    (tree.parent / "outside" / "o.txt").write_text("needle\n")
    os.symlink(tree.parent / "outside", tree / "escape")
    for name, args in (("grep_search", {"pattern": "needle"}), ("glob_search", {"pattern": "*"})):
        for bad in ("../outside", str(tree.parent / "outside"), "escape", "/etc"):
            res = await call(tree, name, **args, path=bad)
            assert res.status == "failed" and "outside the workspace" in res.output, (name, bad)
    # A symlink inside the tree is not followed by a search either.
    assert "o.txt" not in await out(tree, "grep_search", pattern="needle")


# -- list_directory ----------------------------------------------------------------------------------

async def test_list_directory_hides_ignored(tree: Path) -> None:
    lines = (await out(tree, "list_directory")).splitlines()
    names = {line.split()[1] for line in lines[1:-1]}
    assert names == {".config/", "docs/", "pkg/", "src/", "vendor/", ".env", ".gitignore", "README.md", "data.bin",
                     "empty.txt", "keep.log", "main.py"}
    assert lines[0] == "./ (12 entries)"
    # #hash.txt, app.log, build/, dist/, local-only.txt, secret1.txt, trailing.txt
    assert lines[-1] == "(7 ignored entries not shown)"
    src = (await out(tree, "list_directory", path="src")).splitlines()
    assert src[-1] == "(3 ignored entries not shown)"  # a.gen.ts, debug.log, local/
    assert (await out(tree, "list_directory", path="src/lib")).splitlines()[-1] == "(2 ignored entries not shown)"
    assert "file  keep.gen.ts  (7 bytes)" in src and not any("a.gen.ts" in line for line in src)
    assert await out(tree, "list_directory", path="pkg") == "pkg/ (1 entries)\ndir   nested/"
    write(tree, "only/x.log", "")
    assert await out(tree, "list_directory", path="only") == "only/ (0 entries)\n(1 ignored entry not shown)"


# -- ignore rules and globs, one at a time ------------------------------------------------------------

@pytest.mark.parametrize("rules, path, is_dir, ignored", [
    ("foo", "a/b/foo", False, True),
    ("/foo", "a/foo", False, False),
    ("a/foo", "x/a/foo", False, False),          # a middle slash anchors
    ("foo/", "foo", False, False),               # directories only
    ("foo/", "a/foo", True, True),
    ("**/foo/bar", "x/y/foo/bar", False, True),
    ("abc/**", "abc", True, False),              # trailing /** is the inside only
    ("abc/**", "abc/x/y", False, True),
    ("a/**/b", "a/b", False, True),
    ("a/**/b", "a/x/y/b", False, True),
    ("*.py\n!keep.py", "keep.py", False, False),
    ("!keep.py\n*.py", "keep.py", False, True),  # the last matching line wins
    ("f?o", "fxo", False, True),
    ("[a-c]x", "bx", False, True),
    ("[!a-c]x", "bx", False, False),
    ("\\#x", "#x", False, True),
    ("#x", "#x", False, False),                  # a comment
    ("\\!x", "!x", False, True),
    ("x  ", "x", False, True),                   # trailing spaces trimmed
    ("x\\ ", "x ", False, True),                 # unless escaped
    ("*.{a,b}", "q.b", False, True),             # alternation, as ripgrep does
])
async def test_gitignore_lines(tmp_path: Path, rules: str, path: str, is_dir: bool, ignored: bool) -> None:
    (tmp_path / ".gitignore").write_text(rules + "\n")
    (tmp_path / path).mkdir(parents=True) if is_dir else write(tmp_path, path, "x")
    parent, _, name = path.rpartition("/")
    listing = await out(tmp_path, "list_directory", path=parent or ".")
    shown = [line.split(maxsplit=1)[1].split("  (")[0].rstrip("/") for line in listing.splitlines()[1:]
             if line.startswith(("file ", "dir "))]
    assert (name not in shown) is ignored, listing
    if not is_dir:  # the searches apply the same rules
        assert (path not in (await out(tmp_path, "glob_search", pattern="**")).splitlines()) is ignored


async def test_rules_in_a_sub_directory_and_below_an_ignored_one(tree: Path) -> None:
    # Searching a sub-directory applies the rules of the directories above it, rebased.
    assert await out(tree, "glob_search", pattern="*.ts", path="src/lib") == \
        "src/lib/deep/more.ts\nsrc/lib/local/y.ts\nsrc/lib/util.ts"
    write(tree, "src/lib/deep/x.gen.ts", "")  # src's *.gen.ts, two levels down
    write(tree, "src/lib/deep/z.log", "")  # the root's *.log
    assert await out(tree, "glob_search", pattern="*", path="src/lib/deep") == "src/lib/deep/more.ts"
    # Asking for an ignored directory itself wins (as `rg PATH`); the rules still apply inside it.
    write(tree, "build/sub/a.log", "")
    assert await out(tree, "glob_search", pattern="*", path="build") == "build/out.py"
    assert await out(tree, "list_directory", path="build") == \
        "build/ (2 entries)\ndir   sub/\nfile  out.py  (7 bytes)"


@pytest.mark.parametrize("glob, yes, no", [
    ("*.py", ["a.py", "x/y/a.py"], ["a.pyc", "b.py/x"]),
    ("src/**/*.ts", ["src/a.ts", "src/x/y/a.ts"], ["a/src/a.ts", "src/a.tsx"]),
    ("/a.py", ["a.py"], ["x/a.py"]),
    ("a/*", ["a/b"], ["a/c/d"]),
    ("**/b/*.md", ["a/b/x.md", "b/x.md"], ["b/c/x.md"]),
    ("!*.md", ["a.py"], ["x/a.md"]),
    ("!build", ["a/x.py"], ["build/x.py", "a/build/x/y.py"]),
    ("**/test_*.py", ["t/test_a.py", "test_b.py"], ["t/a_test.py"]),
    ("#h*", ["#hash"], ["hash"]),                # a glob is never a comment
    ("src/", [], ["src/a.ts"]),                  # directories only: no file matches
])
async def test_globs(tmp_path: Path, glob: str, yes: list[str], no: list[str]) -> None:
    for rel in yes + no:
        write(tmp_path, rel, "needle\n")
    got = await out(tmp_path, "glob_search", pattern=glob)
    assert got.splitlines() == sorted(yes) or (not yes and got.startswith("no files match"))
    got = await out(tmp_path, "grep_search", pattern="needle", glob=glob)
    assert [line.split(":")[0] for line in got.splitlines()] == sorted(yes) or (not yes and got.startswith("no "))


async def test_glob_never_reincludes_ignored(tree: Path) -> None:
    # rg's own --glob would list these: the tools keep to the files the ignore rules leave.
    assert await out(tree, "glob_search", pattern="*.log") == "keep.log"
    assert await out(tree, "glob_search", pattern="build/**") == "no files match 'build/**'"
    assert await out(tree, "glob_search", pattern="{app,keep}.log") == "keep.log"
    assert await out(tree, "grep_search", pattern="needle", glob="src/*") == \
        "src/app.ts:1: export const needle = 1;\nsrc/build:1: a file named build: needle\nsrc/keep.gen.ts:1: needle"
    # A glob with a file path: relative to the file's directory.
    assert await out(tree, "grep_search", pattern="needle", path="src/app.ts", glob="*.ts") == \
        "src/app.ts:1: export const needle = 1;"
    assert await out(tree, "grep_search", pattern="needle", path="src/app.ts", glob="src/*.ts") == \
        "no matches for 'needle' in src/app.ts in files matching 'src/*.ts'"
    assert await out(tree, "grep_search", pattern="needle", path="app.log", glob="!*.py") == "app.log:1: needle"
    os.symlink(tree / "src", tree / "lnk")  # a path glob's literal directory is not followed through a link
    assert await out(tree, "glob_search", pattern="lnk/*.ts") == "no files match 'lnk/*.ts'"


async def test_grep_path_glob_when_the_listing_comes_last(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # grep reports before the glob-less listing is in: what it found waits, and is then filtered.
    grep_done = asyncio.Event()
    real_run, real_listing = search_rg.run_rg, search_rg.Walk.load_listing

    async def run_rg(args, *rest, **kw):
        try:
            return await real_run(args, *rest, **kw)
        finally:
            if "-e" in args:
                grep_done.set()

    async def load_listing(self):
        await grep_done.wait()
        await real_listing(self)

    monkeypatch.setattr(search_rg, "run_rg", run_rg)
    monkeypatch.setattr(search_rg.Walk, "load_listing", load_listing)
    assert await out(tree, "grep_search", pattern="needle", glob="src/*") == \
        "src/app.ts:1: export const needle = 1;\nsrc/build:1: a file named build: needle\nsrc/keep.gen.ts:1: needle"


@pytest.mark.parametrize("bad, reason", [
    ("[abc", "unclosed character class; missing ']'"),
    ("{a,b", "unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?)"),
    ("{a,{b}}", "nested alternate groups are not allowed"),
    ("[z-a]", "invalid range; 'z' > 'a'"),
    ("a\\", "dangling '\\'"),
    ("x/[abc", "unclosed character class; missing ']'"),
])
async def test_glob_errors(tree: Path, bad: str, reason: str) -> None:
    for name, args in (("glob_search", {"pattern": bad}), ("grep_search", {"pattern": "x", "glob": bad})):
        res = await call(tree, name, **args)
        assert res.status == "failed" and res.output == f"error: invalid glob {bad!r}: {reason}", (name, res.output)


# -- rg process handling -------------------------------------------------------------------------------

async def test_cancel_kills_rg(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "rg.pid"
    fake = tmp_path / "fake-rg"
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(rg, "find_rg", lambda: str(fake))
    task = asyncio.ensure_future(call(tree, "grep_search", pattern="needle"))
    await wait_until_async(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the fake rg to start")
    pid = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, scaled(5))  # without the kill, this would wait for `sleep 30`
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: no orphan


def test_collectors_stay_bounded() -> None:
    top = TopPaths(10)
    for i in range(20_000, 0, -1):
        top.add(f"p{i:05}")
        assert len(top.items) <= 4 * 10 + 1001
    assert top.result() == [f"p{i:05}" for i in range(1, 11)] and top.total == 20_000
    hits = Hits(10)
    for i in range(5_000, 0, -1):
        hits.add_file(f"f{i:04}", [b"1:x", b"2:x", b"3:x"], 3)
        assert hits.kept <= 2 * 10 + 1000 + 3
    shown, total = hits.result()
    assert total == 15_000
    assert [(p, n) for p, n, _ in shown][:4] == [("f0001", 1), ("f0001", 2), ("f0001", 3), ("f0002", 1)]
    assert len(shown) == 10
    forward = Hits(10)
    for i in range(1, 5_001):
        forward.add_file(f"f{i:04}", [b"7:y"], 1)
    assert forward.cutoff is not None and len(forward.files) < 1100
    shown, total = forward.result()
    assert total == 5_000 and [p for p, _, _ in shown] == [f"f{i:04}" for i in range(1, 11)]


def test_rg_is_found_next_to_the_interpreter() -> None:
    found = rg.find_rg()
    assert found is not None and os.access(found, os.X_OK)
    assert Path(found) == Path(sys.executable).parent / "rg"  # the ripgrep wheel's, not one on PATH


async def test_missing_rg_is_a_clear_error(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rg, "find_rg", lambda: None)
    for name, args in (("grep_search", {"pattern": "needle"}), ("glob_search", {"pattern": "*"}),
                       ("list_directory", {})):
        res = await call(tree, name, **args)
        assert res.status == "failed" and "ripgrep (rg) is not installed" in res.output, (name, res.output)
    monkeypatch.setattr(rg, "find_rg", lambda: str(tree / "no-such-rg"))
    res = await call(tree, "grep_search", pattern="needle")
    assert res.status == "failed" and res.output.startswith("error: cannot run ripgrep (")
    assert "no-such-rg" in res.output
