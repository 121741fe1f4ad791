"""The launcher run_command starts instead of /bin/sh: it sets up the sandbox, then execs the shell.

    python -I -S -c BOOT SPEC_JSON      run one command (SPEC: see policy.Plan.spec, plus "cwd")
    python -I -S -c BOOT --probe        print which isolation this kernel and user allow, as JSON

BOOT (probe.py) starts at boot.py, which first drops the environment a client's terminal gave it.

It is started outside the workspace (probe.LAUNCH_CWD, isolated flags: nothing there is imported
before the command is confined) and changes to the command's directory only just before the exec.

A separate process rather than a preexec_fn because the daemon has threads, and forking a threaded
process then running Python before exec is unsafe. Layout:

    launcher (daemon's namespaces; subreaper) -- in fresh PID/mount/net namespaces when allowed:
      init (PID 1 of the namespace; when it exits the kernel kills everything left in it)
        /bin/sh -c COMMAND   (Landlock applied just before exec)

Without namespaces the launcher itself is the init-like supervisor: a child subreaper that kills
and reaps its whole tree when the shell ends, when it is told to stop, or when the daemon dies
(its death signal is then SIGTERM, handled, rather than SIGKILL). The command cannot signal the
supervisor from Landlock ABI 6 (its domain is scoped); below that, a hostile command without
namespaces can stop or kill it and outlive the daemon, and at any ABI a process forking faster than
the supervisor kills can outrun its walk (docs/security.md, probe.supervisor_exposed). Where the
daemon gives the command a cgroup of its own (spec "cgroup", cgroups.py), the shell is forked into
it (or joins it before it is confined), and every kill above starts with `cgroup.kill`, which no
fork outruns.

The shell gives itself its own mount table first (contain.confine_mounts: `/` read-only, the
writable roots bound back `nosuid,nodev`, a devpts instance and a procfs of its own). Root takes no
user namespace and drops the capabilities caps.py lists; the command inherits no file descriptor
beyond 0, 1 and 2, and a seccomp filter refuses TIOCSTI and TIOCLINUX (seccomp.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys

from toycoder_daemon.tools.shell.sandbox import boot, caps, cgroups, contain, landlock, seccomp

TYPE_CHECKING = False  # mypy reads the block below; importing typing costs start-up time per command
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

REFUSED_EXIT = boot.REFUSED_EXIT
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
MAX_FD = 1 << 30  # above any RLIMIT_NOFILE; closerange uses close_range(2), so the span costs nothing


def _daemon_gone(spec: dict[str, Any]) -> bool:
    """Whether the daemon that started us has died (checked after arming a death signal: a parent
    that dies before the arming sends none). Under a client's terminal there is no daemon to check."""
    return bool(spec.get("daemon")) and os.getppid() != spec["daemon"]


def _abandon(spec: dict[str, Any]) -> int:
    """The daemon died before the command ran: nobody else will remove its (empty) cgroup."""
    if spec.get("cgroup"):
        cgroups.remove(spec["cgroup"], within=0.0)
    return 137


def _layer(spec: dict[str, Any], what: str, apply: Callable[[], None], *, warn: bool = True) -> None:
    """Apply one layer of the confinement; when it fails, refuse to run under `required` (the
    process exits), else go on without it (saying so on stderr when `warn`)."""
    try:
        apply()
    except OSError as e:
        if spec["required"]:
            os.write(2, f"toycoder sandbox: cannot {what}: {e}; it did not run\n".encode())
            os._exit(REFUSED_EXIT)
        if warn:
            os.write(2, f"toycoder sandbox: cannot {what}: {e}\n".encode())


