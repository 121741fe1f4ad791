"""glob_search / grep_search through the registry, with rg and with the pure-Python fallback;
the gitignore matcher and globs of ignore.py; list_directory hiding ignored entries."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from helpers import AllowAll
from waiting import scaled, wait_until_async

from toycoder_daemon.config import ToolsConfig
from toycoder_daemon.tools import search, search_rg
from toycoder_daemon.tools.base import ToolContext
from toycoder_daemon.tools.files import list_directory
from toycoder_daemon.tools.ignore import GlobError, IgnoreMatcher, compile_glob
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.search import glob_search, grep_search
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


@pytest.fixture(params=["rg", "python"])
def backend(request, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with rg, then with the fallback; each proves the other backend stays unused."""

    def must_not_run(*a, **k):
        raise AssertionError(f"the {request.param} backend must not use the other one")

    if request.param == "python":
        monkeypatch.setenv("TOYCODER_NO_RG", "1")
        monkeypatch.setattr(search_rg, "_run_rg", must_not_run)
    else:
        monkeypatch.delenv("TOYCODER_NO_RG", raising=False)
        assert search.find_rg() is not None, "rg not found: the ripgrep wheel puts it next to the interpreter"
        monkeypatch.setattr(search, "_py_files", must_not_run)
        monkeypatch.setattr(search, "_py_grep", must_not_run)
    return request.param


# -- glob_search ----------------------------------------------------------------------------------

async def test_glob_everything_is_gitignore_aware(tree: Path, backend: str) -> None:
    # nested .gitignore, negation (keep.log, keep.gen.ts), dir-only (build/ but not the file src/build),
    # anchored (/dist but not src/dist; src's /local/ but not src/lib/local), .git/info/exclude,
    # trailing spaces, an escaped '#' (a pattern, not a comment), hidden files, and nothing from .git.
    assert (await out(tree, "glob_search", pattern="**")).splitlines() == VISIBLE


async def test_glob_basics(tree: Path, backend: str) -> None:
    assert await out(tree, "glob_search", pattern="*.py") == "main.py\npkg/nested/deep/file.py\nvendor/v.py"
    assert (await out(tree, "glob_search", pattern="src/**/*.ts")).splitlines() == [
        "src/app.ts", "src/dist/x.ts", "src/keep.gen.ts", "src/lib/deep/more.ts", "src/lib/local/y.ts", "src/lib/util.ts"]
    assert await out(tree, "glob_search", pattern="file.py") == "pkg/nested/deep/file.py"  # a name at any depth
    assert await out(tree, "glob_search", pattern="src/*.ts") == "src/app.ts\nsrc/keep.gen.ts"  # '*' stays in one directory
    assert await out(tree, "glob_search", pattern="*.{md,json}") == ".config/settings.json\nREADME.md\ndocs/ünïcode.md"
    assert await out(tree, "glob_search", pattern="!*.ts", path="src") == "src/.gitignore\nsrc/build"


async def test_glob_relative_to_path(tree: Path, backend: str) -> None:
    # A glob with a '/' is relative to `path`; output paths stay workspace-relative.
    assert await out(tree, "glob_search", pattern="lib/*.ts", path="src") == "src/lib/util.ts"
    assert await out(tree, "glob_search", pattern="*.ts", path="src/lib") == \
        "src/lib/deep/more.ts\nsrc/lib/local/y.ts\nsrc/lib/util.ts"
    # The root's rules apply when searching a sub-directory (src/debug.log matches the root's *.log).
    assert (await out(tree, "glob_search", pattern="*", path="src")).splitlines() == \
        [p for p in VISIBLE if p.startswith("src/")]


async def test_rules_above_the_workspace_do_not_apply(tree: Path, backend: str) -> None:
    (tree.parent / ".gitignore").write_text("*.md\nsrc/\n")  # e.g. a dotfiles repository around it
    assert (await out(tree, "glob_search", pattern="**")).splitlines() == VISIBLE
    assert await out(tree, "glob_search", pattern="*.md", path="docs") == "docs/ünïcode.md"


async def test_glob_hidden_included_git_excluded(tree: Path, backend: str) -> None:
    assert await out(tree, "glob_search", pattern=".*") == ".env\n.gitignore\nsrc/.gitignore"
    assert await out(tree, "glob_search", pattern="config") == "no files match 'config'"
    res = await call(tree, "glob_search", pattern="*", path=".git")
    assert res.status == "failed" and ".git" in res.output


