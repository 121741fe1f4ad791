"""The warm start (toycoder_daemon/warm): the launcher, the fork server, and each fault of issue 26.

Every test here has a runtime dir of its own (`rundir`), so the servers it meets are the ones it
started, and it stops them at the end. Daemons are started as editors start them, `python -m
toycoder_daemon` on pipes (rpc.Daemon, or subprocess where a test needs the raw streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    MARKER_VAR,
    alive,
    cmdline_of,
    cwd_of,
    descends_from,
    environ_of,
    has_env,
    live_pids,
    maps_of,
    memory_holds,
    open_fds,
    parent_of,
    processes_running,
    processes_with,
    signal_set,
    sleep_command,
    write_config,
)
from rpc import ROOT, Daemon, frame
from waiting import scaled, wait_until
from warm_helpers import (
    RUNTIME_VAR,
    new_runtime_dir,
    served_warm,
    serving_pid,
    sockets,
    status,
    statuses,
    stop_servers,
    wait_for_server,
)

from toycoder_daemon.testing.fake_llm import FakeLLM
from toycoder_daemon.warm import launcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm start is Linux's by default")
CAN_ADD_USERS = os.geteuid() == 0 and shutil.which("useradd") and shutil.which("runuser")
DAEMON = [sys.executable, "-m", "toycoder_daemon"]


@pytest.fixture
def rundir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = new_runtime_dir()
    monkeypatch.setenv(RUNTIME_VAR, str(directory))
    yield directory
    stop_servers(directory)
    shutil.rmtree(directory, ignore_errors=True)


def run(*args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAEMON, *args], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          cwd=str(cwd or ROOT), timeout=scaled(timeout), start_new_session=True)


def start_server(rundir: Path) -> dict[str, Any]:
    """A launch that finds no server serves cold and starts one: its status once it serves."""
    assert run("--version").returncode == 0
    return wait_for_server(rundir)


def server_socket(rundir: Path) -> Path:
    """Where this install's server listens in `rundir` (learnt from a real one, then stopped)."""
    start_server(rundir)
    (path,) = sockets(rundir)
    stop_servers(rundir)
    wait_until(lambda: not path.exists(), what="the stopped server's socket to go")
    return path


async def started(rundir: Path, cfg: Path, workspace: Path, **kw: Any) -> Daemon:
    d = await Daemon.start("--config", str(cfg), **kw)
    await d.initialize(workspace)
    return d


# -- a warm launch ------------------------------------------------------------------------------

async def test_a_warm_child_runs_with_the_launchers_fds_cwd_env_and_argv(rundir: Path, workspace: Path, llm: FakeLLM,
                                                                       tmp_path: Path) -> None:
    server = start_server(rundir)
    cfg = write_config(tmp_path / "config.yaml", llm)
    d = await started(rundir, cfg, workspace, env={"WARM_PROBE": "probe-1"}, cwd=str(workspace))
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid, "the launch was not served warm"
    llm.add({"text": "warm hello"})
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert d.streamed_text(sid) == "warm hello"
    assert cwd_of(child) == str(workspace)
    assert b"WARM_PROBE=probe-1" in environ_of(child) and f"{MARKER_VAR}={os.environ[MARKER_VAR]}".encode() in environ_of(child)
    assert cmdline_of(child) == cmdline_of(d.proc.pid)
    assert os.getpgid(child) == child and os.getsid(child) == child  # its own session and group
    assert parent_of(child) == server["pid"]
    assert "_pydantic_core" not in maps_of(d.proc.pid) and "_pydantic_core" in maps_of(child)
    assert await d.close() == 0
    wait_until(lambda: not alive(child), what="the child to end with the session")


def test_the_launcher_imports_the_stdlib_and_one_module_of_ours(rundir: Path) -> None:
    start_server(rundir)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "toycoder_daemon", "--version"],
                         capture_output=True, text=True, cwd=ROOT, timeout=scaled(60))
    assert out.returncode == 0 and out.stdout == "toycoder-daemon 0.1.0\n", out.stderr
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    ours = {n.strip() for n in names if n.strip().startswith("toycoder_daemon")}
    # core/util/rundir: the runtime dir, shared with the live stream between daemons (standard modules only)
    assert ours == {"toycoder_daemon", "toycoder_daemon.warm", "toycoder_daemon.warm.launcher", "toycoder_daemon.core",
                    "toycoder_daemon.core.util", "toycoder_daemon.core.util.rundir"}, ours
    heavy = {n for n in names if n.split(".")[0] in {"pydantic", "pydantic_core", "pygls", "lsprotocol", "acp", "yaml",
                                                      "httpx2", "asyncio"}}
    assert not heavy, heavy


