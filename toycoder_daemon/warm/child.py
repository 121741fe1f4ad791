"""A launch adopted in a freshly forked child of the fork server, then the daemon's cold main.

In order: its own session and process group; the server's descriptors closed and its signal
handlers as a fresh interpreter has them (SIG_DFL, SIGINT raising KeyboardInterrupt, SIGPIPE and
SIGXFSZ ignored), never the server's; a wait for the launcher's "go" (nothing of the
launch is used before it: a launcher that gave up finds the child gone untouched); then stdin,
stdout, stderr and the working directory from the launcher's fds; its umask, signal mask and
ignored signals; its whole environment (os.environ, so C getenv and children see it too), also as
/proc/<pid>/environ shows it (proc_identity), with keys blanked there as a cold start blanks them
(environ_scrub); its argv; stdio objects with its encodings; and a thread that kills this process
when the launcher dies (its end of the pipe closes). Then `faces.main.main`, exactly as a cold start
runs it.

A spare (`run_spare`) is the same child forked before its launch: it detaches and rehearses first,
then waits for the server to hand it one launch, and adopts it from the wait for "go" on.
"""

from __future__ import annotations

import contextlib
import io
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
from typing import Any, NoReturn

from toycoder_daemon.config import model as config_model
from toycoder_daemon.core.util import environ_scrub
from toycoder_daemon.warm import launcher, proc_identity


def run(fds: list[int], hello: bytearray, release: Callable[[], None],
        report_idle: Callable[[float], None]) -> NoReturn:
    """Never returns: the process ends as the daemon ends (or at once if the launcher gave up)."""
    def body() -> int:
        _detach(release)
        return _adopt(fds, hello, report_idle)

    _end(body)


def run_spare(sock: socket.socket, release: Callable[[], None], report_idle: Callable[[float], None],
              read_timeout: float) -> NoReturn:
    """A spare child, forked before its launch arrives: detached and rehearsed (`rehearse`) while no
    launcher waits, then it waits on `sock` (its end of a socketpair with the server) for one launch.
    The server sends it the launcher's connection and fds (SCM_RIGHTS) and the length of the launch's
    message, which the spare reads from the launcher itself (the server never reads it), answers
    the launcher as the server would (FORKED: its pid and a pidfd of itself), tells the server it
    has taken the launch, and adopts it as `run` does. The server's end closing (it exited or
    stopped) ends a spare that has no launch."""
    def body() -> int:
        _detach(release)
        return _serve_spare(sock, report_idle, read_timeout)

    _end(body)


def _serve_spare(sock: socket.socket, report_idle: Callable[[float], None], read_timeout: float) -> int:
    rehearse()
    sock.sendall(SPARE_READY)
    kind, length, fds = launcher.receive_header(sock, 1 + launcher.LAUNCH_FDS)
    body = bytearray(4 if kind == launcher.LAUNCH and length == 4 else 0)
    if not body or len(fds) != 1 + launcher.LAUNCH_FDS or not launcher.receive_into(sock, body):
        os._exit(0)  # the server is gone (or spoke nonsense): nothing of a launch was touched
    conn, launch_fds = socket.socket(fileno=fds[0]), fds[1:]
    hello = bytearray(struct.unpack("!I", body)[0])
    try:
        if not launcher.receive_into(conn, hello, time.monotonic() + read_timeout):
            os._exit(0)  # the launcher left: the server reports our end to nobody
    except OSError as e:  # a launcher stalling mid-message, as the server would drop it
        launcher.say(f"spare {os.getpid()}: launch dropped: {e}")
        os._exit(0)
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):  # no pidfds here: the launcher signals the pid
        pidfd = os.pidfd_open(os.getpid())
    try:
        launcher.send(conn, launcher.FORKED, struct.pack("!i", os.getpid()), [pidfd] if pidfd is not None else None)
    finally:
        if pidfd is not None:
            os.close(pidfd)
        conn.close()
    with contextlib.suppress(OSError):  # a server gone by now changes nothing for this launch
        sock.sendall(SPARE_TAKEN)  # the server watches the launcher's connection from now on
    sock.close()
    return _adopt(launch_fds, hello, report_idle)


SPARE_READY, SPARE_TAKEN = b"R", b"T"
"""What a spare tells the server: rehearsed and waiting; it has taken the launch it was sent."""


def rehearse() -> None:
    """In a spare, before any launch: the first-call work a child does before it answers
    `initialize`, on nothing of a launch (no environment, cwd, HOME or config is read; no thread is
    left running). Besides what the interpreter specialises, a forked child's first touch of each
    object the server made copies its page (the reference count is written): done here, it is not
    done while a launcher waits. Both faces are rehearsed: the spare does not know which one comes."""
    import asyncio

    from toycoder_daemon.faces import main as cold_main
    from toycoder_daemon.faces.acp import agent as acp_agent
    from toycoder_daemon.faces.lsp import server as lsp_server
    from toycoder_daemon.rpc.outbox import Outbox

    for args in (["--stdio"], ["--acp"]):
        cold_main.PARSER.parse_args(args)
    lsp_server.prepare()  # each also makes the server / agent this child serves with, in its own pages
    acp_agent.prepare()

    async def loop_start() -> None:  # the loop's own first-call work (selector, tasks, futures)
        await asyncio.sleep(0)

    asyncio.run(loop_start())
    box = Outbox(io.BytesIO())  # its writer thread's start, one frame written, its end
    box.write(b"{}")
    box.close()
    box.drain(1.0)
    io.TextIOWrapper(io.BytesIO(), "utf-8", "strict", newline="\n")