async def test_glob_cap_and_no_match(tmp_path: Path, backend: str) -> None:
    for i in range(250):
        write(tmp_path, f"d/f{i:03}.txt", "x")
    lines = (await out(tmp_path, "glob_search", pattern="*.txt")).splitlines()
    assert len(lines) == 201 and lines[:2] == ["d/f000.txt", "d/f001.txt"] and lines[199] == "d/f199.txt"
    assert lines[-1] == "... and 50 more (narrow the pattern)"
    assert await out(tmp_path, "glob_search", pattern="*.nope") == "no files match '*.nope'"
    assert await out(tmp_path, "glob_search", pattern="*.nope", path="d") == "no files match '*.nope' in d"
    assert await out(tmp_path, "glob_search", pattern="missing/**/*.txt") == "no files match 'missing/**/*.txt'"


async def test_glob_invalid(tree: Path, backend: str) -> None:
    res = await call(tree, "glob_search", pattern="src/[abc")
    assert res.status == "failed" and res.output == "error: invalid glob 'src/[abc': unclosed character class; missing ']'"


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


async def test_grep_format_order_ignores_binary(tree: Path, backend: str) -> None:
    # Sorted by path then line; ignored files, .git and the binary data.bin left out.
    assert await out(tree, "grep_search", pattern="needle") == GREP_NEEDLE


async def test_grep_case(tree: Path, backend: str) -> None:
    assert await out(tree, "grep_search", pattern="NEEDLE") == "src/lib/util.ts:1: // NEEDLE upper"
    got = (await out(tree, "grep_search", pattern="nEEdle", case_sensitive=False, path="README.md")).splitlines()
    assert got == ["README.md:1: Needle in the README", "README.md:2: needle lower"]


async def test_grep_glob_and_path(tree: Path, backend: str) -> None:
    assert await out(tree, "grep_search", pattern="needle", glob="*.ts", path="src/lib") == "src/lib/local/y.ts:1: needle"
    assert (await out(tree, "grep_search", pattern="needle", glob="lib/**", path="src")) == "src/lib/local/y.ts:1: needle"
    assert (await out(tree, "grep_search", pattern="needle", glob="src/*.ts")).splitlines() == [
        "src/app.ts:1: export const needle = 1;", "src/keep.gen.ts:1: needle"]
    excluded = (await out(tree, "grep_search", pattern="needle", glob="!src")).splitlines()
    assert len(excluded) == 8 and not any(line.startswith("src/") for line in excluded)
    # Root rules apply below: src/debug.log (root *.log) and src/a.gen.ts (src's *.gen.ts) stay out.
    sub = await out(tree, "grep_search", pattern="needle", path="src")
    assert sub == "\n".join(line for line in GREP_NEEDLE.splitlines() if line.startswith("src/"))
    assert await out(tree, "grep_search", pattern="^def", path="pkg/nested/deep/file.py") == \
        "pkg/nested/deep/file.py:1: def f():"


async def test_grep_unicode_and_dash_pattern(tree: Path, backend: str) -> None:
    assert await out(tree, "grep_search", pattern=r"caf\w \w+ ün") == "docs/ünïcode.md:1: café needle ünïcode"
    write(tree, "opts.txt", "run with --force please\n")
    assert await out(tree, "grep_search", pattern="--force") == "opts.txt:1: run with --force please"


async def test_grep_binary_file_skipped(tree: Path, backend: str) -> None:
    assert await out(tree, "grep_search", pattern="needle", path="data.bin") == "no matches for 'needle' in data.bin"
    # A NUL byte far from the match still makes the file binary (rg notices it after printing the match).
    write(tree, "late.txt", b"needle early\n" + b"x" * 200_000 + b"\n\x00\n")
    assert "late.txt" not in await out(tree, "grep_search", pattern="needle")
    write(tree, "utf16.txt", b"\xff\xfe" + "needle in utf-16\n".encode("utf-16-le"))
    write(tree, "bom.txt", b"\xef\xbb\xbfneedle after a BOM\r\n")
    assert await out(tree, "grep_search", pattern="^needle (in|after)") == \
        "bom.txt:1: needle after a BOM\nutf16.txt:1: needle in utf-16"


async def test_grep_caps(tmp_path: Path, backend: str) -> None:
    write(tmp_path, "a.txt", "".join(f"hit {i}\n" for i in range(1, 1006)))
    write(tmp_path, "b.txt", "hit\n")
    got = (await out(tmp_path, "grep_search", pattern="hit", max_results=3)).splitlines()
    assert got == ["a.txt:1: hit 1", "a.txt:2: hit 2", "a.txt:3: hit 3", "... 1003 more matches not shown (narrow the search)"]
    got = (await out(tmp_path, "grep_search", pattern="hit", max_results=50_000)).splitlines()
    assert len(got) == 1001 and got[-1] == "... 6 more matches not shown (narrow the search)"  # hard cap 1000
    write(tmp_path, "long.txt", "hit " + "é" * 5000 + "\n")
    line = await out(tmp_path, "grep_search", pattern="hit", path="long.txt")
    assert line == "long.txt:1: hit " + "é" * 296 + " [...]"
    small = ToolsConfig(output_max_bytes=1000)  # the output budget also bounds the lines
    got = (await out(tmp_path, "grep_search", pattern="hit", settings=small)).splitlines()
    assert 50 < len(got) < 100 and got[-1].endswith(" more matches not shown (narrow the search)")