def test_the_installed_script_imports_no_enum(rundir: Path) -> None:
    """bin/toycoder-daemon (what installers put on PATH) and the launcher import neither `re` nor
    `enum` (which pip's entry-point wrapper, socket.py and signal.py would): ~17 ms of a ~50 ms warm
    start. Without `site` (`-S`, the dependencies on PYTHONPATH): in the project's venv, site loads
    the editable install's finder, which imports both before any script runs. A first launch serves
    cold and starts a server with the same flags; the second is served warm (a cold one would import
    argparse and re)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])}
    argv = [sys.executable, "-S", "-X", "importtime", str(ROOT / "bin" / "toycoder-daemon"), "--version"]
    for launch in ("cold", "warm"):
        out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=scaled(60),
                             start_new_session=True)
        assert out.returncode == 0 and out.stdout == "toycoder-daemon 0.1.0\n", (launch, out.stderr)
        if launch == "cold":
            wait_for_server(rundir)
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "site" not in names and "toycoder_daemon.warm.launcher" in names, names
    assert not {"re", "enum", "socket", "signal", "selectors", "typing", "argparse"} & names, sorted(names)


async def test_cold_when_disabled_and_no_server_is_started(rundir: Path, workspace: Path, llm: FakeLLM,
                                                           tmp_path: Path) -> None:
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace, env={"TOYCODER_WARM": "0"})
    await d.call("toycoder/session/new", {})
    assert "_pydantic_core" in maps_of(d.proc.pid)  # the daemon runs in the launcher's process
    assert serving_pid(d.proc.pid, rundir) == d.proc.pid
    mine = f"{RUNTIME_VAR}={rundir}".encode()
    # the daemon's own children (rg listing the workspace, say) carry its environment: not a server
    others = [p for p in live_pids() if p != os.getpid() and has_env(p, mine) and not descends_from(p, d.proc.pid)]
    assert others == [] and sockets(rundir) == []
    assert await d.close() == 0


def test_interpreter_flags_and_hash_seed_name_the_server(rundir: Path) -> None:
    """A forked child keeps its server's flags and hash seed: launches with other `-X utf8`, `-B` or
    PYTHONHASHSEED get a server of their own, started with the same flags and seed."""
    launches = {"utf8": (["-X", "utf8=1"], "7"), "plain": (["-X", "utf8=0", "-B"], "8")}
    for opts, seed in launches.values():
        done = subprocess.run([sys.executable, *opts, "-m", "toycoder_daemon", "--version"], capture_output=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, cwd=str(ROOT), timeout=scaled(60),
                              start_new_session=True)
        assert done.returncode == 0, done.stderr
    wait_until(lambda: len(statuses(rundir)) == 2, timeout=60, what="a fork server for each set of flags")
    for shown in statuses(rundir):
        argv = cmdline_of(shown["pid"]).split(b"\0")
        (name,) = [k for k, (opts, _) in launches.items() if all(o.encode() in argv for o in opts)]
        assert f"PYTHONHASHSEED={launches[name][1]}".encode() in environ_of(shown["pid"])


def test_an_edit_in_place_is_never_served_by_the_old_server(rundir: Path, tmp_path: Path) -> None:
    """An editable install edited in place (same inode and size: the folder's mtime does not move)
    after its server started: the next launch runs the new code, and a server of the new code
    starts beside the old one."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "toycoder_daemon", tree / "toycoder_daemon", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(tree)}
    assert run("--version", env=env, cwd=tree).stdout == "toycoder-daemon 0.1.0\n"
    wait_for_server(rundir, timeout=60)
    (old,) = sockets(rundir)
    main = tree / "toycoder_daemon" / "faces" / "main.py"
    folder = os.stat(main.parent).st_mtime_ns
    text = main.read_bytes()
    assert text.count(b'"toycoder-daemon {__version__}"') == 1
    with open(main, "r+b") as f:
        f.write(text.replace(b'"toycoder-daemon {__version__}"', b'"toycoder-daemoX {__version__}"'))
    assert os.stat(main.parent).st_mtime_ns == folder
    assert run("--version", env=env, cwd=tree).stdout == "toycoder-daemoX 0.1.0\n"
    wait_until(lambda: len(statuses(rundir)) == 2, timeout=60, what="a server of the edited code")
    assert old in sockets(rundir)
    assert run("--version", env=env, cwd=tree).stdout == "toycoder-daemoX 0.1.0\n"  # the new server serves it


def test_warm_status_and_warm_stop(rundir: Path) -> None:
    server = start_server(rundir)
    shown = json.loads(run("--warm-status").stdout)
    assert shown["running"] and shown["pid"] == server["pid"] and shown["children"] == []
    stopped = run("--warm-stop")
    assert stopped.returncode == 0 and stopped.stdout == "stopped 1 fork server\n"
    wait_until(lambda: not alive(server["pid"]), what="the server to exit")
    after = run("--warm-status", env={"TOYCODER_WARM": "1"})
    assert after.returncode == 1 and not json.loads(after.stdout)["running"]


async def test_the_configured_idle_time_ends_the_server(rundir: Path, workspace: Path, llm: FakeLLM,
                                                        tmp_path: Path) -> None:
    server = start_server(rundir)
    cfg = write_config(tmp_path / "c.yaml", llm, extra="daemon: {warm_idle_minutes: 0.02}\n")
    d = await started(rundir, cfg, workspace)
    assert served_warm(d.proc.pid, rundir)
    wait_until(lambda: (status(sockets(rundir)[0]) or {}).get("idleMinutes") == 0.02, what="the child's report")
    assert alive(server["pid"])  # not while a daemon runs
    assert await d.close() == 0
    wait_until(lambda: not alive(server["pid"]), 20, "the idle server to exit")
    assert sockets(rundir) == []


def test_the_server_forks_only_single_threaded() -> None:
    code = ("import threading, time\nfrom toycoder_daemon.warm.server import threads_problem\n"
            "print(threads_problem())\nstop = threading.Event()\nt = threading.Thread(target=stop.wait)\nt.start()\n"
            "print(threads_problem())\nstop.set()\nt.join()\n"
            # a joined thread is gone from /proc/self/task a moment after join returns
            "deadline = time.monotonic() + 10\nwhile threads_problem() and time.monotonic() < deadline:\n"
            "    time.sleep(0.01)\nprint(threads_problem())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(60))
    assert out.stdout.splitlines() == ["None", "2 Python threads", "None"], out.stderr


# -- faults -------------------------------------------------------------------------------------

async def test_a_server_killed_between_starts(rundir: Path, workspace: Path, llm: FakeLLM, tmp_path: Path) -> None:
    """The next launch works (cold, the socket is stale) and the one after is warm."""
    first = start_server(rundir)
    os.kill(first["pid"], signal.SIGKILL)
    wait_until(lambda: not alive(first["pid"]), what="the server to die")
    cfg = write_config(tmp_path / "c.yaml", llm)
    cold = await started(rundir, cfg, workspace)
    assert not served_warm(cold.proc.pid, rundir)
    second = wait_for_server(rundir)
    assert second["pid"] != first["pid"]
    warm = await started(rundir, cfg, workspace)
    assert served_warm(warm.proc.pid, rundir)
    assert await cold.close() == 0 and await warm.close() == 0
    assert "is stale" in await cold.stderr_text()


FAKE_SERVER = """
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
print("listening", flush=True)
conn, _ = s.accept()
head, anc, _, _ = conn.recvmsg(8, socket.CMSG_SPACE(6 * 4))
kind, length = struct.unpack("!4sI", head)
got = 0
while got < length:
    got += len(conn.recv(length - got))
print("got", kind.decode(), len(anc[0][2]) // 4, flush=True)
time.sleep(600)
"""


def read_frame(stream: Any) -> dict[str, Any]:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return dict(json.loads(stream.read(length)))


def test_a_server_killed_in_the_handshake(rundir: Path, workspace: Path) -> None:
    """The launcher serves cold within 100 ms of the server's death; every frame sent before it is
    answered once: none lost, none doubled."""
    path = server_socket(rundir)
    fake = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(path)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert fake.stdout is not None and fake.stdout.readline() == "listening\n"
        proc = subprocess.Popen(DAEMON, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=ROOT, start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}}}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.flush()
        assert fake.stdout.readline() == "got TCWL 6\n"  # the launch, with stdin, stdout, stderr, cwd, the two pipes
        lines: list[tuple[float, bytes]] = []
        reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), ln) for ln in proc.stderr), daemon=True)  # type: ignore[union-attr]
        reader.start()
        killed = time.monotonic()
        os.kill(fake.pid, signal.SIGKILL)
        said = wait_until(lambda: [t for t, ln in lines if b"starting cold" in ln], what="the launcher to go cold")
        assert said[0] - killed <= scaled(0.1), f"{(said[0] - killed) * 1000:.0f} ms"
        answers = [read_frame(proc.stdout), read_frame(proc.stdout)]
        assert sorted(a["id"] for a in answers) == [1, 2] and "capabilities" in answers[0]["result"]
        proc.stdin.close()
        assert proc.wait(scaled(20)) == 0
        assert proc.stdout.read() == b""  # nothing more: no answer twice
    finally:
        fake.kill()
        fake.wait()