def _run_shell(spec: dict[str, Any], *, join: bool) -> NoReturn:
    """In the final child: confine, then become the shell."""
    try:
        if join:  # first, while it may still write there; what it starts stays in it
            cgroups.join(spec["cgroup"])
        # Its own mount table, in the shell alone: the init above keeps the host's view, where it
        # kills and removes the cgroup, and the launcher the host's /proc, which its walk reads.
        if spec.get("mounts"):
            try:
                contain.confine_mounts(spec["writable"], spec["readonly"], spec.get("hidden", []))
            except OSError as e:
                os.write(2, f"toycoder sandbox: cannot make the command's mounts: {e}; it did not run\n".encode())
                os._exit(REFUSED_EXIT)
            spec["writable"] = [*spec["writable"], contain.PRIVATE_PTS]  # its own instance now
        if spec["required"] and not spec["landlock"]:
            os.write(2, b"toycoder sandbox: required, but there is no Landlock to apply; it did not run\n")
            os._exit(REFUSED_EXIT)
        if spec["landlock"]:
            _layer(spec, "confine the command", lambda: landlock.restrict(
                spec["writable"], abi=spec["landlock"], block_tcp=spec["block_tcp"], network=spec["network"]),
                warn=False)
            # no typing into a terminal it holds (seccomp.py)
            _layer(spec, "filter terminal ioctls", seccomp.install)
        if os.geteuid() == 0:  # no user namespace for root: it would keep CAP_SYS_PTRACE (caps.py)
            _layer(spec, "drop root's capabilities", caps.drop)
        # Whatever started the launcher (an ACP client's terminal) may have left files open to it;
        # the command gets only stdin, stdout and stderr. After Landlock: its ruleset fd goes too.
        os.closerange(3, MAX_FD)
        # Python ignores both at start-up and exec keeps that: `yes | head -1` would not die of SIGPIPE
        # (it prints "Broken pipe" errors) and a write past RLIMIT_FSIZE would not kill.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        if spec.get("cwd"):  # a directory that is gone fails here: the command does not run elsewhere
            os.chdir(spec["cwd"])
            os.environ["PWD"] = spec["cwd"]
        os.execv("/bin/sh", ["/bin/sh", "-c", spec["command"]])
    except BaseException as e:  # never return into the supervisor's code in the child
        try:
            os.write(2, f"toycoder sandbox: {e}\n".encode())
        finally:  # also when that write fails (stderr closed)
            os._exit(127)
    os._exit(127)


def _supervise(spec: dict[str, Any], *, init: bool, parent_gone: Callable[[], bool]) -> int:
    """Start the shell, wait for it, then kill and reap everything else; the shell's status.
    `parent_gone`: whether what started us (the daemon; for the init, the launcher) has died."""

    cgroup = spec.get("cgroup")

    def stop(signum: int, _frame: Any) -> None:
        contain.kill_and_reap(pid_namespace_init=init, cgroup=cgroup)
        os._exit(128 + signum)

    # Before the fork: a stop that comes while the shell starts still ends its tree.
    for sig in _STOPS:
        signal.signal(sig, stop)
    # Our parent's death (even a SIGKILL) must reach us as a signal `stop` handles: without a
    # namespace nothing else ends the tree, and with one nothing else removes the cgroup (the
    # namespace's processes cannot stop its init: the kernel drops their signals it has no handler
    # for). The parent must still be there once it is armed.
    contain.prctl(contain.PR_SET_PDEATHSIG, signal.SIGTERM)
    if parent_gone():
        return _abandon(spec)
    # The stops are blocked across the fork (a stop already come is handled here, first): one sent to
    # the group just after it would otherwise run the supervisor's handler in the child too.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    # Born in the command's cgroup when the kernel allows (no wait); else it joins it (~10 ms).
    shell = contain.fork_into_cgroup(cgroup) if cgroup else None
    joined = shell is not None
    if shell is None:
        shell = os.fork()
    if shell == 0:
        for sig in _STOPS:  # the supervisor's handler is not the shell's; then a pending stop kills it
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
        _run_shell(spec, join=bool(cgroup) and not joined)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    while True:
        pid, status = os.waitpid(-1, 0)  # also reaps orphans handed to us meanwhile
        if pid == shell:
            code = os.waitstatus_to_exitcode(status)
            break
    contain.kill_and_reap(pid_namespace_init=init, cgroup=cgroup)
    return 128 - code if code < 0 else code


