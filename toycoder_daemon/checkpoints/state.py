"""What a path held at one moment (a `State`), observed without following a final symlink, and the
content-addressed blob directory that keeps file contents for restoring.

Observing streams the file: it is hashed (sha256) in chunks while being copied into a temp file
beside the blobs, so content and hash come from the same read; a file over the size cap is still
hashed (conflicts stay detectable) but not kept, and the State says so (`stored` is False).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from toycoder_daemon.core.util.atomic import NEW_FILE_MODE, open_dir

CHUNK = 1 << 20
Kind = Literal["absent", "file", "link", "other"]


@dataclass(frozen=True)
class State:
    kind: Kind
    sha: str = ""
    """sha256 of the content (files only)."""
    mode: int = 0
    """Permission bits (files only)."""
    size: int = 0
    stored: bool = False
    """The content is in the blob directory (False for files over the size cap)."""
    target: str = ""
    """Where a symlink points (links only)."""
    dirs: tuple[str, ...] = field(default=())
    """For "absent": the parent directories that did not exist either (deepest first, relative to
    the workspace), so restoring the absence can remove what the agent's write created."""
    editor: bool = False
    """The text of an editor's buffer (the edit went through the editor), not of the disk: undo
    takes the agent's change back in the buffer (restore.py), never by writing this text to disk."""

    def same_content(self, other: State) -> bool:
        """Equal for conflict detection: kind and content; mode and bookkeeping aside (a chmod is
        not worth refusing an undo for)."""
        return (self.kind, self.sha, self.target) == (other.kind, other.sha, other.target)

    def same(self, other: State) -> bool:
        return self.same_content(other) and (self.kind != "file" or self.mode == other.mode)

    def to_json(self) -> dict[str, Any]:
        if self.kind == "absent":
            return {"k": "absent", "dirs": list(self.dirs)}
        if self.kind == "file":
            out: dict[str, Any] = {"k": "file", "sha": self.sha, "mode": self.mode, "size": self.size,
                                   "stored": self.stored}
            if self.editor:
                out["editor"] = True
            return out
        if self.kind == "link":
            return {"k": "link", "target": self.target}
        return {"k": "other"}

    @classmethod
    def from_json(cls, d: dict[str, Any], key: str) -> State:
        """The state of `key` (already checked by `confined`) as an index line has it. The index is
        untrusted (it may have been edited by hand): a mode keeps its permission bits only (no setuid,
        setgid or sticky bit is ever restored), a content id must be a sha256, and the directories an
        absence removes must be parents of `key` (ValueError otherwise)."""
        k = d.get("k")
        if k == "absent":
            dirs = tuple(str(x) for x in d.get("dirs") or ())
            parents = {p.as_posix() for p in PurePosixPath(key).parents} - {"."}
            if not set(dirs) <= parents:
                raise ValueError(f"directories {dirs!r} are not parents of {key!r}")
            return cls("absent", dirs=tuple(sorted(dirs, key=lambda x: -x.count("/"))))  # deepest first
        if k == "file":
            sha = str(d["sha"])
            if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
                raise ValueError(f"not a sha256: {sha!r}")
            return cls("file", sha=sha, mode=int(d["mode"]) & 0o777, size=int(d["size"]),
                       stored=bool(d["stored"]), editor=d.get("editor") is True)
        if k == "link":
            return cls("link", target=str(d["target"]))
        if k == "other":
            return cls("other")
        raise ValueError(f"unknown state kind {k!r}")