async def test_a_stale_socket_is_refused_and_replaced(rundir: Path, workspace: Path, llm: FakeLLM, tmp_path: Path) -> None:
    path = server_socket(rundir)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # a socket file nothing listens on (a server that died)
    cfg = write_config(tmp_path / "c.yaml", llm)
    d = await started(rundir, cfg, workspace)
    assert not served_warm(d.proc.pid, rundir)
    wait_for_server(rundir)
    warm = await started(rundir, cfg, workspace)
    assert served_warm(warm.proc.pid, rundir)
    assert await d.close() == 0 and await warm.close() == 0
    assert f"fork server socket {path} is stale" in await d.stderr_text()


@pytest.fixture
def other_user() -> Iterator[tuple[str, int, int]]:
    if not CAN_ADD_USERS:
        pytest.skip("a socket or directory of another uid needs root, useradd and runuser")
    from sandbox_helpers import temporary_user

    with temporary_user() as name:
        out = subprocess.run(["id", "-u", name], capture_output=True, text=True, check=True)
        gid = subprocess.run(["id", "-g", name], capture_output=True, text=True, check=True)
        yield name, int(out.stdout), int(gid.stdout)


OTHER_SERVER = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])
if sys.argv[2] == "file":
    os.chown(sys.argv[1], int(sys.argv[3]), int(sys.argv[4]))
else:  # the socket file stays ours; who listens (what SO_PEERCRED shows) is the other user
    os.setgid(int(sys.argv[4])); os.setuid(int(sys.argv[3]))
s.listen(8)
print("listening", flush=True)
while True:
    s.accept()
