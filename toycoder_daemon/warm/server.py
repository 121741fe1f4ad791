"""The fork server: the daemon's imports done once per user and install; a forked child per launch.

Started by a launcher that served cold (launcher.spawn_server): detached in its own session, cwd /,
stdio on /dev/null, stderr to its log, and only launcher.SERVER_ENV of that launcher's environment,
so it holds no launch's keys. It imports the faces, the App and their libraries by module name (a
module that is missing or fails is logged and skipped), freezes the garbage collector's view of them
(children then leave those pages shared), takes a lock for its socket (one server per socket),
binds the socket (the name a hash of the install: launcher.install_hash) in the 0700 runtime dir,
and serves until `daemon.warm_idle_minutes` pass with no child running, or --warm-stop.

Per connection: the peer must be our uid (SO_PEERCRED). A launch brings the launcher's fds and an
opaque message the server never parses: it is received into one buffer, handed to the forked child
(warm/child.py) and zeroed here right after the fork, so no key of a launch stays in this process.
The server forks only single-threaded, with no event loop running: checked before every fork
(a threaded fork can copy a lock held by a thread that does not exist in the child). Nothing here
reads a launch's environment, cwd, HOME or config before the fork. It answers the launcher with the
child's pid and a pidfd of it, reaps the child on SIGCHLD and sends its exit status.

The spare (SPARE): one child is forked ahead of the next launch (child.run_spare). It detaches and
rehearses both faces' first-call work while no launcher waits, then says it is ready. A launch then
goes to it instead of a fork: the server passes it the launcher's connection and fds over their
socketpair (SCM_RIGHTS) with the length of the launch's message, which the spare reads itself (so
this process never holds it), and forks the next spare SPARE_DELAY later. A spare killed before
its launch is replaced. With no ready spare (a burst of launches) a launch is forked for as above.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import gc
import importlib
import marshal
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from toycoder_daemon.config import model as config_model
from toycoder_daemon.warm import child, launcher

PRELOAD = (
    # our entry, App and faces
    "toycoder_daemon.faces.main", "toycoder_daemon.app.application", "toycoder_daemon.faces.lsp.server",
    "toycoder_daemon.faces.lsp.transport", "toycoder_daemon.faces.acp.agent", "toycoder_daemon.rpc.lsp_framing",
    "toycoder_daemon.rpc.outbox", "toycoder_daemon.rpc.ndjson",
    "toycoder_daemon.faces.lsp.frontend", "toycoder_daemon.faces.acp.frontend",
    "toycoder_daemon.llm.http_stream", "toycoder_daemon.llm.openai_client", "toycoder_daemon.llm.json_codec",
    "toycoder_daemon.tools.shell.sandbox.probe", "toycoder_daemon.core.util.environ_scrub", "toycoder_daemon.core.util.logs",
    # what App.start's file listing imports on the event loop, between initialize and session/new (~2 ms)
    "toycoder_daemon.tools.search.rg_runs",
    # their libraries
    "pygls.lsp.server", "pygls.protocol", "pygls.progress", "lsprotocol.types", "lsprotocol.converters", "acp", "acp.schema",
    "pydantic", "yaml", "orjson", "ssl",
    # the HTTP stack, also what it imports only at its first request
    "httpx2", "httpcore2", "anyio", "anyio.streams.tls", "sniffio", "truststore",
)
PREPARE = (
    # the same for every launch and reading nothing of one: the LSP face's converter and hooks, the
    # wire types' validators (built at first use otherwise), the HTTP stack's lazy imports and its TLS
    # contexts as made under no SSL_CERT_FILE / SSL_CERT_DIR (SERVER_ENV has neither; a launch that
    # sets one gets a context of its own, made in its child)
    "toycoder_daemon.faces.lsp.converter:prepare", "toycoder_daemon.wire.protocol:build_all",
    "toycoder_daemon.llm.http_stream:prepare", "toycoder_daemon.warm.proc_identity:prepare",
    "toycoder_daemon.config.model:prepare", "toycoder_daemon.faces.lsp.server:prepare",
    "toycoder_daemon.faces.acp.agent:prepare",
    # the package's own data every App reads alike: the prompt templates, the built-in tools' schemas
    "toycoder_daemon.prompts.manager:prepare", "toycoder_daemon.app.factories:prepare",
)
"""Functions (no arguments) the server calls once after PRELOAD, before any fork."""
IDLE_MINUTES = 30.0
"""Until a warm daemon reports its config's `daemon.warm_idle_minutes`."""
MAX_WAIT = 3600.0
"""Seconds one poll waits at most (the idle check then runs again)."""
SPARE = True
"""Keep a spare child forked and rehearsed ahead of the next launch (child.run_spare), unless the
server was started with TOYCODER_WARM_SPARE=0 (read once at its start, from its own environment:
launcher.SERVER_ENV of the launch that started it)."""
SPARE_DELAY = 0.5
"""Seconds after a spare took a launch before the next one is forked: its rehearsal (~10 ms of CPU)
then does not compete with the launch just served, which is answering its `initialize`."""
SPARE_RETRY = 5.0
"""Seconds before a spare that died without taking a launch is replaced (a crash is not a loop)."""
READ_TIMEOUT = 2.0
"""Seconds a connection may take to deliver its whole message (the server is single-threaded: a
slow peer stalls the others for at most this long)."""