class Blobs:
    """Contents by sha256 under one directory (`<sha[:2]>/<sha>`, 0600 files in 0700 dirs), each
    written once: a second copy of the same content is the same file."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, sha: str) -> Path:
        if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
            raise ValueError(f"not a sha256: {sha!r}")
        return self.root / sha[:2] / sha

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def read(self, sha: str) -> bytes | None:
        """The content, or None when the blob is missing or does not match its hash (damaged)."""
        try:
            data = self.path(sha).read_bytes()
        except OSError:
            return None
        return data if hashlib.sha256(data).hexdigest() == sha else None

    def new_temp(self) -> tuple[int, str]:
        """A temporary file in the store (fd, path) for a content being written; `keep` makes it a blob."""
        self.root.mkdir(mode=0o700, exist_ok=True)  # its parent is the store's, made 0700 already
        return tempfile.mkstemp(dir=self.root, prefix=".in.", suffix=".tmp")  # mkstemp: 0600

    def keep(self, tmp: str, sha: str) -> None:
        """The temporary file from `new_temp` becomes the blob of `sha` (or goes, if that blob exists)."""
        final = self.path(sha)
        if final.exists():
            os.unlink(tmp)  # deduplicated: this content is already kept
            return
        final.parent.mkdir(mode=0o700, exist_ok=True)
        os.replace(tmp, final)


def _missing_dirs(p: Path, root: Path) -> tuple[str, ...]:
    out: list[str] = []
    d = p.parent
    while d != root and root in d.parents and not os.path.lexists(d):
        out.append(str(d.relative_to(root)))
        d = d.parent
    return tuple(out)


def observe(p: Path, root: Path, blobs: Blobs | None, cap: int) -> State:
    """The state of `p` now. With `blobs`, a regular file's content of at most `cap` bytes is kept
    there; without, it is only hashed (for comparing). `p` is walked from / without following a
    symlink (atomic.open_dir): a directory swapped for one raises SymlinkInPath, never reads outside."""
    try:
        parent = open_dir(p.parent)
    except FileNotFoundError:
        return State("absent", dirs=_missing_dirs(p, root))
    except NotADirectoryError:  # a parent is a file now: nothing can be at p
        return State("absent")
    try:
        try:
            st = os.stat(p.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return State("absent")
        if stat.S_ISLNK(st.st_mode):
            return State("link", target=os.readlink(p.name, dir_fd=parent))
        if not stat.S_ISREG(st.st_mode):
            return State("other")
        # O_NOFOLLOW: a symlink swapped in since the stat fails instead of being read through;
        # O_NONBLOCK: a FIFO swapped in does not hang the read (checked by fstat below)
        fd = os.open(p.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as src:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return State("other")
        os.set_blocking(fd, True)
        return _stream(src, stat.S_IMODE(st.st_mode), blobs, cap)


def of_content(data: bytes, p: Path, blobs: Blobs, cap: int) -> State:
    """The state of a text the editor holds for `p` (an open buffer): its content, with the mode of
    the file on disk (or a new file's)."""
    try:
        mode = stat.S_IMODE(os.stat(p).st_mode)
    except OSError:
        mode = NEW_FILE_MODE
    return replace(of_bytes(data, mode, blobs, cap), editor=True)


def of_bytes(data: bytes, mode: int, blobs: Blobs, cap: int) -> State:
    """The state of a file that would hold `data` (kept among the blobs, if within `cap`)."""
    return _stream(io.BytesIO(data), mode, blobs, cap)


def _stream(src: Any, mode: int, blobs: Blobs | None, cap: int) -> State:
    h = hashlib.sha256()
    size = 0
    tmp_fd, tmp = blobs.new_temp() if blobs is not None else (-1, "")
    out = os.fdopen(tmp_fd, "wb") if tmp_fd >= 0 else None
    try:
        while chunk := src.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
            if out is not None and size > cap:  # over the cap (it may have grown while read): hash only
                out.close()
                os.unlink(tmp)
                out = None
            if out is not None:
                out.write(chunk)
        sha = h.hexdigest()
        if out is None:
            return State("file", sha=sha, mode=mode, size=size, stored=False)
        out.flush()
        os.fsync(out.fileno())  # the index line naming this blob must never outlive its content
        out.close()
        assert blobs is not None
        blobs.keep(tmp, sha)
        return State("file", sha=sha, mode=mode, size=size, stored=True)
    except BaseException:
        if out is not None:
            out.close()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


def confined(key: str) -> str:
    """`key` when it names a path inside the workspace (relative, normalised: no "..", ".", empty or
    absolute part, no NUL); ValueError otherwise. Keys from the index and the journal are untrusted."""
    parts = key.split("/")
    if not key or "\0" in key or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a path inside the workspace: {key!r}")
    return key


def dumps(record: dict[str, Any]) -> bytes:
    """One index line. ASCII escapes keep non-UTF-8 file names (surrogate-escaped str) intact."""
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


@dataclass(frozen=True)
class Recorded:
    path: str
    problem: str | None = None
    """Why undo will not be able to bring this path back (e.g. too large to checkpoint), for the
    caller to report; None when the state is kept."""


@dataclass
class Turn:
    id: str
    kind: str
    created_at: float
    prompt: str
    before: dict[str, State] = field(default_factory=dict)
    """Each path's state before this turn's first write to it, in the order the turn touched them."""
    after: dict[str, State] = field(default_factory=dict)
    """Each path's state after this turn's last recorded write to it."""
    on_disk: bool = False
    restore_of: str = ""
    """For a restore: the turn it restored (what it undid, or for a restore of a restore, redid)."""