"""


@pytest.mark.parametrize("whose", ["listener", "file"])
def test_a_socket_of_another_uid_is_refused(rundir: Path, workspace: Path, other_user: tuple[str, int, int],
                                            whose: str) -> None:
    _, uid, gid = other_user
    path = server_socket(rundir)
    other = subprocess.Popen([sys.executable, "-c", OTHER_SERVER, str(path), whose, str(uid), str(gid)],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "listening\n"
        out = run("--check-config")
        assert out.returncode == 0 and json.loads(out.stdout)["valid"]  # served, cold
        expected = f"is served by uid {uid}" if whose == "listener" else f"is not a socket of uid {os.geteuid()}"
        assert f"fork server socket {path} {expected}" in out.stderr and "starting cold" in out.stderr
    finally:
        other.kill()
        other.wait()


def test_the_server_refuses_a_launcher_of_another_uid(rundir: Path, other_user: tuple[str, int, int]) -> None:
    from sandbox_helpers import python_for

    name, uid, _ = other_user
    python = python_for(name)
    if python is None:
        pytest.skip(f"no Python interpreter that the test user {name} may run")
    server = start_server(rundir)
    (path,) = sockets(rundir)
    rundir.chmod(0o711)  # a mistake of ours, made here so that the other user can reach the socket at all
    path.chmod(0o777)
    client = ("import socket, struct, sys\ns = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
              "try:\n    s.sendall(struct.pack('!4sI', b'TCWL', 0))\nexcept BrokenPipeError:\n    pass  # refused already\nkind, n = struct.unpack('!4sI', s.recv(8))\n"
              "print(kind.decode(), s.recv(n).decode())\n")
    out = subprocess.run(["runuser", "-u", name, "--", python, "-c", client, str(path)], capture_output=True,
                         text=True, timeout=scaled(30))
    rundir.chmod(0o700)
    assert out.stdout.strip() == f"TCWR uid {uid} is not the fork server's", out.stderr
    assert (status(path) or {}).get("children") == [] and status(path)["pid"] == server["pid"]  # type: ignore[index]


@pytest.mark.parametrize("problem", ["mode 0777", "another owner"])
def test_a_runtime_dir_not_ours_alone_is_refused(rundir: Path, problem: str, request: pytest.FixtureRequest) -> None:
    if problem == "mode 0777":
        rundir.chmod(0o777)
        expected = f"runtime dir {rundir} has mode 0777, not 0700"
    else:
        _, uid, gid = request.getfixturevalue("other_user")
        os.chown(rundir, uid, gid)
        expected = f"runtime dir {rundir} is owned by uid {uid}"
    before = os.stat(rundir)
    out = run("--check-config")
    assert out.returncode == 0 and json.loads(out.stdout)["valid"]  # served, cold
    assert expected in out.stderr and "starting cold" in out.stderr
    after = os.stat(rundir)
    assert (after.st_mode, after.st_uid) == (before.st_mode, before.st_uid) and list(rundir.iterdir()) == []
    os.chown(rundir, 0, 0) if problem != "mode 0777" else rundir.chmod(0o700)


async def test_a_launcher_killed_mid_turn_takes_its_child_and_tools_along(rundir: Path, workspace: Path, llm: FakeLLM,
                                                                         tmp_path: Path) -> None:
    start_server(rundir)
    cfg = write_config(tmp_path / "c.yaml", llm,
                       extra="permissions: {allow: ['run_command(sleep *)']}\ntools: {enabled: [run_command]}\n")
    d = await started(rundir, cfg, workspace)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid
    sleep = sleep_command(120)
    llm.add({"tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]}, {"text": "done"})
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    d.request_future("toycoder/prompt", {"sessionId": sid, "text": "sleep"})
    await d.wait_for(lambda: processes_running(sleep), timeout=30, what="the command to start")
    os.kill(d.proc.pid, signal.SIGKILL)
    wait_until(lambda: not alive(child) and processes_with(sleep) == [], 2, "the child and its command to end")
    assert await d.close() == -signal.SIGKILL


async def test_a_killed_launcher_answers_nothing_when_its_editor_closes_stdin(rundir: Path, workspace: Path,
                                                                              llm: FakeLLM, tmp_path: Path) -> None:
    """Neovim (vim.system) closes the daemon's stdin as it sees the launcher exit, and reads stdout to
    its end: the child must die as a killed cold daemon does, not shut down and answer the turn
    "cancelled" (the Neovim tier showed "cancelled" under load). It is stopped over the kill, so that
    the launcher's watch and the stdin reader wake together."""
    start_server(rundir)
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid
    llm.add({"text": "never " * 200, "chunk_size": 6, "chunk_delay": 0.05})
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    _, answer = d.request_future("toycoder/prompt", {"sessionId": sid, "text": "talk"})
    await d.wait_for(lambda: "never never" in d.streamed_text(sid), what="the reply to stream")
    # asked before the exit is seen, wait() returns only once every pipe is closed too: no transport
    # is left for the GC after the loop has closed
    ended = asyncio.ensure_future(d.proc.wait())
    os.kill(child, signal.SIGSTOP)
    try:
        os.kill(d.proc.pid, signal.SIGKILL)
        wait_until(lambda: not alive(d.proc.pid), 10, "the launcher to die")  # a zombie: its files are closed
        assert d.proc.stdin is not None
        d.proc.stdin.close()
    finally:
        with contextlib.suppress(ProcessLookupError):  # the fork server may have ended it already
            os.kill(child, signal.SIGCONT)
    await d.read_to_end()  # the child was stdout's last writer
    assert not answer.done(), answer.result()
    assert await asyncio.wait_for(ended, scaled(10)) == -signal.SIGKILL
    await d.close()


