"""An incremental `text/event-stream` decoder: bytes in, the data of each complete event out.

Follows the SSE rules that matter for chat streams: lines end in LF, CRLF or CR (also when a
CRLF is split across reads), `:` starts a comment, several `data:` lines join with LF, a blank
line dispatches the event, and an event cut off by the end of the stream is never dispatched.
Other fields (`event:`, `id:`, `retry:`) are ignored: chat completions do not use them.
"""

from __future__ import annotations


class SSEDecoder:
    def __init__(self) -> None:
        self._rest = b""  # the unfinished last line
        self._skip_lf = False  # the last read ended in CR: an LF first in the next one is its pair
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of every event this chunk completes, in order."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        buf = self._rest + chunk if self._rest else chunk
        if b"\r" in buf:
            ends_in_cr = buf.endswith(b"\r")
            lines = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            self._rest = lines.pop()  # b"" when the buffer ended in a line break
            self._skip_lf = ends_in_cr
        else:
            lines = buf.split(b"\n")
            self._rest = lines.pop()
        events: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            elif line == b"data":
                data.append(b"")
            # comments (":...") and the other fields are skipped
        return events

    def pending(self) -> bool:
        """True if the bytes so far end inside an event: a cut mid-line or before its blank line."""
        return bool(self._rest or self._data)
