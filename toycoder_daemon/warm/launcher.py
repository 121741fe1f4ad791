"""`toycoder-daemon`: hand this launch to the fork server (a warm start), or run the daemon here (cold).

Warm: this process connects to the user's fork server for this install (warm/server.py), which has
imported everything already, and passes it stdin, stdout, stderr and the working directory
(SCM_RIGHTS) with argv, the whole environment, umask, signal mask and ignored signals. The server
forks a child that adopts them (warm/child.py) and runs the daemon's cold main (faces/main.py). This
process stays as the child's stand-in for whoever started it: it forwards SIGINT, SIGTERM and SIGHUP
and ends the way the child ended (exit status, or the same signal). The child holds the read end of
a pipe whose only write end is here: when this process dies, however, the child dies with it.

Cold: with no server, a stale socket, a refusal, the server gone in the handshake, TOYCODER_WARM=0,
another namespace or cgroup, or any failure before the child has the fds, the daemon runs in this
process, and (where that can help) a server is started in the background for next time.

No frame is lost or doubled between the two: the child touches nothing of ours until this process
writes "go" on the pipe, which it does only once the server has answered that the child exists;
any other outcome closes the pipe and the child ends without reading.

Every launch imports this module, so it uses only cheap standard modules (not contextlib: ~0.6 ms
of CPU per launch for three `suppress`; the C modules `_socket` and `_signal` rather than socket.py
and signal.py, whose enums cost `enum`'s import and a scan of each module, ~15 ms of a launch on
our machines, a third of a warm start; they hand back ints where those give enums) and nothing else of ours
but core/util/rundir.py (the runtime dir, standard modules only; the package __init__s are empty;
tests/e2e/test_warm.py checks `-X importtime` and /proc/<pid>/maps). The server imports it for
what the two sides share: where the socket is, its name, the messages.
"""

from __future__ import annotations

import _socket as socket
import marshal
import os
import select
import stat
import struct
import sys
import time
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:  # signal.py's types (typeshed has no stub of `_signal`, which has the same functions)
    import signal
else:
    import _signal as signal

HEADER = struct.Struct("!4sI")
"""Every message: its kind and the length of what follows."""
LAUNCH_FDS = 6
"""A launch's fds: stdin, stdout, stderr, the working directory, the "go" pipe's read end, and the
write end of the pipe on which the child names the variables it blanked."""
LAUNCH, STATUS, STOP, IDLE = b"TCWL", b"TCWS", b"TCWQ", b"TCWI"  # launcher/daemon -> server
FORKED, REFUSED, EXITED, ANSWER = b"TCWF", b"TCWR", b"TCWX", b"TCWA"  # server -> launcher
MAX_MESSAGE = 64 << 20
"""Largest message accepted (an environment of many megabytes is a mistake, not a launch)."""
GO, BLANKED = b"G", b"B"
"""Written on the pipe: the child may take over the fds; the variables it named are blanked here."""
HANDSHAKE_TIMEOUT = 3.0
"""Seconds the server may take to fork a child before this launch serves cold (the child, if it
comes later, finds the pipe closed and ends)."""
NAMESPACES = ("mnt", "net", "pid", "user", "uts", "ipc", "cgroup")
CONFINEMENT = ("Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
               "Seccomp_filters")
"""/proc/<pid>/status fields that must be the server's and ours alike: a confined launcher (dropped
capabilities, no_new_privs, a seccomp filter, other groups) must never get an unconfined child."""
SERVER_ENV = ("PATH", "HOME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR", "TOYCODER_RUNTIME_DIR", "TOYCODER_WARM_SPARE")
"""The only variables the server is started with (and LC_*): it holds no launch's keys.
TOYCODER_WARM_SPARE=0 starts a server without a spare child (server.SPARE)."""
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SET_BY_PYTHON = {signal.SIGPIPE, getattr(signal, "SIGXFSZ", signal.SIGPIPE)}
"""Ignored by every Python at start-up: not the launching process's choice."""


def say(text: str) -> None:
    """One line on stderr (the daemon's log channel; stdout is the protocol's)."""
    try:  # noqa: SIM105 (not contextlib: ~0.6 ms of every launch's import, see the module doc)
        os.write(2, f"toycoder-daemon: {text}\n".encode(errors="replace"))
    except OSError:
        pass