async def test_grep_errors_and_no_match(tree: Path, backend: str) -> None:
    res = await call(tree, "grep_search", pattern="foo(")
    assert res.status == "failed" and res.output.startswith("error: invalid regex 'foo(': ")
    assert ("unclosed group" if backend == "rg" else "missing )") in res.output
    assert await out(tree, "grep_search", pattern="zzz_nothing") == "no matches for 'zzz_nothing'"
    assert await out(tree, "grep_search", pattern="zzz", glob="*.py", path="src") == \
        "no matches for 'zzz' in src in files matching '*.py'"
    res = await call(tree, "grep_search", pattern="x", path="nope")
    assert res.status == "failed" and res.output == "error: not found: nope"


async def test_paths_confined(tree: Path, backend: str) -> None:
    (tree.parent / "outside").mkdir()
    (tree.parent / "outside" / "o.txt").write_text("needle\n")
    os.symlink(tree.parent / "outside", tree / "escape")
    for name, args in (("grep_search", {"pattern": "needle"}), ("glob_search", {"pattern": "*"})):
        for bad in ("../outside", str(tree.parent / "outside"), "escape", "/etc"):
            res = await call(tree, name, **args, path=bad)
            assert res.status == "failed" and "outside the workspace" in res.output, (name, bad)
    # A symlink inside the tree is not followed by a search either.
    assert "o.txt" not in await out(tree, "grep_search", pattern="needle")


# -- the two backends agree ------------------------------------------------------------------------

QUERIES = [
    ("glob_search", {"pattern": "**"}),
    ("glob_search", {"pattern": "*.ts", "path": "src"}),
    ("glob_search", {"pattern": "**/deep/**"}),
    ("glob_search", {"pattern": "{src,pkg}/**/*.{py,ts}"}),
    ("glob_search", {"pattern": "!**/*.ts"}),
    ("grep_search", {"pattern": "needle"}),
    ("grep_search", {"pattern": "NEEDLE", "case_sensitive": False}),
    ("grep_search", {"pattern": r"\bneedle\b", "path": "src"}),
    ("grep_search", {"pattern": "ünï", "glob": "*.md"}),
    ("grep_search", {"pattern": "^[a-z]+ = ", "glob": "!*.md"}),
    ("grep_search", {"pattern": "e", "max_results": 4}),
    ("grep_search", {"pattern": r"\Aneedle"}),  # rg anchors \A at each line, like the per-line fallback
    ("grep_search", {"pattern": "needle", "path": "src/lib", "glob": "local/*"}),
]


async def test_rg_and_fallback_agree(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert search.find_rg() is not None
    write(tree, "src/lib/crlf.ts", "a = 1\r\nneedle = 2\r\n")
    write(tree, "src/lib/wide.ts", "needle " + "x" * 2000 + "\n")
    results = {}
    for backend in ("rg", "python"):
        if backend == "python":
            monkeypatch.setenv("TOYCODER_NO_RG", "1")
        results[backend] = [await call(tree, name, **args) for name, args in QUERIES]
    for (name, args), a, b in zip(QUERIES, results["rg"], results["python"]):
        assert a.status == "completed" and "no " not in a.output[:3], (name, args, a.output)
        assert a == b, (name, args)


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


# -- ignore.py directly -------------------------------------------------------------------------------

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
    ("f?o", "f/o", False, False),
    ("[a-c]x", "bx", False, True),
    ("[!a-c]x", "bx", False, False),
    ("\\#x", "#x", False, True),
    ("#x", "#x", False, False),                  # a comment
    ("\\!x", "!x", False, True),
    ("x  ", "x", False, True),                   # trailing spaces trimmed
    ("x\\ ", "x ", False, True),                 # unless escaped
    ("*.{a,b}", "q.b", False, True),             # alternation, as ripgrep does
])
def test_gitignore_lines(tmp_path: Path, rules: str, path: str, is_dir: bool, ignored: bool) -> None:
    (tmp_path / ".gitignore").write_text(rules + "\n")
    assert IgnoreMatcher(tmp_path).is_ignored(tmp_path / path, is_dir) is ignored