async def test_a_crashed_child_ends_its_launcher_the_same_way(rundir: Path, workspace: Path, llm: FakeLLM,
                                                              tmp_path: Path) -> None:
    start_server(rundir)
    bad = run("--log-level", "nonsense")
    cold = run("--log-level", "nonsense", env={"TOYCODER_WARM": "0"})
    assert bad.returncode == cold.returncode == 2 and "invalid choice" in bad.stderr
    assert bad.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1]
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid
    os.kill(child, signal.SIGKILL)
    assert await asyncio.wait_for(d.proc.wait(), scaled(10)) == -signal.SIGKILL


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_signals_to_the_launcher_reach_the_child(rundir: Path, workspace: Path, llm: FakeLLM, tmp_path: Path,
                                                       signum: int) -> None:
    start_server(rundir)
    # under `nohup` this run ignores SIGHUP, and so would its launcher (an ignored signal survives
    # exec; the launcher keeps ignoring what its parent ignored): this launch starts without that
    previous = signal.signal(signum, signal.SIG_DFL)
    try:
        d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace)
    finally:
        signal.signal(signum, previous)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid
    d.proc.send_signal(signum)
    assert await asyncio.wait_for(d.proc.wait(), scaled(10)) == -signum  # the child died of it; so did we
    wait_until(lambda: not alive(child), what="the child to be gone")


def test_twenty_launchers_at_once_each_get_their_own_env_and_cwd(rundir: Path, tmp_path: Path) -> None:
    start_server(rundir)
    procs = []
    for i in range(20):
        home = tmp_path / f"launch{i}"
        home.mkdir()
        (home / "cfg.yaml").write_text(f'providers:\n  p:\n    api_keys: [k]\n    base_url: "${{WARM_URL}}/{i}"\n'
                                       "default_provider: p\n")
        procs.append(subprocess.Popen([*DAEMON, "--check-config"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, cwd=home, env={**os.environ, "TOYCODER_CONFIG": "cfg.yaml",
                                                                "WARM_URL": f"http://host{i}"},
                                      start_new_session=True))
    for i, p in enumerate(procs):
        out, err = p.communicate(timeout=scaled(60))
        assert p.returncode == 0 and "starting cold" not in err, err
        assert json.loads(out)["providers"][0]["baseUrl"] == f"http://host{i}/{i}"


async def test_two_launches_reach_their_own_model_server_and_keys_stay_theirs(rundir: Path, workspace: Path) -> None:
    server = start_server(rundir)
    keys = {"a": f"sk-warm-a-{os.urandom(8).hex()}", "b": f"sk-warm-b-{os.urandom(8).hex()}"}
    with FakeLLM() as llm_a, FakeLLM() as llm_b:
        llms = {"a": llm_a, "b": llm_b}
        daemons: dict[str, Daemon] = {}
        for name, llm in llms.items():
            llm.add({"text": f"from {name}"})
            daemons[name] = await Daemon.start(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": keys[name],
                                                    "TOYCODER_MODEL": "fake-model"})
            await daemons[name].initialize(workspace)
        for name, d in daemons.items():
            assert served_warm(d.proc.pid, rundir)
            sid = (await d.call("toycoder/session/new", {}))["sessionId"]
            await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
            assert d.streamed_text(sid) == f"from {name}"
            # the turn, and maybe already the title request that follows it: each with this launch's key
            assert {r["headers"]["authorization"] for r in llms[name].requests} == {f"Bearer {keys[name]}"}
        children = {name: serving_pid(d.proc.pid, rundir) for name, d in daemons.items()}
        for name, other in (("a", "b"), ("b", "a")):
            block = b"\0".join(environ_of(children[name]))
            assert f"OPENAI_BASE_URL={llms[name].base_url}".encode() in block
            assert keys[other].encode() not in block
            assert keys[name].encode() not in block and b"OPENAI_API_KEY=" in block  # blanked, as a cold start does
            launcher_block = b"\0".join(environ_of(daemons[name].proc.pid))  # the launcher's copy too
            assert keys[name].encode() not in launcher_block and b"OPENAI_API_KEY=" in launcher_block
        assert not [e for e in environ_of(server["pid"]) if b"sk-warm" in e or e.startswith(b"OPENAI")]
        assert memory_holds(server["pid"], [k.encode() for k in keys.values()]) == []
        for d in daemons.values():
            assert await d.close() == 0