def _wait_for(child: int, cgroup: str | None) -> int:
    """The launcher above a namespace init: pass a stop on as SIGKILL (which ends the namespace)."""

    def stop(signum: int, _frame: Any) -> None:
        try:  # noqa: SIM105 (contextlib costs start-up time on every command)
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
        contain.kill_and_reap(pid_namespace_init=False, cgroup=cgroup)
        os._exit(128 + signum)

    for sig in _STOPS:
        signal.signal(sig, stop)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def run(spec: dict[str, Any]) -> int:
    # Die with the daemon, even when it is killed outright (stopped or not). _supervise re-arms its
    # own as SIGTERM, which it handles by killing the command's tree and removing its cgroup first:
    # without a namespace in this process, with one in the init below us (whom our death TERMs).
    contain.prctl(contain.PR_SET_PDEATHSIG, signal.SIGKILL)
    if _daemon_gone(spec):
        return _abandon(spec)  # the daemon is already gone
    contain.prctl(contain.PR_SET_CHILD_SUBREAPER, 1)
    entered: set[str] = set()
    if spec["namespaces"]:
        entered = contain.enter_namespaces(network=spec["network"])
        if spec["required"] and not entered:
            os.write(2, b"toycoder sandbox: cannot create the command's namespaces; it did not run\n")
            return REFUSED_EXIT
    spec["mounts"] = bool(spec.get("mounts")) and "mount" in entered
    # A fresh network namespace already cuts the network (with a clear ENETUNREACH); Landlock's TCP
    # rules are the fallback where namespaces are not allowed.
    spec["block_tcp"] = not spec["network"] and "network" not in entered
    if "pid" not in entered:
        return _supervise(spec, init=False, parent_gone=lambda: _daemon_gone(spec))
    # The init arms its own death signal after the fork; a launcher killed before that sends none
    # (the init would run the command unsupervised), so the init also checks a pipe only the
    # launcher holds open. A dying process closes its files before it signals its children.
    launcher_r, launcher_w = os.pipe()
    init = os.fork()
    if init == 0:
        try:
            os.close(launcher_w)
            contain.prctl(contain.PR_SET_PDEATHSIG, signal.SIGKILL)
            if contain.writer_gone(launcher_r):
                os._exit(_abandon(spec))  # the launcher (so the daemon) died before the signal was armed
            if os.getpid() != 1:  # kill(-1) below must only ever reach the namespace
                raise OSError("not the init of a new PID namespace")
            os._exit(_supervise(spec, init=True, parent_gone=lambda: contain.writer_gone(launcher_r)))
        except BaseException as e:
            os.write(2, f"toycoder sandbox: {e}\n".encode())
            os._exit(127)
    os.close(launcher_r)
    return _wait_for(init, spec.get("cgroup"))  # launcher_w stays open until this process ends


def probe() -> dict[str, Any]:
    """What this kernel and user allow, found by trying it in this throwaway process."""
    found: dict[str, Any] = {"landlock": landlock.abi_version(), "namespaces": False, "readonlyMounts": False}
    entered = contain.enter_namespaces(network=False)
    if entered:
        found["namespaces"] = True
        import tempfile

        child = os.fork()  # the init of the new PID namespace: only it can mount its /proc
        if child == 0:
            try:  # only the child's private mount namespace sees it
                contain.confine_mounts([tempfile.gettempdir()], [tempfile.gettempdir()])
                os._exit(0)
            except BaseException:
                os._exit(1)
        found["readonlyMounts"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        sys.stdout.write(json.dumps(probe()) + "\n")
        return 0
    return run(json.loads(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
