"""`toycoder --demo`: a real session, through the real daemon and protocol, against a scripted model.

A copy of a small sample project goes to a temporary folder; the scripted OpenAI-compatible server
(`python -m toycoder_daemon.testing.fake_llm`, a subprocess: the client never imports it) plays
demo/script.json; the daemon gets a config pointing at it and a throwaway data dir. You see the
stream, the planner sub-agent, read_file and grep_search, the diff of an edit you approve or not,
and a question; then the file as it ended up.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from toycoder_daemon.cli.client import ChatClient, stdin_is_tty
from toycoder_daemon.cli.rpc import DaemonExited, DaemonNotStarted, RpcError
from toycoder_daemon.cli.startup import NO_PROVIDER, connect, path_advice

HERE = Path(__file__).resolve().parent / "demo"
SCRIPT = HERE / "script.json"
SAMPLE = HERE / "sample_project"
PROMPT = "average([2, 4, 6]) returns 6.0 instead of 4.0. Find the bug and fix it."


def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    from toycoder_daemon.cli.render import TurnView

    console = Console(highlight=False)
    interactive = stdin_is_tty() and console.is_terminal
    approve = args.approve or ("ask" if interactive else "allow")
    with tempfile.TemporaryDirectory(prefix="toycoder-demo-") as tmp:
        workspace = Path(tmp) / "calc"
        shutil.copytree(SAMPLE, workspace)
        model = subprocess.Popen([sys.executable, "-m", "toycoder_daemon.testing.fake_llm", "--script", str(SCRIPT)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            base_url = (model.stdout.readline() if model.stdout else "").strip()
            if not base_url:
                console.print("toycoder: the scripted model server did not start", style="bold red")
                return 1
            config = Path(tmp) / "config.yaml"
            config.write_text(
                "providers:\n  demo:\n    api_keys: [demo-key-not-a-secret]\n"
                f"    base_url: {base_url}\n    models: {{default: scripted-demo, fast: scripted-demo}}\n"
                "default_provider: demo\n")
            console.print(Panel(Text.assemble(
                ("ToyCoder demo. ", "bold"), "The model is ", ("SCRIPTED", "bold yellow"),
                " (no API key needed): it plays fixed replies. The daemon, its tools, the permission prompt and "
                "the protocol are real.\n", (f"Workspace: a temporary copy of a sample project, {workspace}", "dim")),
                border_style="yellow", expand=False))
            args.config, args.workspace, args.session, args.model = str(config), str(workspace), None, None
            view = TurnView(console)
            env = {**os.environ, "TOYCODER_DATA_DIR": str(Path(tmp) / "data")}  # leave no demo sessions behind
            line_reader = None
            if interactive:
                from toycoder_daemon.cli.prompt import LineEditor

                line_reader = LineEditor(Path(tmp) / "history").ask
            try:
                conn, client, _ = connect(args, lambda c: ChatClient(c, view, approve=approve,
                                                                     line_reader=line_reader), env=env)
            except DaemonNotStarted as e:
                console.print(f"toycoder: {e}", style="bold red", markup=False)
                return 127
            except (RpcError, DaemonExited) as e:
                console.print(f"toycoder: the demo could not start: {e}", style="bold red", markup=False)
                return 1
            console.print(Text("❯ ", style="bold green") + Text(PROMPT, style="bold"))
            try:
                outcome = client.run_turn(PROMPT)
            except KeyboardInterrupt:
                conn.close(timeout=2)
                return 130
            finally:
                conn.close()
            if outcome.error is not None:
                console.print(f"error: {outcome.error.message}", style="bold red", markup=False)
            after = (workspace / "calc.py").read_text()
            unchanged = after == (SAMPLE / "calc.py").read_text()
            console.print(Text("\ncalc.py after the session" + (" (unchanged: the edit was not allowed; the scripted "
                                                                 "model cannot tell)" if unchanged else "") + ":",
                               style="bold"))
            console.print(Syntax(after, "python", theme="ansi_dark",
                                 background_color="default"))
            console.print(Text("That was the scripted demo. To work on your own project with a real model:",
                               style="bold"))
            console.print(Text(NO_PROVIDER.split("\n", 2)[2].rsplit("\nNo key at hand?", 1)[0].rstrip()),
                          soft_wrap=True)
            if advice := path_advice():
                console.print(Text("\n" + advice), soft_wrap=True)
            return outcome.exit_code()
        finally:
            model.terminate()
            try:
                model.wait(timeout=10)
            except subprocess.TimeoutExpired:
                model.kill()