def test_a_launcher_in_another_network_namespace_serves_cold(rundir: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("`unshare -n` needs root")
    start_server(rundir)
    out = subprocess.run(["unshare", "-n", *DAEMON, "--version"], capture_output=True, text=True, cwd=ROOT,
                         timeout=scaled(60))
    assert out.returncode == 0 and out.stdout == "toycoder-daemon 0.1.0\n"
    assert "the fork server is in another net namespace; starting cold" in out.stderr
    assert launcher.NAMESPACES == ("mnt", "net", "pid", "user", "uts", "ipc", "cgroup")


# -- the server in-process: one connection's faults, over a socketpair ---------------------------

@pytest.fixture
def inproc_server() -> Iterator[Any]:
    from toycoder_daemon.warm.server import Server

    server = Server("/nonexistent/unused.sock", -1)
    yield server
    os.close(server.wake_r)
    os.close(server.wake_w)


def send_launch_header(sock: socket.socket, nfds: int, length: int) -> None:
    """A LAUNCH header carrying `nfds` fds (of /dev/null; the copies sent are closed here)."""
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(nfds)]
    try:
        sock.sendmsg([struct.pack("!4sI", launcher.LAUNCH, length)],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{nfds}i", *fds))])
    finally:
        for fd in fds:
            os.close(fd)


def test_a_launch_of_five_fds_from_a_peer_that_left_is_dropped(inproc_server: Any) -> None:
    """launch() closes the fds it was handed; nothing closes them twice (EBADF would end the server)."""
    ours, theirs = socket.socketpair()
    send_launch_header(theirs, 5, 0)
    theirs.close()
    before = open_fds() - {ours.fileno()}
    inproc_server.serve(ours)  # refuses (5 fds), to a peer that is gone: logged, not raised
    assert ours.fileno() == -1 and open_fds() == before


def test_a_stale_event_does_not_end_a_launch_that_reused_the_fd_number(inproc_server: Any) -> None:
    """One poll round: a launcher hangs up and its child is reaped (its connection closed), then an
    accept gets the same fd number for a new launch. The round's stale event for that number must not
    be taken as the new launcher's end."""
    old, old_peer = socket.socketpair()
    number = old.fileno()
    inproc_server.children[101] = (old, 1)
    conns = {number: old}  # what the round registered
    del inproc_server.children[101]  # reaped earlier in the round
    old.close()
    reused, new_peer = socket.socketpair()  # the new launch's connection gets the freed number
    if reused.fileno() != number:
        os.dup2(reused.fileno(), number)
        reused.close()
        reused = socket.socket(fileno=number)
    inproc_server.children[202] = (reused, 2)
    try:
        inproc_server.dispatch([(number, select.POLLIN)], conns)
        assert inproc_server.children[202] == (reused, 2) and reused.fileno() == number
    finally:
        reused.close()
        old_peer.close()
        new_peer.close()


def test_a_launcher_stalling_mid_message_is_dropped(inproc_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from toycoder_daemon.warm import server as server_module

    monkeypatch.setattr(server_module, "READ_TIMEOUT", 0.2)
    ours, theirs = socket.socketpair()
    with theirs:
        send_launch_header(theirs, launcher.LAUNCH_FDS, 10)
        theirs.sendall(b"ab")  # 2 of 10 bytes, then nothing
        before = open_fds() - {ours.fileno()}
        inproc_server.serve(ours)
        assert ours.fileno() == -1 and open_fds() == before and inproc_server.children == {}


def test_a_peer_trickling_its_message_is_cut_off_at_the_deadline(inproc_server: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """READ_TIMEOUT bounds the whole message, not each receive: a byte every 0.15 s (each receive
    well within it) is cut off once the message as a whole took 0.5 s."""
    from toycoder_daemon.warm import server as server_module

    monkeypatch.setattr(server_module, "READ_TIMEOUT", 0.5)
    ours, theirs = socket.socketpair()
    message = struct.pack("!4sI", launcher.IDLE, 3) + b"5.0"

    def trickle() -> None:
        with theirs, contextlib.suppress(OSError):  # the server hung up on us: that is the point
            for i in range(len(message)):
                theirs.send(message[i:i + 1])
                time.sleep(0.15)  # the slowness under test, not a wait for a condition

    peer = threading.Thread(target=trickle)
    peer.start()
    began = time.monotonic()
    inproc_server.serve(ours)
    took = time.monotonic() - began
    peer.join(scaled(10))
    assert inproc_server.idle_minutes == server_module.IDLE_MINUTES and took < 1.0, took


def _ignore_usr2_block_usr1() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])


async def test_the_first_launchers_signal_state_reaches_neither_the_server_nor_later_children(
        rundir: Path, workspace: Path, llm: FakeLLM, tmp_path: Path) -> None:
    first = subprocess.run([*DAEMON, "--version"], capture_output=True, cwd=ROOT, timeout=scaled(60),
                           preexec_fn=_ignore_usr2_block_usr1, start_new_session=True)
    assert first.returncode == 0, first.stderr
    server = wait_for_server(rundir)
    assert signal.SIGUSR2 not in signal_set(server["pid"], "SigIgn")
    assert signal.SIGUSR1 not in signal_set(server["pid"], "SigBlk")
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid, "the launch was not served warm"
    ignored = signal_set(child, "SigIgn")
    assert signal.SIGUSR2 not in ignored and signal.SIGPIPE in ignored, ignored  # as a cold interpreter's
    assert await d.close() == 0


def test_a_launcher_with_no_new_privs_serves_cold(rundir: Path) -> None:
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    start_server(rundir)
    out = subprocess.run(["setpriv", "--no-new-privs", *DAEMON, "--version"], capture_output=True, text=True, cwd=ROOT,
                         timeout=scaled(60), start_new_session=True)
    assert out.returncode == 0 and out.stdout == "toycoder-daemon 0.1.0\n", out.stderr
    assert "the fork server's NoNewPrivs is not ours" in out.stderr and "starting cold" in out.stderr, out.stderr
    plain = run("--version")  # the same launch without it: warm, so nothing else differs
    assert plain.returncode == 0 and "starting cold" not in plain.stderr, plain.stderr


def test_a_child_dead_before_go_makes_the_launch_cold() -> None:
    """serve_warm in-process: the "go" pipe's reader is gone, so the launch is handed back (NotWarm),
    with our signal handlers and stdio untouched and its fds closed."""
    go_r, go_w = os.pipe()
    os.close(go_r)
    blanks_r, blanks_w = os.pipe()
    ours, theirs = socket.socketpair()
    handlers = {s: signal.getsignal(s) for s in launcher.FORWARDED}
    before, sock_fd = open_fds(), ours.fileno()
    try:
        with pytest.raises(launcher.NotWarm, match="ended before it started"):
            launcher.serve_warm(ours, launcher.Child(os.getpid(), None, blanks_r), go_w)
        assert {s: signal.getsignal(s) for s in launcher.FORWARDED} == handlers
        assert ours.fileno() == -1 and open_fds() == before - {go_w, blanks_r, sock_fd}
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        os.close(blanks_w)
        theirs.close()


@pytest.mark.parametrize("launcher_alive", [True, False])
def test_the_end_of_input_kills_a_child_whose_launcher_died(launcher_alive: bool) -> None:
    """What a warm child does first as its input ends (faces.main.on_input_end): with the launcher's
    end of the "go" pipe closed it dies at once, SIGKILL, as its launcher did; else the shutdown goes on."""
    script = ("import os; from toycoder_daemon.warm import child; r, w = os.pipe(); "
              + ("" if launcher_alive else "os.close(w); ") + "child.die_if_launcher_gone(r); print('shut down')")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(ROOT),
                         timeout=scaled(30))
    if launcher_alive:
        assert (out.returncode, out.stdout) == (0, "shut down\n"), out.stderr
    else:
        assert (out.returncode, out.stdout) == (-signal.SIGKILL, ""), out.stderr


