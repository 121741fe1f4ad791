"""Recording a face's frames, both directions, and comparing them with a golden transcript.

test_golden_transcripts.py drives the real daemon subprocess with these pieces:

- `Launch`: how a daemon is started (environment overrides; None unsets a variable), and `Place`, one
  launch's own world: a HOME that holds the config (found there, as for a user) and the sessions, a
  cwd, and a fake key in the environment (`OPENAI_API_KEY`, read through `${OPENAI_API_KEY}` in the
  config). Two launches never share any of them.
- `Client`: writes the client's frames and reads the daemon's, recording both in the order they
  happened, under named steps. `expect` waits (with a deadline) for a daemon frame, so a script can be
  sequential: it sends its next frame only once the frames it waits for are in.
- `Run`: a scenario's daemons, started one after another into one log (a session made by one
  daemon and loaded by the next).
- `normalise` and `compare`: the transcript made independent of the launch and the run, then compared
  as text with tests/golden/transcripts/<face>/<scenario>.json; UPDATE_GOLDEN=1 rewrites the file.

Normalised, and nothing else: the launch's paths (workspace, cwd, HOME, config; as given and resolved,
so in file URIs too) become <ws>, <cwd>, <home>, <config>; session ids become <session-N> in order of
appearance (inside turn ids too); strings that are an ISO 8601 time become <time>; the package version
in the server's self-description becomes <version> (after checking it is ours). Frames are compared as
JSON values written with sorted keys (key order and spacing are the serialiser's, not the contract),
as text, so 1 and 1.0, or true and 1, still differ. A string that still holds the run's temporary
directory after that fails the test by itself: a path the daemon should not have shown, or one to add
here.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import os
import re
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from waiting import scaled, wait_until_async
from warm_helpers import served_warm

from toycoder_daemon import __version__
from toycoder_daemon.testing.fake_llm import FakeLLM

GOLDEN = Path(__file__).parent
Frame = dict[str, Any]


# ---- where and how a daemon runs ----------------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """How the daemon is started: environment overrides (None unsets a variable) and the command
    (the face's arguments follow it); the cwd is the launch's `Place`."""

    name: str
    env: Mapping[str, str | None]
    command: tuple[str, ...] = (sys.executable, "-m", "toycoder_daemon")

    @property
    def warm(self) -> bool:
        return self.env.get("TOYCODER_WARM") == "1"


# Everything a launch needs is found from its HOME, as for a user's own start: not from the test
# suite's XDG directories or data dir (conftest's isolated_env), nor from a variable naming a config;
# and no launch finds the user's runtime dir (a launch that wants one names it in its env).
_UNSET = ("TOYCODER_CONFIG", "TOYCODER_DATA_DIR", "OPENAI_BASE_URL", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
          "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")


@dataclass
class Place:
    """One launch's own world under `root`: HOME (holding the config and the data), cwd, key."""

    root: Path
    workspace: Path
    home: Path = field(init=False)
    cwd: Path = field(init=False)
    config: Path = field(init=False)
    key: str = field(default_factory=lambda: f"sk-test-{secrets.token_hex(12)}")

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.cwd = self.root / "cwd"
        self.config = self.home / ".config" / "toycoder" / "config.yaml"
        self.config.parent.mkdir(parents=True)
        self.cwd.mkdir()

    def write_config(self, llm: FakeLLM) -> None:
        """auto_title off (every model request is scripted); no retries (a retry would be a frame)."""
        self.config.write_text(
            'providers:\n  openai:\n    api_keys: ["${OPENAI_API_KEY}"]\n'
            f"    base_url: {llm.base_url}\n    models: {{default: fake-model, fast: fake-fast}}\n"
            "default_provider: openai\n"
            "agent: {max_steps: 8, max_retries: 0, auto_title: false}\n")

    def env(self, launch: Launch) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _UNSET}
        env.update(HOME=str(self.home), OPENAI_API_KEY=self.key)
        for var, value in launch.env.items():
            if value is None:
                env.pop(var, None)
            else:
                env[var] = value
        return env

    def placeholders(self) -> list[tuple[str, str]]:
        """(path, placeholder), each path as given and resolved, the longest first (a path inside
        another is replaced before it)."""
        pairs = {}
        for path, name in ((self.workspace, "<ws>"), (self.cwd, "<cwd>"), (self.home, "<home>"),
                           (self.config, "<config>")):
            for form in (path, path.resolve()):
                pairs[str(form)] = name
        return sorted(pairs.items(), key=lambda kv: -len(kv[0]))


# ---- the faces' framing -------------------------------------------------------------------------


class Face:
    name = ""
    args: tuple[str, ...] = ()

    def encode(self, body: bytes) -> bytes:
        raise NotImplementedError

    async def read(self, out: asyncio.StreamReader) -> Frame | None:
        """The next frame from the daemon (None at EOF); a malformed one fails the test."""
        raise NotImplementedError