class NotWarm(Exception):
    """This launch serves cold. `spawn`: starting a server in the background may help next time."""

    def __init__(self, reason: str = "", spawn: bool = False):
        super().__init__(reason)
        self.reason, self.spawn = reason, spawn


# -- where the server lives ---------------------------------------------------------------------

def runtime_dir(create: bool = True) -> str:
    """core/util/rundir.runtime_dir; raises NotWarm naming the directory."""
    from toycoder_daemon.core.util import rundir  # standard modules only (see the module doc)

    try:
        return rundir.runtime_dir(create)
    except rundir.RuntimeDirError as e:
        raise NotWarm(str(e)) from None


def import_path() -> list[str]:
    """sys.path without the launching script's own folder (a venv's bin/ for the installed script):
    the path the daemon's imports use, the same whether it was started as a script or with -m."""
    script = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] not in ("", "-c") else None
    return [p for p in sys.path if not script or os.path.abspath(p or ".") != script]


def interpreter_options() -> list[str]:
    """Command-line options that give a new interpreter this one's sys.flags. A forked child keeps
    the server's flags, so the server is started with the launcher's (and they are in the socket's
    name): `-X utf8`, `-O` or `-B` on a launch are never served by a server started without them."""
    f = sys.flags
    opts = ["-O"] * f.optimize + ["-b"] * f.bytes_warning + ["-v"] * f.verbose
    opts += [flag for flag, on in (("-B", f.dont_write_bytecode), ("-s", f.no_user_site), ("-S", f.no_site),
                                   ("-I", f.isolated), ("-E", f.ignore_environment and not f.isolated),
                                   ("-P", getattr(f, "safe_path", False) and not f.isolated)) if on]
    opts += ["-X", f"utf8={f.utf8_mode}"]  # explicit: the server's environment has no PYTHONUTF8
    if f.dev_mode:
        opts += ["-X", "dev"]
    if getattr(f, "warn_default_encoding", 0):
        opts += ["-X", "warn_default_encoding"]
    if getattr(f, "int_max_str_digits", -1) not in (-1, None):
        opts += ["-X", f"int_max_str_digits={f.int_max_str_digits}"]
    return opts


def hash_seed() -> str | None:
    """PYTHONHASHSEED as this interpreter used it (None: random, or the environment was ignored)."""
    return None if sys.flags.ignore_environment else os.environ.get("PYTHONHASHSEED") or None


def install_hash() -> str:
    """Names the socket: this package's version and files (path, size, mtime), the interpreter, its
    flags and hash seed, and the import path (with each entry's mtime, which an install into it
    changes), so an upgrade, an edit in an editable install, another venv or other interpreter flags
    are never served by a server running other code or flags.

    Every file is stat-ed on every launch (~1 ms for the package): a cache keyed by directory mtimes
    would miss an edit written in place (`open(path, "w")`, `>>`, an editor that keeps the inode),
    which changes the file's mtime but not its directory's."""
    from toycoder_daemon import __version__

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts: list[object] = [__version__, sys.executable, sys.version, package, interpreter_options(), hash_seed()]
    for entry in import_path():
        try:
            parts += (entry, os.stat(entry or ".").st_mtime_ns)
        except OSError:
            parts += (entry, None)
    _files(package, "", parts)
    data = marshal.dumps(parts, 2)  # version 2: no back-references, so the bytes depend on the values only
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"  # freshness, not secrecy: the dir is 0700


def _files(directory: str, prefix: str, parts: list[object]) -> None:
    """(relative path, size, mtime) of every file under `directory` but bytecode, in name order;
    symlinked folders are not followed (as os.walk does not)."""
    with os.scandir(directory) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        name = entry.name
        if entry.is_dir():
            if name != "__pycache__" and not entry.is_symlink():
                _files(entry.path, f"{prefix}{name}/", parts)
        elif not name.endswith((".pyc", ".pyo")):
            try:
                st = entry.stat()
            except OSError:  # removed meanwhile, or a dangling link
                continue
            parts += (prefix + name, st.st_size, st.st_mtime_ns)


def socket_path(directory: str, digest: str | None = None) -> str:
    return os.path.join(directory, f"server-{digest or install_hash()}.sock")