def test_blanking_for_a_child_that_is_gone_does_not_raise() -> None:
    report_r, report_w = os.pipe()
    answer_r, answer_w = os.pipe()
    os.close(answer_r)
    try:
        os.write(report_w, struct.pack("!I", 0))  # a report naming nothing, to a child that left
        assert launcher.Blanks(report_r).read(answer_w)
    finally:
        for fd in (report_r, report_w, answer_w):
            os.close(fd)


@pytest.mark.parametrize("minutes", [b"inf", b"nan", b"-1.0", b"1e300", b"20000.0"])
def test_an_idle_limit_out_of_range_is_refused(inproc_server: Any, minutes: bytes) -> None:
    for value, expected in ((minutes, 30.0), (b"5.0", 5.0)):  # the same connection's kind, in range, is taken
        ours, theirs = socket.socketpair()
        with theirs:
            theirs.sendall(struct.pack("!4sI", launcher.IDLE, len(value)) + value)
            inproc_server.serve(ours)
        assert inproc_server.idle_minutes == expected


def test_the_config_bounds_the_idle_limit() -> None:
    from pydantic import ValidationError

    from toycoder_daemon.config.model import DaemonConfig

    assert DaemonConfig(warm_idle_minutes=10080).warm_idle_minutes == 10080
    with pytest.raises(ValidationError):
        DaemonConfig(warm_idle_minutes=1e9)


