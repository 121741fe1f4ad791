"""The daemon's cold start: toycoder-daemon [--stdio] [--acp] [--config PATH] [--log-file PATH] [--log-level LEVEL]
[--version] [--check-config] [--warm-status] [--warm-stop] [--setup [...]] [--doctor].

`main` is what runs in a fresh process (the launcher's cold path) and, unchanged, in a child of the
fork server (warm/): arguments, stdout kept for frames, logs, then one face.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO


def _protect_stdout() -> BinaryIO:
    """Keep fd 1 for protocol frames only: the writer gets a private dup of it, and fd 1 itself
    (inherited by children, used by stray prints) is pointed at stderr."""
    proto = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def _check_config(path: str | None) -> int:
    """For editors' health checks: is the config valid, where is it, how many keys per provider."""
    import json

    from toycoder_daemon.config.model import find_config, load_config
    from toycoder_daemon.core.errors import ConfigError
    from toycoder_daemon.core.util import secrets
    from toycoder_daemon.tools.shell.sandbox.probe import status as sandbox_status

    try:
        cfg, found = load_config(path)
    except ConfigError as e:
        print(json.dumps({"valid": False, "path": str(find_config(path)), "error": str(e), "problems": e.problems}))
        return 2
    print(json.dumps({
        "valid": True, "path": str(found) if found else None, "defaultProvider": cfg.default_provider,
        "providers": [{"name": n, "baseUrl": secrets.shown_url(p.base_url) if p.base_url else None,
                        "models": p.models.model_dump(), "keyCount": len(p.api_keys)}
                      for n, p in cfg.providers.items()],
        "sandbox": sandbox_status(cfg.tools.run_command.sandbox),
    }))
    return 0


SWITCH_INTERVAL = 0.002
"""Seconds the event loop keeps the GIL while another thread waits for it (Python's default: 0.005).
Beside 20 streaming turns the loop runs Python nearly all the time, and the threads that wait for
it are the request path's own (the stdout writer, the stdin reader, the session list's worker):
an answer queued for the writer waited up to 20-35 ms. At 2 ms the cheap request's p99 went from
34-39 to 19-24 ms, the session list's from 116-171 to 81-104, for ~5-10% more daemon CPU in that
case (bench/HISTORY.md, the LSP cheap request beside 20 streams)."""

EXIT_GRACE = 0.5
"""Seconds the daemon may spend shutting down once its input has ended."""


on_input_end: Callable[[], None] | None = None
"""Told first when the input ends, before the face shuts down and answers what is in flight: a warm
daemon (warm/child.py sets it) whose launcher was killed dies there, as a killed cold one answers
nothing (its editor closes our stdin when it sees the launcher exit)."""


def _exit_soon() -> None:
    """Arm (once) a timer that ends the process EXIT_GRACE seconds from now, whatever its threads
    are doing: a worker thread stuck in a read of a FIFO or a hung disk cannot be stopped, and
    asyncio.run would wait for it forever. Commands' and MCP servers' process groups are ended first."""
    global _armed
    if on_input_end is not None:
        on_input_end()
    if _armed:
        return
    _armed = True

    def fire() -> None:
        _end_children()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(EXIT_GRACE, fire)
    timer.daemon = True
    timer.start()


_armed = False


def _end_children() -> None:
    """Before os._exit: no command and no MCP server outlives the daemon. Commands' groups are
    killed; each MCP server's group gets TERM, then KILL (its stdin was closed by the shutdown, or
    closes with this process)."""
    from toycoder_daemon.tools.shell.run_command import kill_all

    with contextlib.suppress(Exception):
        kill_all()
    stdio = sys.modules.get("toycoder_daemon.tools.mcp.stdio")  # not imported: no server was started
    if stdio is not None:
        with contextlib.suppress(Exception):
            stdio.kill_all()