def state_dir() -> str:
    """Where the server's log goes: $XDG_STATE_HOME/toycoder, else ~/.local/state/toycoder."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "toycoder")


# -- messages -----------------------------------------------------------------------------------

def send(sock: socket.socket, kind: bytes, payload: bytes = b"", fds: list[int] | None = None) -> None:
    data = HEADER.pack(kind, len(payload)) + payload
    sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]) \
        if fds else sock.send(data)
    if sent < len(data):
        sock.sendall(data[sent:])


def _within(sock: socket.socket, deadline: float | None) -> None:
    """The next receive may wait only until `deadline` (time.monotonic()); TimeoutError once past it."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the message was not complete in time")
        sock.settimeout(left)


def receive_header(sock: socket.socket, max_fds: int = 0,
                   deadline: float | None = None) -> tuple[bytes, int, list[int]]:
    """(kind, payload length, fds received with it); kind b"" at end of stream."""
    buf = bytearray(HEADER.size)
    got, fds = 0, list[int]()
    while got < HEADER.size:
        _within(sock, deadline)
        if max_fds and not fds:
            n, anc, _, _ = sock.recvmsg_into([memoryview(buf)[got:]], socket.CMSG_SPACE(max_fds * 4),
                                             getattr(socket, "MSG_CMSG_CLOEXEC", 0))
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += list(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
        else:
            n = sock.recv_into(memoryview(buf)[got:])
        if n == 0:
            for fd in fds:
                os.close(fd)
            return b"", 0, []
        got += n
    for fd in fds:  # where MSG_CMSG_CLOEXEC is missing: no command may inherit them
        os.set_inheritable(fd, False)
    kind, length = HEADER.unpack(buf)
    return kind, length, fds


def receive_into(sock: socket.socket, buf: bytearray, deadline: float | None = None) -> bool:
    """Fill `buf` from the socket (received in place: no copy of it is left anywhere); False at EOF."""
    view, got = memoryview(buf), 0
    while got < len(buf):
        _within(sock, deadline)
        n = sock.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def peer(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the other end (core/util/rundir.peer)."""
    from toycoder_daemon.core.util import rundir

    return rundir.peer(sock)


def connect(path: str) -> socket.socket:
    """A connection to the server at `path` whose owner is us; NotWarm otherwise."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise NotWarm(spawn=True) from None  # no server yet: nothing to say
    except OSError as e:
        raise NotWarm(f"fork server socket {path}: {e.strerror or e}") from None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.geteuid():
        raise NotWarm(f"fork server socket {path} is not a socket of uid {os.geteuid()} (owner {st.st_uid})")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(HANDSHAKE_TIMEOUT)
    try:
        sock.connect(path)
    except ConnectionRefusedError:
        sock.close()
        raise NotWarm(f"fork server socket {path} is stale (nothing listens)", spawn=True) from None
    except OSError as e:
        sock.close()
        raise NotWarm(f"fork server socket {path}: {e.strerror or e}") from None
    _, uid, _ = peer(sock)
    if uid != os.geteuid():
        sock.close()
        raise NotWarm(f"fork server socket {path} is served by uid {uid}, not {os.geteuid()}")
    return sock


def request(kind: bytes, payload: bytes = b"", path: str | None = None) -> tuple[bytes, bytes]:
    """One control request to this install's server: (answer kind, payload)."""
    sock = connect(path or socket_path(runtime_dir(create=False)))
    try:  # not `with`: the C module's socket is no context manager
        send(sock, kind, payload)
        answer, length, _ = receive_header(sock)
        body = bytearray(length)
        if not answer or not receive_into(sock, body):
            raise NotWarm("the fork server closed the connection")
        return answer, bytes(body)
    finally:
        sock.close()


def warm_status() -> int:
    """--warm-status: the server's state as JSON on stdout (exit 0), or why there is none (exit 1)."""
    import json

    if os.environ.get("TOYCODER_WARM") == "0":
        print(json.dumps({"running": False, "reason": "disabled (TOYCODER_WARM=0)"}))
        return 1
    path = None
    try:
        path = socket_path(runtime_dir(create=False))
        _, body = request(STATUS, path=path)
    except NotWarm as e:
        print(json.dumps({"running": False, "socket": path, "reason": e.reason or "no fork server for this install"}))
        return 1
    print(json.dumps({"running": True, **marshal.loads(body)}))
    return 0


def warm_stop() -> int:
    """--warm-stop: every server in the runtime dir (this install's, and those of code replaced since,
    which would otherwise wait out their idle time) stops taking launches at once and exits when its
    children have ended."""
    try:
        directory = runtime_dir(create=False)
    except NotWarm as e:
        print(e.reason)
        return 1
    stopped = 0
    for name in sorted(os.listdir(directory)):
        if name.startswith("server-") and name.endswith(".sock"):
            try:
                request(STOP, path=os.path.join(directory, name))
                stopped += 1
            except NotWarm:
                continue
    print(f"stopped {stopped} fork server{'s' if stopped != 1 else ''}" if stopped else "no fork server is running")
    return 0 if stopped else 1


# -- checks before a warm start -----------------------------------------------------------------

def same_place(server_pid: int) -> None:
    """The child runs where this process would have run: the server's namespaces and cgroup must
    be ours (a launcher in `unshare -n` or a container must never get a child on the host's network)."""
    if server_pid <= 0:
        raise NotWarm("the fork server is in another PID namespace")
    try:
        for ns in NAMESPACES:
            if os.readlink(f"/proc/{server_pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"):
                raise NotWarm(f"the fork server is in another {ns} namespace")
        with open(f"/proc/{server_pid}/cgroup", "rb") as theirs, open("/proc/self/cgroup", "rb") as ours:
            if theirs.read() != ours.read():
                raise NotWarm("the fork server is in another cgroup")
        server, us = _confinement(str(server_pid)), _confinement("self")
        for name in (*CONFINEMENT, "attr/current"):
            if server.get(name) != us.get(name):
                raise NotWarm(f"the fork server's {name} is not ours (other privileges or confinement)")
    except FileNotFoundError:
        if sys.platform.startswith("linux"):
            raise NotWarm("cannot see the fork server's namespaces") from None
    except PermissionError:
        raise NotWarm("cannot see the fork server's namespaces") from None
    except OSError as e:  # ProcessLookupError: it died meanwhile
        raise NotWarm(f"cannot see the fork server: {e.strerror or e}", spawn=True) from None


def _confinement(pid: str) -> dict[str, bytes]:
    """CONFINEMENT's fields of /proc/<pid>/status, and the LSM label (attr/current) where readable."""
    with open(f"/proc/{pid}/status", "rb") as f:
        fields = dict(line.partition(b":")[::2] for line in f)
    found = {name: fields[name.encode()].strip() for name in CONFINEMENT if name.encode() in fields}
    try:
        with open(f"/proc/{pid}/attr/current", "rb") as f:
            found["attr/current"] = f.read()
    except OSError:  # no LSM that labels processes
        pass
    return found


def warm_allowed() -> bool:
    """TOYCODER_WARM=0 disables; Linux by default; elsewhere (macOS: its system frameworks are not
    safe to use in a forked child that did not exec) only with TOYCODER_WARM=1."""
    setting = os.environ.get("TOYCODER_WARM", "")
    if setting == "0":
        return False
    return sys.platform.startswith("linux") or setting == "1"


def _hello() -> bytes:
    """What the child adopts besides the fds (read only by the child: the server never parses it)."""
    mask = os.umask(0o077)
    os.umask(mask)
    try:
        with open("/proc/self/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        cmdline = b""
    ignored = [int(s) for s in signal.valid_signals()
               if s not in SET_BY_PYTHON and signal.getsignal(s) == signal.SIG_IGN]
    stdio = [(s.encoding, s.errors, s.line_buffering, getattr(s, "write_through", False)) if s is not None else None
             for s in (sys.stdin, sys.stdout, sys.stderr)]
    return marshal.dumps({
        "argv": list(sys.argv), "cmdline": cmdline, "env": dict(os.environ), "umask": mask,
        "sigmask": [int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])], "ignored": ignored,
        "stdio": stdio,
    })


# -- the warm path ------------------------------------------------------------------------------

class Child:
    """The forked child as this process sees it: its pid, a pidfd where the OS has them, and the
    pipe on which it names the variables to blank here."""

    def __init__(self, pid: int, pidfd: int | None, blanks: int):
        self.pid, self.pidfd, self.blanks = pid, pidfd, Blanks(blanks)

    def signal(self, signum: int) -> None:
        try:
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except ProcessLookupError:
            pass


def hand_over(path: str) -> tuple[socket.socket, Child, int]:
    """Connect, check the server, pass the launch, and wait until the child exists: (connection,
    child, the pipe's write end). NotWarm before the child may have touched anything."""
    sock = connect(path)
    go_r, go_w = os.pipe()
    blanks_r, blanks_w = os.pipe()
    cwd, fds = -1, list[int]()
    try:
        server_pid, _, _ = peer(sock)
        same_place(server_pid)
        for fd in (0, 1, 2):
            try:
                os.fstat(fd)
            except OSError:
                raise NotWarm(f"fd {fd} is closed") from None
        try:
            cwd = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY)
        except OSError as e:
            raise NotWarm(f"cannot open the working directory: {e.strerror or e}") from None
        try:
            send(sock, LAUNCH, _hello(), [0, 1, 2, cwd, go_r, blanks_w])
            kind, length, fds = receive_header(sock, max_fds=1)
            if not kind:
                raise NotWarm("the fork server closed the connection in the handshake", spawn=True)
            body = bytearray(length if length <= MAX_MESSAGE else 0)
            if not receive_into(sock, body):
                raise NotWarm("the fork server closed the connection in the handshake", spawn=True)
        except TimeoutError:
            raise NotWarm(f"the fork server did not answer within {HANDSHAKE_TIMEOUT:.0f} s") from None
        except OSError as e:
            raise NotWarm(f"the fork server broke the handshake: {e.strerror or e}", spawn=True) from None
        if kind == REFUSED:
            raise NotWarm(f"the fork server refused: {body.decode(errors='replace')}")
        if kind != FORKED or len(body) != 4:
            raise NotWarm(f"the fork server answered {kind!r}")
        (pid,) = struct.unpack("!i", body)
        return sock, Child(pid, fds[0] if fds else None, blanks_r), go_w
    except BaseException:
        for fd in fds:  # the pidfd of a child that ends untouched
            os.close(fd)
        os.close(go_w)  # a child that was forked anyway finds the pipe closed and ends untouched
        os.close(blanks_r)
        sock.close()
        raise
    finally:
        os.close(go_r)
        os.close(blanks_w)
        if cwd >= 0:
            os.close(cwd)