class LspFace(Face):
    name = "lsp"
    CONTENT_TYPE = "application/vscode-jsonrpc; charset=utf-8"  # the only charset the base protocol allows

    def encode(self, body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    async def read(self, out: asyncio.StreamReader) -> Frame | None:
        headers: dict[str, str] = {}
        while (line := await out.readline()) != b"\r\n":
            if not line:
                assert not headers, f"EOF inside a header block: {headers}"
                return None
            assert line.endswith(b"\r\n"), f"a header line not ended by CRLF: {line!r}"
            name, sep, value = line.decode("ascii").partition(":")
            assert sep and name.lower() not in headers, f"a bad or repeated header: {line!r}"
            headers[name.lower()] = value.strip()
        assert set(headers) <= {"content-length", "content-type"}, headers
        assert headers.get("content-type", self.CONTENT_TYPE) == self.CONTENT_TYPE, headers
        return dict(json.loads(await out.readexactly(int(headers["content-length"]))))


class AcpFace(Face):
    name = "acp"
    args = ("--acp",)

    def encode(self, body: bytes) -> bytes:
        return body + b"\n"

    async def read(self, out: asyncio.StreamReader) -> Frame | None:
        line = await out.readline()
        if not line:
            return None
        assert line.endswith(b"\n") and line.strip(), f"not one JSON line: {line!r}"
        return dict(json.loads(line))


FACES: dict[str, Face] = {"lsp": LspFace(), "acp": AcpFace()}


# ---- the client ---------------------------------------------------------------------------------


class Client:
    """Sends the client's frames and reads the daemon's, recording both in the order they happened in
    `log` (which the clients of the daemons a scenario starts one after another share)."""

    def __init__(self, proc: asyncio.subprocess.Process, face: Face, log: list[dict[str, Any]]) -> None:
        self.proc, self.face = proc, face
        self.log = log  # {"step": name}, {"->": frame}, {"<-": frame}, {"exit": code}
        self.frames: list[Frame] = []  # this daemon's
        # expect() looks at the frames since the step began that no earlier expect() returned: two
        # frames waited for in one step may come in either order, and then the diff shows it.
        self._step_start = 0
        self._taken: set[int] = set()
        self._arrived = asyncio.Event()
        self._ids = 0
        self._stderr = bytearray()
        self._reader = asyncio.ensure_future(self._read())
        self._stderr_reader = asyncio.ensure_future(self._drain_stderr())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while (msg := await self.face.read(self.proc.stdout)) is not None:
                self.log.append({"<-": msg})
                self.frames.append(msg)
                self._arrived.set()
        finally:
            self._arrived.set()  # a waiter sees the failure (or the EOF) at once

    async def _drain_stderr(self) -> None:  # a full pipe would block the daemon
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self._stderr += chunk

    # ---- sending

    def step(self, name: str) -> None:
        """Start a named part of the transcript: the frames up to the next step are filed under it."""
        self.log.append({"step": name})
        self._step_start = len(self.frames)

    def send(self, msg: Frame) -> None:
        self.log.append({"->": msg})
        self._write(json.dumps(msg).encode())

    def send_unparsable(self, body: str) -> None:
        """A frame whose body is not JSON (recorded as its text)."""
        self.log.append({"->": body})
        self._write(body.encode())

    def _write(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(self.face.encode(body))

    def request(self, method: str, params: Any) -> int:
        self._ids += 1
        self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def answer(self, request: Frame, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    # ---- waiting for the daemon

    async def expect(self, what: str, pred: Callable[[Frame], bool]) -> Frame:
        """The first daemon frame of this step that matches `pred` and no earlier call returned,
        waiting for it."""

        def found() -> Frame | None:
            if self._reader.done():
                self._reader.result()  # a malformed frame: its assertion
            for i in range(self._step_start, len(self.frames)):
                if i not in self._taken and pred(self.frames[i]):
                    self._taken.add(i)
                    return self.frames[i]
            return None

        frame: Frame = await wait_until_async(found, 15, what, wake=self._arrived, describe=self.describe)
        return frame

    async def reply(self, msg_id: int) -> Frame:
        return await self.expect(f"the answer to request {msg_id}", lambda f: f.get("id") == msg_id and "method" not in f)

    async def call(self, method: str, params: Any) -> Frame:
        return await self.reply(self.request(method, params))

    async def daemon_request(self, method: str) -> Frame:
        return await self.expect(f"a {method} request", lambda f: f.get("method") == method and "id" in f)

    async def notification(self, what: str, pred: Callable[[Frame], bool]) -> Frame:
        return await self.expect(what, lambda f: "method" in f and "id" not in f and pred(f))

    async def end(self) -> int:
        """Close stdin: the daemon must exit by itself; every frame it sent is in the log then."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = await asyncio.wait_for(self.proc.wait(), scaled(10))
        await asyncio.wait_for(self._reader, scaled(5))
        self.log.append({"exit": code})
        return code

    def describe(self) -> str:
        recent = "\n".join(json.dumps(e)[:300] for e in self.log[-12:])
        return f"the last frames:\n{recent}\nthe daemon's stderr ends:\n{self._stderr.decode(errors='replace')[-3000:]}"

    async def stderr_text(self) -> str:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._stderr_reader), scaled(5))
        return self._stderr.decode(errors="replace")


@contextlib.asynccontextmanager
async def running(face: Face, launch: Launch, place: Place, log: list[dict[str, Any]]) -> AsyncIterator[Client]:
    """The daemon for `face`, started as `launch` says, in `place`; its client records in `log`."""
    proc = await asyncio.create_subprocess_exec(
        *launch.command, *face.args, "--log-level", "INFO",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=place.env(launch), cwd=place.cwd,
        start_new_session=True,  # its own group: conftest's cleanup can kill it without touching pytest
    )
    client = Client(proc, face, log)
    try:
        if launch.warm:  # a launch that fell back to cold would pass unnoticed: it must be a forked child
            await wait_until_async(lambda: served_warm(proc.pid), scaled(10), "the launch to be served warm")
        yield client
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        client._reader.cancel()
        print(f"--- daemon {proc.pid} stderr ---\n{await client.stderr_text()}")  # shown when the test failed


@dataclass
class Run:
    """A scenario's daemons (started one after another, as `launch` says, in `place`) and their log."""

    face: Face
    launch: Launch
    place: Place
    llm: FakeLLM
    log: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    @property
    def workspace(self) -> Path:
        return self.place.workspace

    @contextlib.asynccontextmanager
    async def daemon(self) -> AsyncIterator[Client]:
        async with running(self.face, self.launch, self.place, self.log) as client:
            yield client
        self.stderr.append(await client.stderr_text())  # whole: the process has ended


# ---- normalising and comparing ------------------------------------------------------------------

ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def _session_ids(log: list[dict[str, Any]]) -> list[str]:
    """The session ids the daemon handed out (in answers), in order."""
    seen: list[str] = []
    for entry in log:
        result = entry.get("<-", {}).get("result")
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if isinstance(sid, str) and sid not in seen:
            seen.append(sid)
    return seen


def _versionless(log: list[dict[str, Any]]) -> None:
    for entry in log:
        result = entry.get("<-", {}).get("result")
        for info in (result.get("serverInfo"), result.get("agentInfo")) if isinstance(result, dict) else ():
            if isinstance(info, dict) and "version" in info:
                assert info["version"] == __version__, info
                info["version"] = "<version>"


def normalise(log: list[dict[str, Any]], place: Place) -> dict[str, Any]:
    """The clients' log as {"steps": [{"step", "frames"}]}, independent of the launch."""
    log = json.loads(json.dumps(log))  # a copy
    _versionless(log)
    names = place.placeholders() + [(sid, f"<session-{n}>") for n, sid in enumerate(_session_ids(log), 1)]

    def text(s: str) -> str:
        if ISO_TIME.fullmatch(s):
            return "<time>"
        for raw, name in names:
            s = s.replace(raw, name)
        return s

    def value(v: Any) -> Any:
        if isinstance(v, str):
            return text(v)
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, dict):
            return {text(k): value(x) for k, x in v.items()}
        return v

    out: dict[str, Any] = {"steps": []}
    for entry in log:
        if "step" in entry:
            out["steps"].append({"step": entry["step"], "frames": []})
        else:
            assert out["steps"], f"a frame before the first step: {entry}"
            out["steps"][-1]["frames"].append(value(entry))
    return out


def compare(face: str, scenario: str, transcript: dict[str, Any], tmp_root: Path) -> None:
    """Exact comparison with the golden file, a unified diff on failure; UPDATE_GOLDEN=1 rewrites it."""
    text = json.dumps(transcript, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    for root in {str(tmp_root), str(tmp_root.resolve())}:
        assert root not in text, f"a path of this run is left in the transcript (not normalised): {root}\n{text}"
    path = GOLDEN / face / f"{scenario}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once"
    golden = path.read_text()
    if text != golden:
        shown = path.relative_to(GOLDEN.parents[2])
        diff = "".join(difflib.unified_diff(golden.splitlines(keepends=True), text.splitlines(keepends=True),
                                            f"{shown} (golden)", "this run", n=6))
        pytest.fail(f"the {face} transcript '{scenario}' differs from {shown} in {_steps_differing(golden, transcript)} "
                    f"(after a deliberate change, UPDATE_GOLDEN=1 rewrites it):\n{diff}", pytrace=False)


def _steps_differing(golden: str, transcript: dict[str, Any]) -> str:
    """Names the steps of the diff, which shows only a few lines around each change."""
    old = {s["step"]: s["frames"] for s in json.loads(golden).get("steps", [])}
    new = {s["step"]: s["frames"] for s in transcript["steps"]}
    names = [n for n in dict.fromkeys([*old, *new]) if old.get(n) != new.get(n)]
    return ", ".join(f"'{n}'" for n in names) if names else "its end"