def test_a_refusal_carrying_an_fd_leaves_no_fd_open() -> None:
    """hand_over in-process against a server that refuses with an fd attached: NotWarm, nothing leaked."""
    directory = new_runtime_dir()
    path = str(directory / "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def refuse() -> None:
        conn, _ = listener.accept()
        with conn:
            header = conn.recv(8)
            conn.recv(struct.unpack("!4sI", header)[1], socket.MSG_WAITALL)
            null = os.open(os.devnull, os.O_RDONLY)
            conn.sendmsg([struct.pack("!4sI", launcher.REFUSED, 2) + b"no"],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", null))])
            os.close(null)

    fake = threading.Thread(target=refuse)
    fake.start()
    before = open_fds()
    try:
        with pytest.raises(launcher.NotWarm, match="refused: no"):
            launcher.hand_over(path)
        fake.join(scaled(10))
        assert open_fds() == before
    finally:
        listener.close()
        shutil.rmtree(directory, ignore_errors=True)


# -- the spare child ------------------------------------------------------------------------------

def ready_spare(rundir: Path, other_than: int = 0) -> int:
    """The pid of the server's spare once one (not `other_than`) is rehearsed and waits for a launch."""
    def spare() -> int:
        found = [s["spare"] for s in statuses(rundir) if s.get("spare")]
        return found[0]["pid"] if found and found[0]["ready"] and found[0]["pid"] != other_than else 0

    return wait_until(spare, 30, "a ready spare")


async def test_a_killed_spare_is_replaced_and_the_next_launch_is_served_by_it(rundir: Path, workspace: Path,
                                                                             llm: FakeLLM, tmp_path: Path) -> None:
    server = start_server(rundir)
    first = ready_spare(rundir)
    assert parent_of(first) == server["pid"] and os.getpgid(first) == first  # detached already
    os.kill(first, signal.SIGKILL)
    second = ready_spare(rundir, other_than=first)
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace, env={"WARM_PROBE": "spare"},
                      cwd=str(workspace))
    assert serving_pid(d.proc.pid, rundir) == second  # the spare took the launch
    assert cwd_of(second) == str(workspace) and b"WARM_PROBE=spare" in environ_of(second)
    assert cmdline_of(second) == cmdline_of(d.proc.pid) and os.getsid(second) == second
    llm.add({"text": "from the spare"})
    sid = (await d.call("toycoder/session/new", {}))["sessionId"]
    await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
    assert d.streamed_text(sid) == "from the spare"
    assert ready_spare(rundir, other_than=second) not in (first, second)  # the next one, for the next launch
    assert await d.close() == 0
    wait_until(lambda: not alive(second), what="the spare's daemon to end with its session")


async def test_a_spare_holds_no_key_and_a_spare_served_launch_is_scrubbed(rundir: Path, workspace: Path) -> None:
    """The spare is forked from the server, which never reads a launch's message: the spare after a
    launch holds none of its keys (environment or memory); the launch it served blanks its key in
    both /proc copies (its own and its launcher's), as a cold start does."""
    start_server(rundir)
    spare = ready_spare(rundir)
    key = f"sk-spare-{os.urandom(8).hex()}"
    with FakeLLM() as llm:
        llm.add({"text": "keyed"})
        d = await Daemon.start(env={"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": key,
                                    "TOYCODER_MODEL": "fake-model"})
        await d.initialize(workspace)
        assert serving_pid(d.proc.pid, rundir) == spare
        sid = (await d.call("toycoder/session/new", {}))["sessionId"]
        await d.call("toycoder/prompt", {"sessionId": sid, "text": "hi"})
        assert {r["headers"]["authorization"] for r in llm.requests} == {f"Bearer {key}"}
        for pid in (spare, d.proc.pid):
            block = b"\0".join(environ_of(pid))
            assert key.encode() not in block and b"OPENAI_API_KEY=" in block
        after = ready_spare(rundir, other_than=spare)
        assert not [e for e in environ_of(after) if e.startswith((b"OPENAI", b"TOYCODER_MODEL"))]
        assert memory_holds(after, [key.encode()]) == []
        assert await d.close() == 0


def test_initialize_is_answered_before_the_app_opens(rundir: Path, workspace: Path, llm: FakeLLM,
                                                     tmp_path: Path) -> None:
    """The LSP face opens its App (config, workspace, store) once `initialize`'s answer is in the
    client's pipe, not while the writer still has it. The pipe is kept full here, so the answer
    cannot go: a request the daemon refuses after initialize is logged, and the App's "workspace"
    line is not, until the client reads."""
    start_server(rundir)
    ready_spare(rundir)
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(w, False)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(w, b"f" * 4096)
    os.set_blocking(w, True)  # the daemon shares this open file: its writes must block, not fail
    cfg = write_config(tmp_path / "c.yaml", llm)
    proc = subprocess.Popen([*DAEMON, "--config", str(cfg), "--log-level", "INFO"], stdin=subprocess.PIPE,
                            stdout=w, stderr=subprocess.PIPE, cwd=str(workspace), start_new_session=True)
    os.close(w)
    lines: list[bytes] = []
    assert proc.stderr is not None and proc.stdin is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, b"")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        assert served_warm(proc.pid, rundir) or wait_until(lambda: served_warm(proc.pid, rundir), what="a warm child")
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "initialized", "params": {}}))  # refused: logged
        proc.stdin.flush()
        wait_until(lambda: any(b"refused message" in line for line in lines), 30, "the refusal's log line")
        assert not any(b" workspace " in line for line in lines), lines
        out = b""
        while b'"id": 1' not in out and b'"id":1' not in out:
            chunk = os.read(r, 65536)
            assert chunk, "stdout closed before the answer"
            out += chunk
        assert out.startswith(b"f" * filled) and b'"capabilities"' in out
        wait_until(lambda: any(b" workspace " in line for line in lines), 30, "the App to open after the answer")
    finally:
        proc.stdin.close()
        with contextlib.suppress(OSError):
            while os.read(r, 65536):
                pass
        os.close(r)
        proc.wait(scaled(30))
        reader.join(scaled(10))


async def test_a_server_started_with_the_spare_off_forks_per_launch(rundir: Path, workspace: Path, llm: FakeLLM,
                                                                    tmp_path: Path) -> None:
    """TOYCODER_WARM_SPARE=0 in the launch that starts the server: no spare, each launch forked for."""
    assert run("--version", env={"TOYCODER_WARM_SPARE": "0"}).returncode == 0
    server = wait_for_server(rundir)
    assert server["spare"] is None and b"TOYCODER_WARM_SPARE=0" in environ_of(server["pid"])
    d = await started(rundir, write_config(tmp_path / "c.yaml", llm), workspace)
    child = serving_pid(d.proc.pid, rundir)
    assert child != d.proc.pid and parent_of(child) == server["pid"]
    assert statuses(rundir)[0]["spare"] is None
    assert await d.close() == 0