def blank_own(names: set[bytes]) -> None:
    """Zero the values of `names` in this process's initial environment block (/proc/<pid>/environ,
    readable by any process of the user), as environ_scrub does in a daemon: the warm child names
    what it blanked in its own copy once its config is loaded. A failure leaves them as they were."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        start = int(stat[stat.rindex(b")") + 2:].split()[50 - 3])  # env_start: field 50 of proc(5)
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
        fd = os.open("/proc/self/mem", os.O_RDWR | os.O_CLOEXEC)
        try:
            offset = 0
            for entry in block.split(b"\0"):
                name, eq, value = entry.partition(b"=")
                if eq and value and name in names:
                    os.pwrite(fd, bytes(len(value)), start + offset + len(name) + 1)
                offset += len(entry) + 1
        finally:
            os.close(fd)
    except (OSError, ValueError, IndexError):
        pass


class Blanks:
    """The child's reports of what it blanked (a 4-byte length, then NUL-separated names), each
    answered on the "go" pipe once done here, so the child goes on only when no copy shows them."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def read(self, answer: int) -> bool:
        """Take what has arrived (blanking what is complete); False at its end."""
        data = os.read(self.fd, 65536)
        self.buffer += data
        while len(self.buffer) >= 4 and len(self.buffer) >= 4 + (size := struct.unpack("!I", self.buffer[:4])[0]):
            blank_own(set(self.buffer[4:4 + size].split(b"\0")))
            self.buffer = self.buffer[4 + size:]
            try:  # noqa: SIM105 (not contextlib)
                os.write(answer, BLANKED)
            except BrokenPipeError:  # the child is gone: its end is reported by the server
                pass
        return bool(data)