def test_matcher_nested_and_parents(tree: Path) -> None:
    m = IgnoreMatcher(tree)
    assert m.is_ignored(tree / "build" / "out.py", False)  # inside an ignored directory
    assert not m.is_ignored(tree / "build" / "out.py", False, check_parents=False)
    assert m.is_ignored(tree / "src" / "lib" / "b.gen.ts", False) and not m.is_ignored(tree / "src" / "keep.gen.ts", False)
    assert m.is_ignored(tree / ".git" / "config", False)
    assert sorted(p.relative_to(tree).as_posix() for p in m.walk_files()) == VISIBLE
    assert sorted(p.name for p in m.walk_files(tree / "src" / "lib")) == ["more.ts", "util.ts", "y.ts"]


@pytest.mark.parametrize("glob, yes, no", [
    ("*.py", ["a.py", "x/y/a.py"], ["a.pyc", "a.py/x"]),
    ("src/**/*.ts", ["src/a.ts", "src/x/y/a.ts"], ["a/src/a.ts", "src/a.tsx"]),
    ("/a.py", ["a.py"], ["x/a.py"]),
    ("a/*", ["a/b"], ["a/b/c"]),
    ("**/b/*.md", ["b/x.md", "a/b/x.md"], ["b/c/x.md"]),
    ("!*.md", ["a.py"], ["x/a.md"]),
    ("!build", ["a/x.py"], ["build/x.py", "a/build/x/y.py"]),
])
def test_globs(glob: str, yes: list[str], no: list[str]) -> None:
    g = compile_glob(glob)
    assert [p for p in yes + no if g.matches(p)] == yes


def test_glob_errors() -> None:
    for bad in ("[abc", "{a,b", "{a,{b}}", "[z-a]", "a\\"):
        with pytest.raises(GlobError):
            compile_glob(bad)


# -- rg process handling -------------------------------------------------------------------------------

async def test_cancel_kills_rg(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "rg.pid"
    fake = tmp_path / "fake-rg"
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 30\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(search, "find_rg", lambda: str(fake))
    task = asyncio.ensure_future(call(tree, "grep_search", pattern="needle"))
    await wait_until_async(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the fake rg to start")
    pid = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, scaled(5))  # without the kill, this would wait for `sleep 30`
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: no orphan


def test_collectors_stay_bounded() -> None:
    top = search._TopPaths(10)
    for i in range(20_000, 0, -1):
        top.add(f"p{i:05}")
        assert len(top.items) <= 4 * 10 + 1001
    assert top.result() == [f"p{i:05}" for i in range(1, 11)] and top.total == 20_000
    hits = search._Hits(10)
    for i in range(5_000, 0, -1):
        hits.add_file(f"f{i:04}", [b"1:x", b"2:x", (3, "x")], 3)
        assert hits.kept <= 2 * 10 + 1000 + 3
    shown, total = hits.result()
    assert total == 15_000 and [(p, n) for p, n, _ in shown][:4] == [("f0001", 1), ("f0001", 2), ("f0001", 3), ("f0002", 1)]
    assert len(shown) == 10
    forward = search._Hits(10)
    for i in range(1, 5_001):
        forward.add_file(f"f{i:04}", [b"7:y"], 1)
    assert forward.cutoff is not None and len(forward.files) < 1100
    shown, total = forward.result()
    assert total == 5_000 and [p for p, _, _ in shown] == [f"f{i:04}" for i in range(1, 11)]


def test_rg_is_found_next_to_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOYCODER_NO_RG", raising=False)
    found = search.find_rg()
    assert found is not None and os.access(found, os.X_OK)
    monkeypatch.setenv("TOYCODER_NO_RG", "1")
    assert search.find_rg() is None


async def test_cancel_stops_the_fallback_thread(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOYCODER_NO_RG", "1")
    walked: list[bytes] = []
    walk_ended = threading.Event()
    real_walk_rel = IgnoreMatcher.walk_rel

    def slow_walk_rel(self, start=None):
        try:
            for rel in real_walk_rel(self, start):
                walked.append(rel)
                time.sleep(0.05)
                yield rel
        finally:  # exhausted, or closed when the thread stops iterating
            walk_ended.set()

    monkeypatch.setattr(IgnoreMatcher, "walk_rel", slow_walk_rel)
    task = asyncio.ensure_future(call(tree, "grep_search", pattern="needle"))
    await wait_until_async(lambda: walked, what="the fallback walk to start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    seen = len(walked)
    await wait_until_async(walk_ended.is_set, what="the fallback thread to end its walk")
    assert 0 < len(walked) <= seen + 1 < len(VISIBLE)  # the thread stopped walking


async def test_rg_that_cannot_run_falls_back(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "find_rg", lambda: str(tree / "no-such-rg"))
    assert await out(tree, "grep_search", pattern="needle") == GREP_NEEDLE
    assert (await out(tree, "glob_search", pattern="**")).splitlines() == VISIBLE
