"""Path confinement: every file tool resolves paths through here."""

from __future__ import annotations

import os
from pathlib import Path

from toycoder_daemon.tools.escape import escape_name, unescape_name


class OutsideWorkspace(Exception):
    pass


def _norm(text: str) -> str:
    return text.replace("\r\n", "\n").lstrip("\ufeff").rstrip("\n")


def unsaved_text(buffer: str | None, disk_text: str | None) -> str | None:
    """An editor's text of a file when it differs from the disk's (line endings and a final newline
    aside: editors report those differently), else None."""
    if buffer is None or (disk_text is not None and _norm(buffer) == _norm(disk_text)):
        return None
    return buffer


class Workspace:
    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self.extra_roots: tuple[Path, ...] = ()
        """More roots treated like the root (a session's additionalDirectories: `with_roots`)."""
        self.open_documents: dict[Path, str] = {}
        """Unsaved editor text of open buffers, by resolved path (fed by textDocument/did*)."""
        self.document_versions: dict[Path, tuple[int, str]] = {}
        """The editor's version of an open buffer with the text it numbers: it holds only while
        open_documents still has that text (the daemon's own write after an applied edit makes it
        unknown until the editor's didChange arrives)."""

    def set_document(self, p: Path, text: str, version: int | None) -> None:
        """An open buffer's text as the editor reports it (didOpen/didChange), with its version."""
        self.open_documents[p] = text
        if version is None:
            self.document_versions.pop(p, None)
        else:
            self.document_versions[p] = (version, text)

    def with_roots(self, extra: tuple[str, ...] | list[str]) -> Workspace:
        """This workspace with `extra` roots (absolute directories) treated like its root: the same
        open documents, one session's view. Itself when there are none."""
        if not extra:
            return self
        view = Workspace.__new__(Workspace)
        view.__dict__.update(self.__dict__)  # the documents are shared, not copied
        view.extra_roots = tuple(Path(e).resolve() for e in extra if Path(e).resolve() != self.root)
        return view

    def root_of(self, p: Path) -> Path | None:
        """The root `p` (resolved) is in: the workspace root first, else an extra root, else None."""
        for root in (self.root, *self.extra_roots):
            if p == root or root in p.parents:
                return root
        return None

    def close_document(self, p: Path) -> None:
        self.open_documents.pop(p, None)
        self.document_versions.pop(p, None)

    def document_version(self, p: Path, text: str) -> int | None:
        """The editor's version of `p` when its buffer's text is `text` (what an edit is made
        against), else None: unknown, or the buffer moved on."""
        known = self.document_versions.get(p)
        if known is None or known[1] != text or self.open_documents.get(p) != text:
            return None
        return known[0]

    def document_state(self, p: Path) -> tuple[str | None, int | None]:
        """An open buffer's text and version as last reported (None, None: not open)."""
        text = self.open_documents.get(p)
        return text, (self.document_version(p, text) if text is not None else None)

    def resolve(self, path: str, *, for_write: bool = False) -> Path:
        """Resolve `path` (relative to the root, or absolute) with symlinks followed, refusing
        anything that lands outside the root. For a path that does not exist yet, the deepest
        existing parent is resolved, so a symlinked parent cannot smuggle a write outside."""
        if not isinstance(path, str) or not path.strip():
            raise OutsideWorkspace("empty path")
        if "\x00" in path:
            raise OutsideWorkspace("path contains a NUL byte")
        if ("\\x" in path or "\\u" in path) and not os.path.lexists(self._candidate(path)):
            path = unescape_name(path)  # a name shown escaped (tools/escape.py) names its characters
        try:
            os.fsencode(path)
        except UnicodeEncodeError:  # a lone surrogate that stands for no byte
            raise OutsideWorkspace(f"'{escape_name(path)}' is not a possible file name") from None
        try:
            resolved = self._candidate(path).resolve()  # strict=False: resolves the existing prefix
        except (OSError, RuntimeError) as e:  # a symlink loop
            raise OutsideWorkspace(f"'{escape_name(path)}' cannot be resolved: {e}") from None
        root = self.root_of(resolved)
        if root is None:
            also = f" and its additional directories ({', '.join(map(str, self.extra_roots))})" if self.extra_roots else ""
            raise OutsideWorkspace(f"'{escape_name(path)}' is outside the workspace {self.root}{also}")
        # any repository's .git (submodules, vendored repos; any case, for macOS)
        if for_write and any(part.lower() == ".git" for part in resolved.relative_to(root).parts):
            raise OutsideWorkspace(f"'{escape_name(path)}' is inside a .git directory, which tools may not write")
        return resolved

    def _candidate(self, path: str) -> Path:
        raw = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
        return raw if raw.is_absolute() else self.root / raw

    def unsaved(self, p: Path, disk_text: str | None) -> str | None:
        """The editor's text of `p` when it differs from the disk's, else None (unsaved_text)."""
        return unsaved_text(self.open_documents.get(p), disk_text)

    def contains(self, p: Path) -> bool:
        return self.root_of(p) is not None

    def relative(self, p: Path) -> str:
        try:
            rel = p.relative_to(self.root)
        except ValueError:
            return str(p)
        return str(rel) if str(rel) != "." else "."
