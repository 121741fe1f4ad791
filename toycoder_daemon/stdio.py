"""The stdio channel, without pygls: frame reading (bounded), frame writing, and a fast first answer.

Importing pygls and lsprotocol costs ~0.4 s. So the daemon starts reading stdin at once, answers
`initialize` from here with the capabilities it always has, and only then imports the server.
pygls is then set up for that initialize without a wire message (pygls_adapter.py). Frames that
arrive meanwhile wait in the Inbox, in order. Tests check the fast answer equals pygls' answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from . import __version__, safejson
from .modes import available_modes

log = logging.getLogger(__name__)

MAX_CONTENT_LENGTH = 32 * 1024 * 1024
"""Bigger frames are refused (-32600) and their bodies skipped."""
MAX_SKIP = 1 << 30
"""A refused body up to this size is read past; beyond it the length is not believed."""
MAX_HEADER_LINE = 8192

Deliver = Callable[[Any, Any], None]


_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)


def _skip(stdin: BinaryIO, n: int) -> bool:
    """Read and drop n bytes without holding them; False at EOF."""
    while n > 0:
        chunk = stdin.read(min(n, 1 << 20))
        if not chunk:
            return False
        n -= len(chunk)
    return True


def read_frames(stdin: BinaryIO, deliver: Deliver, gate: Callable[[], object] = lambda: None) -> None:
    """Blocking loop (run on a thread): deliver(body, None) per frame, deliver(None, problem) for a
    refused frame, and deliver(None, None) once at EOF. `gate()` is called before each frame is read
    and may block (the face's backpressure, Inbox.wait_input).

    A frame refused for its size has its body skipped (read and dropped in chunks), so the next
    frame is read normally. When a header cannot be trusted at all (not a number, absurdly large),
    the reader resynchronises on the next Content-Length header, found anywhere in a line (a
    skipped body does not end with a newline, so the next header is glued to it)."""
    try:
        while True:
            gate()
            length: int | None = None
            skip = 0
            refused: str | None = None
            headers = False  # a header line other than Content-Length was read for this frame
            while True:  # headers
                line = stdin.readline(MAX_HEADER_LINE)
                if not line:
                    return
                found = _CONTENT_LENGTH.search(line)
                if found:
                    value = found.group(1).strip()
                    length, skip, refused = None, 0, None
                    try:
                        n = int(value)
                    except ValueError:
                        refused = f"bad Content-Length {value[:40]!r}"
                        continue
                    if 0 <= n <= MAX_CONTENT_LENGTH:
                        length = n
                    elif n > MAX_CONTENT_LENGTH:
                        refused = f"Content-Length {n} is over the limit of {MAX_CONTENT_LENGTH} bytes"
                        skip = n if n <= MAX_SKIP else 0
                    else:
                        refused = f"negative Content-Length {n}"
                    continue
                if line.endswith(b"\n") and not line.strip():
                    if length is not None or refused:
                        break
                    if headers:  # a header block without a length: answered, not waited on forever
                        refused = "no Content-Length header"
                        break
                    continue  # stray blank line between frames
                headers = True  # another header (Content-Type), or garbage while resynchronising
            if refused:
                deliver(None, refused)
                if skip and not _skip(stdin, skip):
                    return
                continue
            assert length is not None
            body = stdin.read(length)
            if len(body) < length:
                return
            deliver(body, None)
    except (OSError, ValueError) as e:
        log.info("stdin closed: %s", e)
    finally:
        deliver(None, None)


class Inbox:
    """Frames from the reader thread, held in order until the event loop attaches."""

    def __init__(self, fd: int | None = None) -> None:
        self._cond = threading.Condition()
        self._pending: list[tuple[Any, Any]] = []
        self._target: Deliver | None = None
        self.fd = fd
        """The input the reader thread reads, if it has an fd."""
        self.gate: Callable[[int | None], object] | None = None
        """Set by the face writing to an Outbox (Outbox.wait_input): the reader thread calls it with
        `fd` before it reads each frame, so a client that reads no answers is held back by its own
        pipe. Only ever called on that thread: the event loop never waits for the client."""

    def wait_input(self) -> None:
        gate = self.gate
        if gate is not None:
            gate(self.fd)

    def put(self, body: Any, problem: Any) -> None:
        with self._cond:
            target = self._target
            if target is None:
                self._pending.append((body, problem))
                self._cond.notify_all()
                return
        target(body, problem)

    def first(self) -> tuple[Any, Any]:
        """Block until the first frame (or EOF) is here; it stays queued."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._pending))
            return self._pending[0]

    def attach(self, target: Deliver) -> None:
        """From now on frames go to `target`; the queued ones first, in order."""
        with self._cond:
            for item in self._pending:
                target(*item)
            self._pending = []
            self._target = target


def start_reader(stdin: BinaryIO) -> Inbox:
    try:
        fd: int | None = stdin.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both: an in-memory stream
        fd = None
    inbox = Inbox(fd)
    threading.Thread(target=read_frames, args=(stdin, inbox.put, inbox.wait_input), name="stdin-reader",
                     daemon=True).start()
    return inbox


def encode_frame(message: Any) -> bytes:
    body = json.dumps(safejson.scrub_tree(message)).encode()  # lone surrogates go out as U+FFFD
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def pygls_frame(message: dict[str, Any]) -> bytes:
    """One frame as pygls' JsonRPCProtocol._send_data writes it (headers and JSON alike): the LSP
    face's answers that do not go through pygls are written so."""
    body = json.dumps(message)  # ASCII (ensure_ascii), so its length in characters is in bytes
    return (f"Content-Length: {len(body)}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
            f"{body}").encode()


class FrameWriter:
    """The one writer of the protocol channel (a dup of the original fd 1): pygls' frames and ours.
    Each write is one whole frame, so frames never interleave."""

    def __init__(self, out: BinaryIO):
        self._out = out

    def write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    def send(self, message: Any) -> None:
        self.write(encode_frame(message))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._out.close()


def capabilities(client: dict[str, Any]) -> dict[str, Any]:
    """What pygls computes for our handlers: fixed, but for the will-save flags it echoes as false."""
    sync: dict[str, Any] = {"openClose": True, "change": 1, "save": False}
    client_sync = (client.get("textDocument") or {}).get("synchronization") or {}
    for flag in ("willSave", "willSaveWaitUntil"):
        if client_sync.get(flag) is not None:
            sync[flag] = False
    return {
        "positionEncoding": "utf-16",
        "textDocumentSync": sync,
        "executeCommandProvider": {"commands": []},
        "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
        "experimental": {"toycoder": {"protocolVersion": 1, "availableModes": available_modes()}},
    }


def fast_initialize(body: Any, out: BinaryIO) -> bool:
    """Answer a plain, well-formed `initialize` at once; False leaves it to pygls."""
    if not isinstance(body, bytes) or os.environ.get("TOYCODER_NO_FAST_START"):
        return False
    try:
        msg = json.loads(body)
    except ValueError:
        return False
    params = msg.get("params") if isinstance(msg, dict) else None
    if not (isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and msg.get("method") == "initialize"
            and isinstance(msg.get("id"), (int, str)) and not isinstance(msg.get("id"), bool)
            and isinstance(params, dict) and isinstance(params.get("capabilities"), dict)):
        return False
    general = params["capabilities"].get("general")
    encodings = (general.get("positionEncodings") if isinstance(general, dict) else None) or ["utf-16"]
    if encodings[0] != "utf-16":
        return False  # pygls would negotiate another encoding: let it answer
    try:
        caps = capabilities(params["capabilities"])
    except (AttributeError, TypeError):  # odd shapes: pygls validates them and answers
        return False
    reply = {"id": msg["id"], "jsonrpc": "2.0",
             "result": {"capabilities": caps, "serverInfo": {"name": "toycoder-daemon", "version": __version__}}}
    out.write(encode_frame(reply))
    out.flush()
    return True
