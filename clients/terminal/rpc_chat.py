#!/usr/bin/env python3
"""ToyCoder over raw JSON-RPC: the whole client side of the protocol by hand, standard library only.

    rpc_chat.py [--workspace DIR] [--config PATH] [--daemon CMD] [--approve ask|allow|deny] [PROMPT]

Without PROMPT it reads prompts line by line (a blank line or EOF ends). Streamed text goes to
stdout; tool activity, permission prompts, questions and usage go to stderr. The daemon is
`toycoder-daemon` from PATH unless --daemon names another (e.g. .venv/bin/toycoder-daemon); one it
cannot start is reported in one line, with exit status 127.
"""

import argparse
import contextlib
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
from pathlib import Path


def send(proc, msg):
    body = json.dumps(msg).encode()
    try:
        proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # the daemon is gone: the reader sees EOF and call() says so


def read_frames(stream, inbox):
    """Reader thread: one parsed message per frame into the inbox; None at EOF."""
    while True:
        length = None
        while (line := stream.readline()).strip():
            name, _, value = line.decode().partition(":")
            length = int(value) if name.lower() == "content-length" else length
        if not line:
            return inbox.put(None)
        inbox.put(json.loads(stream.read(length)))


def ask(question, policy, default):
    """The person's answer (from /dev/tty: stdin may be the prompts), or the policy's."""
    if policy != "ask":
        return default
    try:
        with open("/dev/tty") as tty:
            sys.stderr.write(question)
            return tty.readline().strip()
    except OSError:
        return ""


def permission(params, policy):
    preview = params.get("preview") or {}
    sys.stderr.write(f"\n[permission] {params['title']} ({params['level']})\n")
    sys.stderr.write(preview.get("diff") or (preview.get("command") and f"$ {preview['command']}\n") or "")
    answer = ask("allow? [y]es once / [a]lways / [n]o: ", policy, "y" if policy == "allow" else "n")
    return {"decision": {"y": "allow_once", "a": "allow_always"}.get(answer[:1].lower(), "reject")}


def question(params, policy):
    options = params.get("options") or []
    sys.stderr.write(f"\n[question] {params['question']}\n" + "".join(f"  {i}. {o}\n" for i, o in enumerate(options, 1)))
    reply = ask("> ", policy, "1" if options else "")  # non-interactive: the first option, if any
    if reply.isdigit() and 1 <= int(reply) <= len(options):
        reply = options[int(reply) - 1]
    return {"answer": reply} if reply else {"cancelled": True}


def show(params):
    update, indent = params["update"], "  " if params.get("parentToolCallId") else ""
    if update["kind"] == "text_delta":
        sys.stdout.write(update["text"])
        sys.stdout.flush()
    elif update["kind"] == "tool_call":
        sys.stderr.write(f"\n{indent}-> {update['title']}\n")
    elif update["kind"] == "tool_result":
        sys.stderr.write(f"{indent}<- {update['status']}: {(update['output'].splitlines() or [''])[0][:100]}\n")
    elif update["kind"] == "changes":
        files = update["files"]
        added, removed = sum(f.get("added") or 0 for f in files), sum(f.get("removed") or 0 for f in files)
        sys.stderr.write(f"\n{len(files)} file(s) changed +{added} -{removed}: {', '.join(f['path'] for f in files)}\n")
    elif update["kind"] == "hook":
        why = f": {update['reason'].splitlines()[0][:100]}" if update.get("reason") else ""
        sys.stderr.write(f"{indent}hook {update['event']} `{update['command']}` {update['outcome']}{why}\n")
    elif update["kind"] in ("retry", "compaction", "mcp_wait"):
        sys.stderr.write(f"\n[{update['kind']}: {json.dumps(update)}]\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt", nargs="*")
    ap.add_argument("--workspace", default=os.getcwd())
    ap.add_argument("--config")
    ap.add_argument("--daemon", default="toycoder-daemon", help="daemon command (default: toycoder-daemon)")
    ap.add_argument("--approve", choices=["ask", "allow", "deny"], default="ask")
    args = ap.parse_args()
    cmd = shlex.split(args.daemon) + (["--config", args.config] if args.config else [])
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError as e:  # not found / not executable: one line, the shell's "cannot run" status
        sys.stderr.write(f"rpc_chat: cannot start the daemon `{cmd[0]}`: {e.strerror or e} "
                         "(use --daemon CMD, or put toycoder-daemon on PATH)\n")
        return 127
    inbox, ids = queue.Queue(), iter(range(1, 1 << 31))
    threading.Thread(target=read_frames, args=(proc.stdout, inbox), daemon=True).start()

    def call(method, params):
        """Send a request and serve everything that arrives until its answer does."""
        my_id = next(ids)
        send(proc, {"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while (msg := inbox.get()) is not None:
            if msg.get("method") == "toycoder/update":
                show(msg["params"])
            elif msg.get("method") == "window/showMessage":
                sys.stderr.write(f"[daemon] {msg['params']['message']}\n")
            elif "method" in msg and "id" in msg:  # a request from the daemon
                handler = {"toycoder/requestPermission": permission, "toycoder/askUser": question}.get(msg["method"])
                send(proc, {"jsonrpc": "2.0", "id": msg["id"], "result": handler and handler(msg["params"], args.approve)})
            elif msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"]["message"])
                return msg["result"]
        sys.exit("rpc_chat: the daemon exited")

    call("initialize", {"processId": os.getpid(), "rootUri": Path(args.workspace).resolve().as_uri(),
                        "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}}})
    send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    session = call("toycoder/session/new", {})["sessionId"]
    prompts = [" ".join(args.prompt)] if args.prompt else iter(lambda: input("\n> ").strip(), "")
    status = 0
    try:
        for text in prompts:
            try:
                result = call("toycoder/prompt", {"sessionId": session, "text": text})
            except RuntimeError as e:
                sys.stderr.write(f"\n[error] {e}\n")
                status = 1
                continue
            u = result["usage"]
            sys.stderr.write(f"\n[{result['stopReason']}; tokens: {u['promptTokens']} in, {u['completionTokens']} out]\n")
    except (EOFError, KeyboardInterrupt):
        pass
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()  # the daemon exits when its stdin closes
    proc.wait(timeout=10)
    return status


if __name__ == "__main__":
    sys.exit(main())
