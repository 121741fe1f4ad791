#!/usr/bin/env python3
"""The ToyCoder demo: the real daemon and the real protocol, with a scripted model (no API key).

It copies a small sample project to a temporary folder, starts the scripted OpenAI-compatible
server on 127.0.0.1, and runs rpc_chat.py against it: you watch the agent stream, read files and
propose an edit, which you approve (or not) with the diff in front of you.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROMPT = "average([2, 4, 6]) returns 6.0 instead of 4.0. Find the bug and fix it."


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--approve", choices=["ask", "allow", "deny"], default=None,
                    help="answer permission prompts (default: ask when a terminal is attached, else allow)")
    ap.add_argument("--daemon", default=f"{sys.executable} -m toycoder_daemon")
    args = ap.parse_args()
    approve = args.approve or ("ask" if sys.stdin.isatty() else "allow")

    with tempfile.TemporaryDirectory(prefix="toycoder-demo-") as tmp:
        workspace = Path(tmp) / "calc"
        shutil.copytree(HERE / "demo" / "sample_project", workspace)
        model = subprocess.Popen(
            [sys.executable, "-m", "toycoder_daemon.testing.fake_llm", "--script", str(HERE / "demo" / "script.json")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        try:
            base_url = model.stdout.readline().strip()
            config = Path(tmp) / "config.yaml"
            config.write_text(
                "providers:\n  demo:\n    api_keys: [demo-key-not-a-secret]\n"
                f"    base_url: {base_url}\n    models: {{default: scripted-demo, fast: scripted-demo}}\n"
                "default_provider: demo\n"
            )
            sys.stderr.write(
                "ToyCoder demo: the model is SCRIPTED (no API key needed); the daemon, tools and protocol are real.\n"
                f"Workspace: {workspace}\n\n> {PROMPT}\n"
            )
            status = subprocess.call([sys.executable, str(HERE / "rpc_chat.py"), "--workspace", str(workspace),
                                      "--config", str(config), "--daemon", args.daemon, "--approve", approve, PROMPT])
            sys.stderr.write(f"\ncalc.py after the session:\n{(workspace / 'calc.py').read_text()}")
            return status
        finally:
            model.terminate()
            model.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