def log(text: str) -> None:
    """A line in the server's log (its stderr). Not the logging module: a root handler set here would
    be inherited by every child and write beside the daemon's own."""
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} fork server {os.getpid()}: {text}\n")
    sys.stderr.flush()


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:  # another tree's module, or a library this install lacks
            if name.startswith("toycoder_daemon."):
                log(f"not preloaded: {name}: {e}")
        except Exception as e:
            log(f"not preloaded: {name}: {type(e).__name__}: {e}")
    prepare()


def prepare() -> None:
    """PREPARE's functions, twice: cattrs empties its dispatch cache each time it registers a hook it
    has just generated (a list type's, at its first use), so after one pass about half of the
    hooks an `initialize` answer needs were gone again, and every child generated them anew (~40
    classes' code compiled per launch). The second pass generates nothing new, so nothing is
    emptied after it (tests/unit/warm/test_preload.py)."""
    for first in (True, False):
        for name in PREPARE:
            module, _, function = name.partition(":")
            try:
                getattr(importlib.import_module(module), function)()
            except Exception as e:  # another tree's, or a library this install lacks: the child does it
                if first:
                    log(f"not prepared: {name}: {type(e).__name__}: {e}")


def threads_problem() -> str | None:
    """Why forking now would be unsafe, or None: a second thread (Python's or a library's), a loop."""
    if threading.active_count() != 1:
        return f"{threading.active_count()} Python threads"
    try:
        tasks = len(os.listdir("/proc/self/task"))
    except OSError:
        tasks = 1
    if tasks != 1:
        return f"{tasks} threads"
    try:
        asyncio.get_running_loop()
        return "an event loop is running"
    except RuntimeError:
        return None


class Spare:
    """A spare child as the server sees it: its pid and the server's end of their socketpair."""

    def __init__(self, pid: int, sock: socket.socket):
        self.pid, self.sock = pid, sock
        self.ready = False
        """It said it is rehearsed and waits (child.SPARE_READY)."""