def _relay_end(code: int) -> int:
    """Exit as the child did: its status, or the signal that ended it sent to ourselves."""
    if code >= 0:
        return code
    signum = -code
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child's crash, not ours to dump
    if signum not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    return 128 + signum  # a signal that does not end a process (SIGCHLD...)


def serve_warm(sock: socket.socket, child: Child, go_w: int) -> int:
    """Be the child's stand-in until it ends; its exit status (negative: the signal)."""
    previous = {signum: signal.signal(signum, lambda s, frame: child.signal(s))
                for signum in FORWARDED if signal.getsignal(signum) != signal.SIG_IGN}
    try:
        os.write(go_w, GO)  # from here the child owns stdin/stdout: ours go to /dev/null
    except BrokenPipeError:  # the child died before "go": it touched nothing, so this launch is ours
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for fd in (go_w, child.blanks.fd, child.pidfd):
            if fd is not None:
                os.close(fd)
        sock.close()
        raise NotWarm("the warm child ended before it started") from None
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sock.settimeout(None)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if child.pidfd is not None:
        poller.register(child.pidfd, select.POLLIN)
    poller.register(child.blanks.fd, select.POLLIN)
    server_open, deadline = True, None
    while True:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = dict(poller.poll(timeout))
        if child.blanks.fd in events and not child.blanks.read(go_w):
            poller.unregister(child.blanks.fd)
        if server_open and sock.fileno() in events:
            kind, length, _ = receive_header(sock)
            body = bytearray(length if length <= 64 else 0)
            if kind == EXITED and receive_into(sock, body) and len(body) == 4:
                return int(struct.unpack("!i", body)[0])
            server_open = False  # the server ended (or spoke nonsense) before the child
            poller.unregister(sock)
        if child.pidfd is not None and child.pidfd in events:
            poller.unregister(child.pidfd)
            deadline = time.monotonic() + 5  # the server reaps and reports a child at once
        if (deadline is not None or child.pidfd is None) and not server_open or \
                deadline is not None and time.monotonic() >= deadline:
            say("the fork server ended before the daemon it started; its exit status is unknown")
            return 1