def _end(body: Callable[[], int]) -> NoReturn:
    code = 1
    try:
        code = body()
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:
        import traceback

        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _exit_code(e: SystemExit) -> int:
    """What the interpreter would exit with for this SystemExit."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _detach(release: Callable[[], None]) -> None:
    """Its own session and process group, nothing of the server's: its fds, its signal handlers."""
    os.setsid()
    release()
    signal.set_wakeup_fd(-1)
    _fresh_signals()


def _adopt(fds: list[int], hello: bytearray, report_idle: Callable[[float], None]) -> int:
    stdin, stdout, stderr, cwd, go, blanks = fds  # received close-on-exec (launcher.receive_header)
    # parsed while the launcher is still on its way to "go" (parsing uses none of its fds)
    launch = marshal.loads(bytes(hello))
    hello[:] = bytes(len(hello))
    if os.read(go, 1) != launcher.GO:
        os._exit(0)  # the launcher served cold (or died): its fds were never ours
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.fchdir(cwd)
    os.close(cwd)
    os.umask(launch["umask"])
    for signum in launch["ignored"]:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, launch["sigmask"])
    os.environ.clear()
    os.environ.update(launch["env"])
    threading.Thread(target=_die_with_launcher, args=(go,), name="launcher-watch", daemon=True).start()
    from toycoder_daemon.faces import main as cold_main

    cold_main.on_input_end = lambda: die_if_launcher_gone(go)
    environ_scrub.blanked = lambda names: _tell_blanked(blanks, names)
    _show_identity(launch["cmdline"])
    sys.argv[:] = launch["argv"]
    _locale()
    _stdio(launch["stdio"])
    config_model.on_loaded = lambda config: _report(report_idle, config.daemon.warm_idle_minutes)
    return cold_main.main(sys.argv[1:])


def _fresh_signals() -> None:
    """Every handler as a fresh interpreter has it (not as the server's or its first launcher's were):
    the launch's own ignored signals and mask are applied on top once it says "go"."""
    for signum in signal.valid_signals():
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            with contextlib.suppress(OSError, ValueError):  # numbers libc keeps for itself
                signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in launcher.SET_BY_PYTHON:
        signal.signal(signum, signal.SIG_IGN)


def _report(report_idle: Callable[[float], None], minutes: float) -> None:
    """The loaded config's idle limit, to this daemon's fork server."""
    with contextlib.suppress(OSError):  # the server is gone: it has nothing to wait for any more
        report_idle(minutes)


def _show_identity(cmdline: bytes) -> None:
    """/proc/<pid>/cmdline and environ as the launcher's, keys blanked as in a cold start."""
    block = b"".join(k + b"=" + v + b"\0" for k, v in os.environb.items())
    problem = proc_identity.publish(cmdline, block or b"\0")
    if problem:
        if sys.platform.startswith("linux"):  # elsewhere there is no /proc to show anything in
            launcher.say(f"warm child {os.getpid()}: /proc shows the fork server's argv and environment ({problem})")
        return
    environ_scrub.scrub()


_blanked_there = threading.Event()
"""Set by the watch thread when the launcher says it has blanked what it was told."""
BLANK_WAIT = 1.0
"""Seconds a scrub waits for the launcher (it answers at once unless it is stopped)."""


def _tell_blanked(fd: int, names: list[str]) -> None:
    """The launcher holds this environment in its own /proc block: it blanks the same variables,
    and the daemon goes on once it has (as a cold daemon goes on once its own block is blank)."""
    payload = b"\0".join(os.fsencode(n) for n in names)
    _blanked_there.clear()
    with contextlib.suppress(OSError):  # the launcher is gone (and so, in a moment, are we)
        os.write(fd, struct.pack("!I", len(payload)) + payload)
        _blanked_there.wait(BLANK_WAIT)


def _locale() -> None:
    """What the interpreter does at start-up from the environment: LC_CTYPE, the time zone."""
    import locale
    import time

    with contextlib.suppress(locale.Error):
        locale.setlocale(locale.LC_CTYPE, "")
    time.tzset()


def _stdio(settings: list[tuple[str, str, bool, bool] | None]) -> None:
    """sys.stdin/stdout/stderr on the adopted fds, with the launcher's encodings and buffering."""
    streams: list[Any] = []
    for fd, setting in enumerate(settings):
        if setting is None:
            streams.append(None)
            continue
        encoding, errors, line_buffering, write_through = setting
        raw = open(fd, "rb" if fd == 0 else "wb", closefd=False)  # noqa: SIM115 (sys.std* live as long as we do)
        streams.append(io.TextIOWrapper(raw, encoding, errors, newline="\n", line_buffering=line_buffering,
                                        write_through=write_through))
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _die_with_launcher(go: int) -> None:
    """The launcher is this daemon's process as its editor knows it: when it dies (its write end of
    the pipe closes, however it died), so does the daemon, as a cold one killed would."""
    while True:
        try:
            answer = os.read(go, 1)
        except InterruptedError:
            continue
        except OSError:
            break
        if not answer:
            break
        _blanked_there.set()  # launcher.BLANKED: the only thing it says after "go"
    os.kill(os.getpid(), signal.SIGKILL)


def die_if_launcher_gone(go: int) -> None:
    """At the end of input. The editor closes our stdin when it sees the launcher exit, after the
    launcher's end of the pipe closed (the kernel closes a dying process's files before its parent
    hears of it), but launcher-watch may not have run yet: without this the daemon would shut down
    and answer its turn "cancelled" to the editor, which still reads our stdout."""
    poll = select.poll()
    poll.register(go, select.POLLIN)
    if any(events & (select.POLLHUP | select.POLLERR) for _, events in poll.poll(0)):
        os.kill(os.getpid(), signal.SIGKILL)
