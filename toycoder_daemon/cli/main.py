"""toycoder: ToyCoder in the terminal. It starts `toycoder-daemon` and talks to it over JSON-RPC.

    toycoder [--workspace DIR] [--session ID] [--config PATH] [--model [PROVIDER:]NAME]
    toycoder -p PROMPT [--approve ask|allow|deny] [--json] [--verbose] [...]
    toycoder --demo [--approve ask|allow|deny]
    toycoder setup [--non-interactive --base-url URL --api-key KEY|--api-key-env VAR --model M --fast-model M]
    toycoder doctor [--config PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from toycoder_daemon import __version__
from toycoder_daemon.cli.client import ChatClient, Outcome, stdin_is_tty
from toycoder_daemon.cli.rpc import DaemonExited, DaemonNotStarted, RpcError, close_all, default_daemon_command
from toycoder_daemon.cli.startup import NO_PROVIDER, connect, init_config, path_advice, user_config_path
from toycoder_daemon.wire import protocol as wire

EXIT_CODES = """commands: `toycoder setup` sets up a model provider (asks; or --non-interactive with --base-url,
  --api-key|--api-key-env, --model, --fast-model); `toycoder doctor` checks the set-up, one line each.

exit codes (-p, --demo): 0 answered; 1 error (provider, config, daemon, session); 2 bad usage;
  3 denied (the turn's tool calls were all denied); 4 stopped at the step or output limit;
  5 a tool call was denied because nobody could be asked (no terminal; use --approve allow|deny);
  127 the daemon could not be started; 130 cancelled (Ctrl-C)
"""

def data_dir() -> Path:
    """Where ToyCoder keeps its data (the daemon's rule: $TOYCODER_DATA_DIR, else XDG data home)."""
    if d := os.environ.get("TOYCODER_DATA_DIR"):
        return Path(d).expanduser()
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "toycoder"


def provider_configured(config: str | None) -> bool:
    """A key in the environment, or a config file the daemon would read."""
    if config or os.environ.get("TOYCODER_CONFIG") or os.environ.get("OPENAI_API_KEY"):
        return True
    return user_config_path().is_file()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="toycoder", description="ToyCoder in the terminal: a chat with the coding agent, which runs in a "
        "toycoder-daemon subprocess spoken to over JSON-RPC.", epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspace", metavar="DIR", default=None, help="the project to work in (default: the current "
                    "directory)")
    ap.add_argument("--session", metavar="ID", help="resume a session of this workspace (an id or a unique prefix); "
                    "its history is shown")
    ap.add_argument("--config", metavar="PATH", help="config file for the daemon (default: $TOYCODER_CONFIG, then "
                    "~/.config/toycoder/config.yaml, then built-in defaults)")
    ap.add_argument("--model", metavar="[PROVIDER:]NAME", help="the model for this session (a name, or the role "
                    "default/fast)")
    ap.add_argument("-p", "--prompt", metavar="PROMPT", help="one-shot: run PROMPT ('-' reads stdin), print the "
                    "final answer on stdout, exit")
    ap.add_argument("--approve", choices=["ask", "allow", "deny"], default=None,
                    help="answer permission prompts: ask (the default on a terminal), allow once, or deny (the "
                    "default without a terminal); without a terminal ask_user takes the first option")
    ap.add_argument("--trust-workspace", action="store_true", help="apply the workspace's .toycoder/settings.yaml "
                    "(its hooks, MCP servers, allow rules) for this run without asking; a run without a terminal "
                    "never applies them otherwise")
    ap.add_argument("--json", action="store_true", help="with -p: print each toycoder/update params object, then "
                    "the prompt result, as JSON lines on stdout")
    ap.add_argument("-v", "--verbose", action="store_true", help="with -p: stream the turn to stderr")
    ap.add_argument("-q", "--quiet", action="store_true", help="with -p: no header and no tool lines on stderr "
                    "(they show when stderr is a terminal); errors still do")
    ap.add_argument("--demo", action="store_true", help="the scripted demo: no API key needed")
    ap.add_argument("--daemon", metavar="CMD", help="the daemon command (default: this Python's "
                    "`-m toycoder_daemon`)")
    ap.add_argument("--init-config", action="store_true", help="write a commented example config to "
                    "~/.config/toycoder/config.yaml (never over an existing one) and exit")
    ap.add_argument("--version", action="version", version=f"toycoder {__version__}")
    args = ap.parse_args(argv)
    if (args.json or args.verbose or args.quiet) and args.prompt is None:
        ap.error("--json, --verbose and --quiet go with -p PROMPT")
    if args.demo and (args.prompt is not None or args.session):
        ap.error("--demo runs its own prompt in a fresh session")
    args.workspace = str(Path(args.workspace or os.getcwd()).expanduser().resolve())
    if not Path(args.workspace).is_dir():
        ap.error(f"--workspace: {args.workspace} is not a directory")
    return args


def err_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


class Startup(Exception):
    pass


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # run the finally blocks: terminal modes restored, demo server stopped


def hand_to_daemon(command: str, rest: list[str]) -> int:
    """`toycoder setup|doctor ...`: the daemon of this installation does it (it reads and writes the
    config; this client imports nothing of it), in this very process and terminal (exec)."""
    argv = default_daemon_command() + [f"--{command}", *rest]
    try:
        os.execv(argv[0], argv)
    except OSError as e:
        sys.stderr.write(f"toycoder: cannot run {argv[0]}: {e.strerror or e}\n")
    return 127


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # from here on, the except below says it
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("setup", "doctor"):
        return hand_to_daemon(argv[0], argv[1:])
    try:
        args = parse_args(argv)
    except KeyboardInterrupt:
        sys.stderr.write("toycoder: cancelled\n")
        return 130
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):  # the terminal closed, or kill
        if sig is not None:
            signal.signal(sig, _exit_on_signal)
    if args.init_config:
        return init_config()
    if args.demo:
        from toycoder_daemon.cli.demo import run_demo

        return run_demo(args)
    # another daemon (e.g. `ssh -T host toycoder-daemon`) has its own config and key: never refused here
    if args.daemon is None and not provider_configured(args.config):
        advice = path_advice()
        sys.stderr.write(NO_PROVIDER + (f"\n{advice}\n" if advice else ""))
        return 1
    try:
        if args.prompt is not None:
            return one_shot(args)
        if stdin_is_tty() and sys.stdout.isatty():
            return interactive(args)
        return line_mode(args)
    except KeyboardInterrupt:  # Ctrl-C at any moment (starting the daemon too): one line, no daemon left
        close_all()
        sys.stderr.write("toycoder: cancelled\n")
        return 130
    except DaemonNotStarted as e:
        sys.stderr.write(f"toycoder: {e}\n")
        return 127
    except DaemonExited as e:
        err_console().print(f"toycoder: the daemon exited unexpectedly.\n{e.log}", style="red", markup=False)
        return 1
    except RpcError as e:
        err_console().print(f"toycoder: {e.message}", style="bold red", markup=False)
        return 1


# ---- one-shot -------------------------------------------------------------------------------------

def one_shot(args: argparse.Namespace) -> int:
    from toycoder_daemon.cli.render import TurnView

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    console = err_console()
    progress = not args.quiet and not args.verbose and not args.json and sys.stderr.isatty()
    view = TurnView(console, quiet=not args.verbose, progress=progress)
    approve = args.approve or "ask"  # without a terminal nobody is asked: the call is denied, exit code 5

    def emit(params: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(params, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    conn, client, _ = connect(args, lambda c: ChatClient(c, view, approve=approve, on_update=emit if args.json
                                                         else None, trust_workspace=args.trust_workspace))
    if progress:
        console.print(header(conn, client, args, approve), style="dim", markup=False)
    outcome = client.run_turn(prompt)  # Ctrl-C three times (the cancel unanswered): main() ends it
    conn.close()
    return report(outcome, console, json_lines=args.json)


def header(conn: Any, client: ChatClient, args: argparse.Namespace, approve: str) -> str:
    """`-p`'s one line on stderr: what runs where (as `codex exec` prints before its progress)."""
    try:
        current = conn.call(wire.MODELS_LIST, {"sessionId": client.session_id})["current"]
        model = f"{current['provider']}:{current['model']}"
    except RpcError as e:
        model = f"(no model: {e.message})"
    approval = approve if approve != "ask" or stdin_is_tty() else "ask (no terminal: denied)"
    return (f"toycoder {__version__} · {model} · {_home(args.workspace)} · session {client.session_id[:8]} · "
            f"approve {approval}")


def report(outcome: Outcome, console: Any, *, json_lines: bool = False) -> int:
    """The one-shot result on stdout, the reason of a failure on stderr; the exit code."""
    if json_lines:
        last = outcome.result if outcome.result is not None else {
            "error": {"code": outcome.error.code if outcome.error else wire.INTERNAL_ERROR,
                      "message": outcome.error.message if outcome.error else "no result"}}
        sys.stdout.write(json.dumps(last, ensure_ascii=False) + "\n")
    elif outcome.result is not None:
        text = outcome.result.get("text") or ""
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
    sys.stdout.flush()
    if outcome.error is not None:
        console.print(f"toycoder: {outcome.error.message}", style="bold red", markup=False)
    elif outcome.unasked:
        console.print(f"toycoder: denied {', '.join(outcome.unasked)}: nobody could be asked (no terminal); "
                      "run it with --approve allow (or deny)", style="bold red", markup=False)
    elif outcome.denied_only:
        console.print("toycoder: every tool call of this turn was denied", style="yellow")
    elif outcome.result and outcome.result.get("stopReason") == "cancelled":
        console.print("toycoder: cancelled", style="yellow")
    return outcome.exit_code()


# ---- line mode (stdin is not a terminal) ------------------------------------------------------------

def line_mode(args: argparse.Namespace) -> int:
    """Prompts read line by line from stdin; the conversation on stdout."""
    from rich.console import Console

    from toycoder_daemon.cli.render import TurnView

    view = TurnView(Console(highlight=False))
    conn, client, _ = connect(args, lambda c: ChatClient(c, view, approve=args.approve or "deny",
                                                                    trust_workspace=args.trust_workspace))
    status = 0
    try:
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            view.note(f"❯ {text}", "bold")
            outcome = client.run_turn(text)
            if outcome.error:
                view.note(f"error: {outcome.error.message}", "bold red")
                status = 1
            elif outcome.result and outcome.result.get("stopReason") == "command":
                view.note(outcome.result.get("text", ""), "")
                action = outcome.result.get("action") or {}
                if action.get("kind") == "quit":
                    break
                if action.get("kind") == "switch":
                    client.load_session(action["sessionId"])
    finally:
        conn.close()
    return status


# ---- interactive ------------------------------------------------------------------------------------

def interactive(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from toycoder_daemon.cli.prompt import LineEditor
    from toycoder_daemon.cli.render import TurnView

    console = Console(highlight=False)
    view = TurnView(console)
    editor = LineEditor(data_dir() / "history")
    with console.status("starting toycoder-daemon…", spinner="dots"):
        conn, client, loaded = connect(args, lambda c: ChatClient(c, view, approve=args.approve or "ask",
                                                                  line_reader=editor.ask,
                                                                  trust_workspace=args.trust_workspace))
    try:
        editor.set_commands([*conn.call(wire.COMMANDS_LIST, {})["commands"],  # and the terminal's own
                             {"name": "attach", "usage": "/attach <image>", "help": "Attach an image to the next prompt."}])

        editor.set_mentions(client.mentions)
        try:
            models = conn.call(wire.MODELS_LIST, {"sessionId": client.session_id})
            model = f"{models['current']['provider']}:{models['current']['model']}"
        except RpcError as e:  # a broken config: the daemon said why; keep going, prompts will say it again
            model = f"(no model: {e.message})"
        console.print(Text.assemble(("ToyCoder ", "bold"), (__version__, "dim"), " · ", (model, "cyan"), " · ",
                                    (_home(args.workspace), "dim")))
        if loaded is not None:
            show_session(view, loaded)
        else:
            console.print(Text(f"new session {client.session_id[:8]}", style="dim"))
        console.print(Text("/help lists the commands · Ctrl-C cancels a turn · Ctrl-D or /quit exits", style="dim"))
        # Between prompts (and before prompt_toolkit owns the terminal) Ctrl-C is only counted, so
        # that it always means the same thing: "exit?" at the idle prompt, "cancel" during a turn.
        sigints = [0]

        def count_sigint(signum: int, frame: Any) -> None:
            sigints[0] += 1

        def interrupted() -> bool:
            seen, sigints[0] = sigints[0], 0
            return seen > 0

        signal.signal(signal.SIGINT, count_sigint)
        armed = False  # a Ctrl-C at the empty prompt: the next one exits
        while True:
            try:
                text = editor.prompt(interrupted, view.mode)
            except KeyboardInterrupt:
                if armed:
                    break
                armed = True
                console.print(Text("(press Ctrl-C again, or Ctrl-D, to exit)", style="dim"))
                continue
            except EOFError:
                break
            armed = False
            if not text.strip():
                continue
            if text.strip().split(" ", 1)[0] == "/attach":  # ours: the image goes with the next prompt
                from toycoder_daemon.cli.attach import image_item

                try:
                    client.context.append(image_item(text.strip()[len("/attach"):]))
                    console.print(Text(f"attached ({len(client.context)} for the next prompt)", style="dim"))
                except ValueError as e:
                    console.print(Text(f"error: {e}", style="bold red"))
                continue
            outcome = client.run_turn(text.strip())
            if outcome.error is not None:
                console.print(Text(f"error: {outcome.error.message}", style="bold red"))
            elif outcome.result and outcome.result.get("stopReason") == "command":
                console.print(Text(outcome.result.get("text", "")))
                action = outcome.result.get("action") or {}
                if action.get("kind") == "quit":
                    break
                if action.get("kind") == "switch" and action.get("sessionId"):
                    show_session(view, client.load_session(action["sessionId"]))
            console.print()
    finally:  # Ctrl-C three times while a cancel went unanswered: main() says it and ends the daemon
        signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.close()
    return 0


def show_session(view: Any, loaded: dict[str, Any]) -> None:
    from rich.rule import Rule

    from toycoder_daemon.cli.history import show_transcript

    info = loaded["session"]
    title = info.get("title") or "(untitled)"
    count = info.get("messageCount", 0)
    view.console.print(Rule(f"session {info['sessionId'][:8]} · {title} · {count} message{'' if count == 1 else 's'}",
                            style="dim"))
    show_transcript(view, loaded.get("transcript") or [])
    if loaded.get("transcript"):
        view.console.print(Rule(style="dim"))


def _home(path: str) -> str:
    home = str(Path.home())
    return "~" + path[len(home):] if path == home or path.startswith(home + os.sep) else path


if __name__ == "__main__":
    sys.exit(main())