def spawn_server(directory: str, digest: str) -> None:
    """Start this install's fork server, detached (its own session, reparented away from us), stdio
    on /dev/null and a log in the state dir, with only SERVER_ENV of our environment."""
    env = {k: v for k, v in os.environ.items() if k in SERVER_ENV or k.startswith("LC_")}
    if hash_seed() is not None:  # the launcher's, as its flags are (install_hash names both)
        env["PYTHONHASHSEED"] = str(hash_seed())
    boot = ("import sys, marshal; sys.path[:] = marshal.loads(bytes.fromhex(sys.argv[1])); "
            "from toycoder_daemon.warm.server import main; main(sys.argv[2:])")
    argv = [sys.executable, *interpreter_options(), "-c", boot, marshal.dumps(import_path()).hex(), directory, digest]
    log = os.devnull
    try:
        os.makedirs(state_dir(), mode=0o700, exist_ok=True)
        log = os.path.join(state_dir(), "warm-server.log")
    except OSError:
        pass
    pid = os.fork()  # we are single-threaded here: nothing of the daemon has started
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                os.dup2(null, 0)
                os.dup2(null, 1)
                os.dup2(out, 2)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # nothing of this launch reaches the server
                os.chdir("/")
                # ignored signals and the blocked mask survive execve: the server (and through it
                # every child) must not start with this one launch's
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                for signum in signal.valid_signals():
                    if signum not in (signal.SIGKILL, signal.SIGSTOP):
                        try:  # noqa: SIM105 (not contextlib)
                            signal.signal(signum, signal.SIG_DFL)
                        except (OSError, ValueError):  # numbers libc keeps for itself
                            pass
                os.execve(sys.executable, argv, env)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--warm-status" in args:
        return warm_status()
    if "--warm-stop" in args:
        return warm_stop()
    if warm_allowed() and not {"--setup", "--doctor"} & set(args):  # they talk to the person: cold, in this process
        try:
            directory = runtime_dir()
            digest = install_hash()
            path = socket_path(directory, digest)
            if len(path.encode()) > 107:
                raise NotWarm(f"fork server socket {path} is too long a path for a unix socket")
            try:
                sock, child, go_w = hand_over(path)
            except NotWarm as e:
                if e.spawn:
                    spawn_server(directory, digest)
                raise
            return _relay_end(serve_warm(sock, child, go_w))
        except NotWarm as e:
            if e.reason:
                say(f"not using the fork server: {e.reason}; starting cold")
    from toycoder_daemon.faces.main import main as cold_main

    return cold_main(args)