def _serve_lsp(proto_out: BinaryIO, config_path: str | None) -> int:
    """The LSP face (pygls, faces/lsp/transport.py), frames only to proto_out."""
    import asyncio

    from toycoder_daemon.faces.lsp.server import server_for
    from toycoder_daemon.faces.lsp.transport import serve
    from toycoder_daemon.rpc.outbox import Outbox

    try:
        return asyncio.run(serve(server_for(config_path), sys.stdin.buffer, Outbox(proto_out), on_end=_exit_soon))
    except KeyboardInterrupt:
        return 130


def _serve_acp(proto_out: BinaryIO, config_path: str | None) -> int:
    """The ACP face (faces/acp/agent.py): the SDK's connection on stdin, frames only to proto_out."""
    import asyncio

    from toycoder_daemon.faces.acp.agent import serve_acp
    from toycoder_daemon.rpc.outbox import Outbox

    try:
        return asyncio.run(serve_acp(Outbox(proto_out), config_path, on_end=_exit_soon))
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toycoder-daemon", description="ToyCoder agent daemon (JSON-RPC over stdio)")
    parser.add_argument("--stdio", action="store_true",
                        help="use stdio (the default; accepted because editors pass it)")
    parser.add_argument("--acp", action="store_true", help="speak the Agent Client Protocol "
                        "(newline-delimited JSON-RPC) instead of the LSP-framed one")
    parser.add_argument("--config", metavar="PATH",
                        help="config file (default: $TOYCODER_CONFIG, ~/.config/toycoder/config.yaml)")
    parser.add_argument("--log-file", metavar="PATH", help="write logs here instead of stderr")
    parser.add_argument("--log-level", help="default: $TOYCODER_LOG_LEVEL, else WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--check-config", action="store_true",
                        help="validate the config, print a JSON summary (never the keys) and exit (0 valid, 2 not)")
    parser.add_argument("--warm-status", action="store_true",
                        help="show the fork server that serves warm starts (JSON) and exit (0 running, 1 not)")
    parser.add_argument("--warm-stop", action="store_true", help="stop that fork server and exit")
    parser.add_argument("--setup", action="store_true", help="set up a model provider (asks, or takes the "
                        "flags below with --non-interactive), write the user config, and exit")
    parser.add_argument("--doctor", action="store_true", help="check the config, provider, model, tools, context, "
                        "sandbox, rg, fork server and editor plugins; one line each; exit 0 only when all work")
    from toycoder_daemon.app import setup

    setup.add_arguments(parser)
    return parser


PARSER = _parser()
"""Built at import (~2 ms): in the fork server once, not in each warm child. It holds nothing of a
launch (the environment's log level is read in `main`)."""


def main(argv: list[str] | None = None) -> int:
    from toycoder_daemon.app import setup  # imported already by _parser: a lookup

    parser = PARSER
    args = parser.parse_args(argv)
    if args.warm_status or args.warm_stop:  # listed here for --help; warm/launcher.py answers them
        parser.error("--warm-status and --warm-stop are answered by the launcher (toycoder-daemon)")
    if args.version:
        from toycoder_daemon import __version__

        print(f"toycoder-daemon {__version__}")
        return 0
    if args.check_config:
        return _check_config(args.config)
    if args.setup:
        return setup.run(args)
    if given := setup.flags_given(args):
        parser.error(f"{', '.join(given)} go with --setup")
    if args.doctor:
        from toycoder_daemon.app import doctor

        return doctor.run(args.config)

    proto_out = _protect_stdout()
    from toycoder_daemon.core.util import logs

    logs.setup(args.log_level or os.environ.get("TOYCODER_LOG_LEVEL", "WARNING"), args.log_file)
    sys.setswitchinterval(SWITCH_INTERVAL)
    code = _serve_acp(proto_out, args.config) if args.acp else _serve_lsp(proto_out, args.config)
    # The stdin reader thread may still sit in a blocking read holding the buffer's lock, which
    # aborts a normal interpreter shutdown; everything is flushed, so leave directly.
    import logging

    _end_children()  # what the shutdown did not end in time
    logging.shutdown()
    for stream in (proto_out, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