class Server:
    def __init__(self, path: str, lock: int):
        self.path, self.lock = path, lock
        self.listener: socket.socket | None = None
        self.children: dict[int, tuple[socket.socket | None, int]] = {}
        """Child pid -> (its launcher's connection, the launcher's pid)."""
        self.idle_minutes = IDLE_MINUTES
        self.last_active = time.monotonic()
        self.started = time.time()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        self.stop_requested = False
        self.use_spare = SPARE
        self.spare: Spare | None = None
        self.spare_due: float | None = None
        """When the next spare is forked (time.monotonic()); None: none is to be."""
        self.handed: dict[int, Spare] = {}
        """Launched spares that have not said yet they took their launch, by socket fd: their
        launcher's connection is not watched until they have (the spare reads from it first)."""

    # -- life -------------------------------------------------------------------------------------

    def listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # we hold the lock: whatever is there is no live server's
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)  # umask 077: the socket is 0600, in a 0700 directory
        sock.listen(128)
        self.listener = sock
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda s, f: None)  # a handler, so the wake-up fd is written
        for signum in launcher.FORWARDED:
            signal.signal(signum, self._on_stop)
        if self.use_spare:
            self.spare_due = time.monotonic()

    def _on_stop(self, signum: int, frame: Any) -> None:
        self.stop_requested = True

    def stop_listening(self) -> None:
        """No more launches: the socket and the lock go now (a new server may start at once); the
        children still running are reaped and reported before the process exits."""
        if self.listener is None:
            return
        with contextlib.suppress(OSError):  # ours: no other server binds it while we hold the lock
            os.unlink(self.path)
        self.listener.close()
        self.listener = None
        os.close(self.lock)
        self.lock = -1
        self.spare_due = None
        self._drop_spare()  # it has no launch; not replaced (no listener): run() polls no closed socket

    def run(self) -> None:
        while True:
            if self.stop_requested:
                self.stop_listening()
            if self.listener is None and not self.children:
                return
            poller = select.poll()
            poller.register(self.wake_r, select.POLLIN)
            if self.listener is not None:
                poller.register(self.listener, select.POLLIN)
            pending = {spare.pid for spare in self.handed.values()}
            conns = {conn.fileno(): conn for pid, (conn, _) in self.children.items()
                     if conn is not None and pid not in pending}
            for fd in conns:
                poller.register(fd, select.POLLIN)
            for fd in self.handed:
                poller.register(fd, select.POLLIN)
            if self.spare is not None:
                poller.register(self.spare.sock, select.POLLIN)
            timeout = None
            if not self.children and self.listener is not None:
                left = self.last_active + self.idle_minutes * 60 - time.monotonic()
                if left <= 0:
                    log(f"idle for {self.idle_minutes:g} minutes: exiting")
                    self.stop_listening()
                    continue
                timeout = min(left, MAX_WAIT) * 1000  # poll() takes at most ~24 days; the loop comes back
            if self.spare_due is not None and self.spare is None:
                due = max(0.0, self.spare_due - time.monotonic()) * 1000
                timeout = due if timeout is None else min(timeout, due)
            self.dispatch(poller.poll(timeout), conns)
            self._guarded(self.reap)
            if self.spare_due is not None and self.spare is None and time.monotonic() >= self.spare_due:
                self._guarded(self.fork_spare)

    def dispatch(self, events: list[tuple[int, int]], conns: dict[int, socket.socket]) -> None:
        """One poll round's events. A launcher's event goes to the connection registered under that
        fd, not to whatever holds the number now: a reap earlier in the round may close it and an
        accept reuse the number for a new launch, which a stale event must not end."""
        for fd, _ in events:
            if fd == self.wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.wake_r, 512)
                self._guarded(self.reap)
            elif self.listener is not None and fd == self.listener.fileno():
                self._guarded(self.accept)
            elif fd in conns:
                self._guarded(functools.partial(self._launcher_spoke, conns[fd]))
            elif fd in self.handed:
                self._guarded(functools.partial(self._spare_took, self.handed.pop(fd)))
            elif self.spare is not None and fd == self.spare.sock.fileno():
                self._guarded(self._spare_spoke)

    @staticmethod
    def _guarded(handler: Callable[[], None]) -> None:
        """One event's handling: a fault in it (one bad connection) is logged, never the server's end."""
        try:
            handler()
        except Exception as e:
            log(f"{type(e).__name__} while serving: {e}")

    def _launcher_spoke(self, spoke: socket.socket) -> None:
        """A launcher says nothing after the hand-over: this is its end (the child sees it too)."""
        for pid, (conn, launcher_pid) in self.children.items():
            if conn is spoke:
                conn.close()
                self.children[pid] = (None, launcher_pid)
                return

    # -- the spare ----------------------------------------------------------------------------------

    def fork_spare(self) -> None:
        """Fork the next spare (child.run_spare): single-threaded, as every fork here."""
        self.spare_due = None
        problem = threads_problem()
        if problem:
            log(f"cannot fork safely ({problem}): refusing launches")
            self.stop_listening()
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError as e:  # EAGAIN, ENOMEM: launches are forked directly; a spare is tried again later
            ours.close()
            theirs.close()
            log(f"cannot fork a spare ({e}): trying again in {SPARE_RETRY:g} s")
            self.spare_due = time.monotonic() + SPARE_RETRY
            return
        if pid == 0:
            ours.close()
            child.run_spare(theirs, self._release, self._report_idle, READ_TIMEOUT)
        theirs.close()
        self.spare = Spare(pid, ours)

    def _spare_spoke(self) -> None:
        """The spare is ready (or its end closed: it died, and is replaced when reaped)."""
        assert self.spare is not None
        said = self.spare.sock.recv(1)
        if said == child.SPARE_READY:
            self.spare.ready = True
        else:  # it ended (it is reaped soon): no busy poll on its closed end meanwhile
            self._drop_spare()

    def _drop_spare(self, reaped: bool = False) -> None:
        """The spare is gone (or going): the next one is forked at once if this one had been ready
        (it was killed), after SPARE_RETRY if it never was (its rehearsal failed: not in a loop).
        A reaped spare's pid is free: it is not signalled (it could be another process's by now)."""
        if self.spare is not None:
            spare, self.spare = self.spare, None
            spare.sock.close()
            if not reaped:
                with contextlib.suppress(OSError):
                    os.kill(spare.pid, signal.SIGKILL)
            if self.listener is not None:
                self.spare_due = time.monotonic() + (0.0 if spare.ready else SPARE_RETRY)

    def _spare_took(self, spare: Spare) -> None:
        """A launched spare says it answered its launcher (or its end closed: it died, and its
        launcher hears of it when it is reaped): its launcher's connection is watched from now on."""
        spare.sock.close()

    def _hand_to_spare(self, conn: socket.socket, launcher_pid: int, length: int, fds: list[int]) -> bool:
        """The launch goes to the ready spare: the launcher's connection and fds, and the length of
        the message the spare reads from the connection itself. False: no ready spare took it."""
        spare = self.spare
        if spare is None or not spare.ready:
            return False
        self.spare = None
        try:
            launcher.send(spare.sock, launcher.LAUNCH, struct.pack("!I", length), [conn.fileno(), *fds])
        except OSError as e:  # it died meanwhile: this launch is forked for as before
            log(f"spare {spare.pid} did not take a launch: {e}")
            self.spare = spare
            self._drop_spare()
            return False
        self.children[spare.pid] = (conn, launcher_pid)
        self.handed[spare.sock.fileno()] = spare
        self.last_active = time.monotonic()
        self.spare_due = time.monotonic() + SPARE_DELAY
        return True

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.spare is not None and pid == self.spare.pid:  # killed before a launch came
                log(f"spare {pid} ended ({os.waitstatus_to_exitcode(status)}) without a launch: replacing it")
                self._drop_spare(reaped=True)
                continue
            for fd, spare in list(self.handed.items()):
                if spare.pid == pid:
                    del self.handed[fd]
                    spare.sock.close()
            conn, _ = self.children.pop(pid, (None, 0))
            self.last_active = time.monotonic()
            if conn is not None:
                try:
                    conn.settimeout(READ_TIMEOUT)
                    launcher.send(conn, launcher.EXITED, struct.pack("!i", os.waitstatus_to_exitcode(status)))
                except OSError:
                    pass
                conn.close()

    # -- one connection ---------------------------------------------------------------------------

    def accept(self) -> None:
        assert self.listener is not None
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.serve(conn)

    def serve(self, conn: socket.socket) -> None:
        """One connection's request; the connection is closed unless a launch keeps it."""
        deadline = time.monotonic() + READ_TIMEOUT
        conn.settimeout(READ_TIMEOUT)
        keep = False
        fds: list[int] = []
        try:
            pid, uid, _ = launcher.peer(conn)
            if uid != os.geteuid():
                log(f"refused a connection from pid {pid}: uid {uid} is not ours")
                launcher.send(conn, launcher.REFUSED, f"uid {uid} is not the fork server's".encode())
                return
            kind, length, fds = launcher.receive_header(conn, launcher.LAUNCH_FDS, deadline)
            if kind == launcher.LAUNCH:
                owned, fds = fds, []  # launch() closes them, whatever happens
                keep = self.launch(conn, pid, length, owned, deadline)
            elif kind == launcher.STATUS:
                launcher.send(conn, launcher.ANSWER, marshal.dumps(self.status()))
            elif kind == launcher.STOP:
                log(f"stop asked by pid {pid}")
                launcher.send(conn, launcher.ANSWER)
                self.stop_listening()
            elif kind == launcher.IDLE and 0 < length < 32:
                body = bytearray(length)
                if launcher.receive_into(conn, body, deadline):
                    minutes = float(body.decode())
                    if not 0 <= minutes <= config_model.MAX_WARM_IDLE_MINUTES:  # also NaN
                        raise ValueError(f"idle limit {minutes!r} out of range")
                    self.idle_minutes = minutes
            elif kind:
                launcher.send(conn, launcher.REFUSED, b"unknown request")
        except (OSError, ValueError) as e:
            log(f"connection dropped: {e}")
        finally:
            for fd in fds:
                os.close(fd)
            if not keep:
                conn.close()

    def launch(self, conn: socket.socket, launcher_pid: int, length: int, fds: list[int], deadline: float) -> bool:
        """Fork a child for this launch; True when the connection is kept to report its end."""
        try:
            if len(fds) != launcher.LAUNCH_FDS or length > launcher.MAX_MESSAGE:
                launcher.send(conn, launcher.REFUSED, b"a launch brings %d fds and a message" % launcher.LAUNCH_FDS)
                return False
            if self._hand_to_spare(conn, launcher_pid, length, fds):
                return True
            hello = bytearray(length)
            try:
                if not launcher.receive_into(conn, hello, deadline):
                    return False
                problem = threads_problem()
                if problem:  # never fork like this: say so, and take no more launches
                    log(f"cannot fork safely ({problem}): refusing launches")
                    launcher.send(conn, launcher.REFUSED, f"the fork server has {problem}".encode())
                    self.stop_listening()
                    return False
                pid = os.fork()
                if pid == 0:
                    child.run(fds, hello, lambda: self._release(conn), self._report_idle)
            finally:
                hello[:] = bytes(len(hello))  # the launch's environment, keys and all: not kept here
        finally:
            for fd in fds:
                os.close(fd)
        pidfd = None
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
        self.children[pid] = (conn, launcher_pid)
        self.last_active = time.monotonic()
        try:
            launcher.send(conn, launcher.FORKED, struct.pack("!i", pid), [pidfd] if pidfd is not None else None)
        except OSError:  # the launcher is gone: its child finds the pipe closed and ends
            pass
        finally:
            if pidfd is not None:
                os.close(pidfd)
        return True

    def _release(self, conn: socket.socket | None = None) -> None:
        """In a new child: close everything of the server's (its socket, lock, other launchers, spares)."""
        if self.listener is not None:
            self.listener.close()
        if self.lock >= 0:
            os.close(self.lock)
        os.close(self.wake_r)
        os.close(self.wake_w)
        for other, _ in self.children.values():
            if other is not None:
                other.close()
        for spare in [*self.handed.values(), *([self.spare] if self.spare is not None else [])]:
            spare.sock.close()
        if conn is not None:
            conn.close()
        self.children.clear()
        self.handed.clear()
        self.spare = None

    def _report_idle(self, minutes: float) -> None:
        """In a warm daemon: its config's idle limit, sent to this server."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(self.path)
            launcher.send(sock, launcher.IDLE, repr(float(minutes)).encode())

    def status(self) -> dict[str, Any]:
        from toycoder_daemon import __version__

        return {"pid": os.getpid(), "socket": self.path, "version": __version__, "python": sys.version.split()[0],
                "started": self.started, "idleMinutes": self.idle_minutes,
                "children": [{"pid": pid, "launcher": lpid} for pid, (_, lpid) in sorted(self.children.items())],
                "spare": {"pid": self.spare.pid, "ready": self.spare.ready} if self.spare is not None else None}


def main(argv: list[str]) -> None:
    directory, digest = argv
    os.chdir("/")
    os.umask(0o077)
    for name in list(os.environ):  # as the launcher started us; also if someone else did
        # PYTHONHASHSEED stays: it is the launcher's seed, read again by install_hash() below
        if name not in launcher.SERVER_ENV and name != "PYTHONHASHSEED" and not name.startswith("LC_"):
            del os.environ[name]
    started = time.monotonic()
    preload()
    gc.collect()
    gc.freeze()  # the children share these pages: their collections leave them untouched
    path = launcher.socket_path(directory, digest)
    lock = os.open(path[: -len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another server for this install is starting or running
    if launcher.install_hash() != digest:
        log("the install changed while the server started: exiting (the next cold start starts another)")
        return
    server = Server(path, lock)
    server.use_spare = SPARE and os.environ.get("TOYCODER_WARM_SPARE") != "0"
    server.listen()
    log(f"serving {path} (imports took {time.monotonic() - started:.2f} s)")
    server.run()
    log("exiting")
