"""Timestamps (and optionally a CPU profile) inside a daemon process, for spawn_profile.py.

Loaded as `sitecustomize` (spawn_profile.py writes a two-line one into its temp dir and puts that
dir on PYTHONPATH), so the daemon runs exactly as launched, and the first stamp is the interpreter
being ready (site and every .pth done). Nothing is imported early: stamps hang on modules as they
finish executing (a meta-path finder that wraps only the few loaders named below) and on the
socket (the model's HTTP connection is the only socket of the bench's turn). Everything goes to
$BENCH_TRACE when the first streamed chunk (the fake model's "tok0") is queued for the client:
`name=perf_counter` lines (CLOCK_MONOTONIC, the client's clock too), and with $BENCH_TRACE_PROFILE
the main thread's cProfile (CPU timer) plus every worker-thread job that ended by then, as one
pstats file. stdout stays the protocol's; only stderr gets a marker line (for -X importtime).

Warm launches (spawn_profile.py --warm): the same module is loaded in the launcher (as its
sitecustomize: stamps named `l_*`, written to $BENCH_TRACE.launcher once the child has the fds) and
in a fork server the bench starts itself (imported before the server's main), where each forked
child starts its stamps afresh (`forked`) and writes them at its first chunk as above.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

_now = time.perf_counter
stamps: dict[str, float] = {"ready": _now()}
cpu_at: dict[str, float] = {"ready": time.process_time()}
"""The process's own CPU seconds (all threads; a forked child's since its fork) at each stamp."""
PROFILE = os.environ.get("BENCH_TRACE_PROFILE")
_profiles: list[Any] = []
_preloaded: set[str] = set()
"""In a warm child: the modules the fork server had imported (the others are listed at the end)."""
_done = False


def stamp(name: str) -> None:
    if name not in stamps:
        stamps[name] = _now()
        cpu_at[name] = time.process_time()


def _finish() -> None:
    """The first chunk is queued: write everything (once)."""
    global _done
    if _done:
        return
    _done = True
    stamp("chunk_out")
    if _profiles:
        _profiles[0].disable()
        import pstats

        stats = pstats.Stats(_profiles[0])
        for extra in _profiles[1:]:
            stats.add(extra)
        stats.dump_stats(os.environ.get("BENCH_TRACE_PROFILE") or PROFILE)  # a warm child's: its launch's
    sys.stderr.write("BENCH_TRACE first chunk\n")
    sys.stderr.flush()
    with open(os.environ["BENCH_TRACE"], "w") as f:  # read now: a warm child has just adopted it
        f.write("".join(f"{k}={v!r}\n" for k, v in stamps.items()))
        f.write("".join(f"cpuat_{k}={v!r}\n" for k, v in cpu_at.items()))
        f.write(f"cpu={time.process_time()!r}\n")  # the process's CPU seconds, all threads (a child's: since its fork)
    if _preloaded:
        with open(os.environ["BENCH_TRACE"] + ".imported", "w") as f:
            f.write("".join(f"{name}\n" for name in sorted(set(sys.modules) - _preloaded)))


def _after_outbox(mod: Any) -> None:
    write = mod.Outbox.write

    def traced(self: Any, data: bytes) -> None:
        write(self, data)
        if "prompt" in stamps and b"tok0" in data:
            _finish()

    mod.Outbox.write = traced


def _after_socket(mod: Any) -> None:
    """Stamps on internet sockets only (asyncio's own wake-up pair is AF_UNIX)."""
    sock = mod.socket
    inet = (mod.AF_INET, mod.AF_INET6)
    for name, label in (("connect", "connect"), ("connect_ex", "connect"), ("send", "request_sent"),
                        ("sendall", "request_sent")):
        original = getattr(sock, name)

        def traced(self: Any, *a: Any, _o: Any = original, _l: str = label) -> Any:
            if self.family in inet:
                stamp(_l)
            return _o(self, *a)

        setattr(sock, name, traced)
    for name in ("recv", "recv_into"):
        original = getattr(sock, name)

        def received(self: Any, *a: Any, _o: Any = original) -> Any:
            got = _o(self, *a)
            if got and "request_sent" in stamps and self.family in inet:
                stamp("response_in")
            return got

        setattr(sock, name, received)


def _after_lsp_server(mod: Any) -> None:
    stamp("app_imported")


def _after_lsp_transport(mod: Any) -> None:
    put = mod.Frames.put

    def traced(self: Any, body: bytes | None, problem: str | None) -> None:
        stamp("frame_in")
        if body is not None and b'"toycoder/prompt"' in body:
            stamp("prompt")
        put(self, body, problem)

    mod.Frames.put = traced


def _after_acp(mod: Any) -> None:
    stamp("app_imported")
    prompt = mod.ToyCoderAgent.prompt

    async def traced(self: Any, *a: Any, **k: Any) -> Any:  # the SDK's router calls it with the params
        stamp("prompt")
        return await prompt(self, *a, **k)

    mod.ToyCoderAgent.prompt = traced


def _after_app(mod: Any) -> None:
    opened = mod.App.open.__func__

    def traced(cls: Any, *a: Any, **k: Any) -> Any:
        stamp("app_open")
        try:
            return opened(cls, *a, **k)
        finally:
            stamp("app_opened")

    mod.App.open = classmethod(traced)


def _after_http_stream(mod: Any) -> None:
    """The turn's model call: its first post, and the HTTP client's making (import included)."""
    post, make = mod.StreamTransport.post, mod.StreamTransport._make_client

    async def posted(self: Any, *a: Any) -> None:
        stamp("post")
        await post(self, *a)

    def made(self: Any) -> Any:
        stamp("client_make")
        try:
            return make(self)
        finally:
            stamp("client_made")

    mod.StreamTransport.post = posted
    mod.StreamTransport._make_client = made


def _after_futures_thread(mod: Any) -> None:
    """Each worker-thread job (asyncio.to_thread: the HTTP client's import, file reads) profiled on
    its own, kept if it ends before the first chunk."""
    import cProfile

    run = mod._WorkItem.run

    def traced(self: Any) -> None:
        if _done:
            return run(self)
        prof = cProfile.Profile(time.thread_time)
        prof.enable()
        try:
            return run(self)
        finally:
            prof.disable()
            if not _done:
                _profiles.append(prof)

    mod._WorkItem.run = traced


def _after_launcher(mod: Any) -> None:
    """The launcher's side of a warm launch: its stamps go to $BENCH_TRACE.launcher at "go"."""
    stamp("l_imported")
    install_hash, hand_over, serve_warm = mod.install_hash, mod.hand_over, mod.serve_warm

    def hashed() -> str:
        stamp("l_hash")
        try:
            return install_hash()  # type: ignore[no-any-return]
        finally:
            stamp("l_hashed")

    def handed(path: str) -> Any:
        stamp("l_connect")
        try:
            return hand_over(path)
        finally:
            stamp("l_forked")

    def serving(*a: Any) -> Any:
        stamp("l_go")
        with open(os.environ["BENCH_TRACE"] + ".launcher", "w") as f:
            f.write("".join(f"{k if k.startswith('l_') else 'l_' + k}={v!r}\n" for k, v in stamps.items()))
            f.write("".join(f"cpuat_{k if k.startswith('l_') else 'l_' + k}={v!r}\n" for k, v in cpu_at.items()))
            f.write(f"cpu_launcher={time.process_time()!r}\n")
        return serve_warm(*a)

    mod.install_hash, mod.hand_over, mod.serve_warm = hashed, handed, serving


def _after_child(mod: Any) -> None:
    """In the fork server: each child's stamps start at its fork; a spare's (forked ahead of its
    launch, warm/child.run_spare) when it takes its launch, so its rehearsal is not on the timeline
    (its CPU still is: process_time counts from the fork)."""
    run, run_spare, adopt = mod.run, getattr(mod, "run_spare", None), getattr(mod, "_adopt", None)

    def start() -> None:
        global _done
        stamps.clear()
        cpu_at.clear()
        _done = False
        stamp("forked")
        _preloaded.update(sys.modules)
        if PROFILE:  # the server's own profile (its imports) is not this launch's
            import cProfile

            _profiles[:] = [cProfile.Profile(time.thread_time)]
            _profiles[0].enable()

    def forked(*a: Any) -> Any:
        start()
        return run(*a)

    mod.run = forked
    if run_spare is not None and adopt is not None:
        def spare(*a: Any) -> Any:
            def adopting(*b: Any) -> Any:
                start()
                return adopt(*b)

            mod._adopt = adopting
            return run_spare(*a)

        mod.run_spare = spare


def _after_main(mod: Any) -> None:
    main = mod.main

    def traced(*a: Any) -> Any:
        stamp("main")
        return main(*a)

    mod.main = traced


HOOKS = {"toycoder_daemon.warm.launcher": _after_launcher, "toycoder_daemon.warm.child": _after_child,
         "toycoder_daemon.faces.main": _after_main,
         "toycoder_daemon.rpc.outbox": _after_outbox, "socket": _after_socket,
         "toycoder_daemon.faces.lsp.server": _after_lsp_server,
         "toycoder_daemon.faces.lsp.transport": _after_lsp_transport,
         "toycoder_daemon.faces.acp.agent": _after_acp, "toycoder_daemon.app.application": _after_app,
         "toycoder_daemon.llm.http_stream": _after_http_stream}
if PROFILE:
    HOOKS["concurrent.futures.thread"] = _after_futures_thread


class _Loader:
    def __init__(self, inner: Any, then: Any):
        self.inner, self.then = inner, then

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        self.then(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _Finder:
    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        then = HOOKS.get(name)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is _Finder or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, then)
                return spec
        return None


sys.meta_path.insert(0, _Finder)  # type: ignore[arg-type]
if "socket" in sys.modules:  # site imported it already (not in a plain venv)
    _after_socket(sys.modules["socket"])
if PROFILE:
    import cProfile

    _profiles.append(cProfile.Profile(time.thread_time))
    _profiles[0].enable()
