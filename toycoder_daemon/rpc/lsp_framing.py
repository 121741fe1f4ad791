"""The LSP face's framing as bytes: the bounded frame reader and the one frame writer.

pygls' own reader trusts any Content-Length; faces/lsp/transport.py feeds it through `read_frames` instead.
Every frame the face writes has the one header form of `frame`: pygls hands FrameWriter bare bodies
(`set_writer(..., include_headers=False)`, its public switch) and FrameWriter heads them as it heads
our own answers, so no frame carries pygls' Content-Type line beside ours without it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

from toycoder_daemon.core.util import safejson

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
    and may block (the face's backpressure, Outbox.wait_input).

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


def frame(body: bytes) -> bytes:
    """The one header form (Content-Type is optional and its default is the only one allowed)."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def encode_frame(message: Any) -> bytes:
    return frame(json.dumps(safejson.scrub_tree(message)).encode())  # lone surrogates go out as U+FFFD


class Stream(Protocol):
    def write(self, data: bytes, /) -> Any: ...
    def flush(self) -> Any: ...


class FrameWriter:
    """The one writer of the protocol channel (an Outbox, or a stream in tests): pygls' messages (it
    is pygls' writer, given bare bodies: `attach`) and ours. Each write is one whole frame, so frames
    never interleave."""

    def __init__(self, out: Stream):
        self._out = out

    def attach(self, protocol: Any) -> None:
        """Become pygls' writer (a JsonRPCProtocol): it writes bodies only, this adds the header."""
        protocol.set_writer(self, include_headers=False)

    def write(self, body: bytes) -> None:
        self._out.write(frame(body))
        self._out.flush()

    def send(self, message: Any) -> None:
        self._out.write(encode_frame(message))
        self._out.flush()

    def close(self) -> None:
        """pygls closes its writer on `exit`; the stream stays open until what is queued is written
        (transport.serve ends with that)."""
