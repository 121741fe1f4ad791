#!/usr/bin/env python3
"""ToyCoder from a terminal, over raw JSON-RPC: the whole protocol by hand, standard library only.

    rpc_chat.py [--workspace DIR] [--config PATH] [--approve ask|allow|deny] [PROMPT]

Without PROMPT it reads prompts line by line (a blank line or EOF ends). Streamed text goes to
stdout; tool activity, permission prompts and usage go to stderr.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path


def send(proc, msg):
    body = json.dumps(msg).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    proc.stdin.flush()


def read_frames(stream, inbox):
    """Reader thread: one parsed message per frame into the inbox; None at EOF."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                inbox.put(None)
                return
            if not line.strip():
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        inbox.put(json.loads(stream.read(length)))


def ask_tty(question):
    try:
        with open("/dev/tty") as tty:
            sys.stderr.write(question)
            sys.stderr.flush()
            return tty.readline().strip()
    except OSError:
        return None


def decide(params, policy):
    """Answer toycoder/requestPermission: show what is asked, then the policy or the person decides."""
    preview = params.get("preview") or {}
    sys.stderr.write(f"\n[permission] {params['title']} ({params['level']})\n")
    sys.stderr.write(preview.get("diff") or (preview.get("command") and f"$ {preview['command']}\n") or "")
    if policy != "ask":
        return {"decision": "allow_once" if policy == "allow" else "reject"}
    answer = ask_tty("allow? [y]es once / [a]lways / [n]o: ") or "n"
    return {"decision": {"y": "allow_once", "a": "allow_always"}.get(answer[:1].lower(), "reject")}


def answer_question(params, policy):
    options = params.get("options") or []
    sys.stderr.write(f"\n[question] {params['question']}\n")
    for i, option in enumerate(options, 1):
        sys.stderr.write(f"  {i}. {option}\n")
    if policy != "ask":  # non-interactive: pick the first option, or say we cannot answer
        return {"answer": options[0]} if options else {"cancelled": True}
    reply = ask_tty("> ")
    if not reply:
        return {"cancelled": True}
    if reply.isdigit() and 1 <= int(reply) <= len(options):
        reply = options[int(reply) - 1]
    return {"answer": reply}


def show_update(params):
    update = params["update"]
    indent = "  " if params.get("parentToolCallId") else ""
    kind = update["kind"]
    if kind == "text_delta":
        sys.stdout.write(update["text"])
        sys.stdout.flush()
    elif kind == "tool_call":
        sys.stderr.write(f"\n{indent}-> {update['title']}\n")
    elif kind == "tool_result":
        first = (update["output"].splitlines() or [""])[0][:100]
        sys.stderr.write(f"{indent}<- {update['status']}: {first}\n")
    elif kind == "retry":
        sys.stderr.write(f"\n[retry {update['attempt']} in {update['delaySeconds']}s: {update['reason']}]\n")
    elif kind == "compaction":
        sys.stderr.write(f"\n[context compacted: {update['before']} -> {update['after']} messages]\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prompt", nargs="*")
    ap.add_argument("--workspace", default=os.getcwd())
    ap.add_argument("--config")
    ap.add_argument("--daemon", default="toycoder-daemon", help="daemon command (default: toycoder-daemon)")
    ap.add_argument("--approve", choices=["ask", "allow", "deny"], default="ask")
    args = ap.parse_args()

    cmd = args.daemon.split() + (["--config", args.config] if args.config else [])
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    inbox = queue.Queue()
    threading.Thread(target=read_frames, args=(proc.stdout, inbox), daemon=True).start()
    next_id = [0]

    def call(method, params):
        """Send a request and serve everything that arrives until its answer does."""
        next_id[0] += 1
        my_id = next_id[0]
        send(proc, {"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            msg = inbox.get()
            if msg is None:
                sys.exit("toycoder: the daemon exited")
            if msg.get("method") == "toycoder/update":
                show_update(msg["params"])
            elif msg.get("method") == "window/showMessage":
                sys.stderr.write(f"[daemon] {msg['params']['message']}\n")
            elif "method" in msg and "id" in msg:  # a request from the daemon
                handler = {"toycoder/requestPermission": decide, "toycoder/askUser": answer_question}.get(msg["method"])
                result = handler(msg["params"], args.approve) if handler else None
                send(proc, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(msg["error"]["message"])
                return msg["result"]

    call("initialize", {"processId": os.getpid(), "rootUri": Path(args.workspace).resolve().as_uri(),
                        "capabilities": {"experimental": {"toycoder": {"permissionRequest": True, "askUser": True}}}})
    send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    session = call("toycoder/session/new", {})
    prompts = [" ".join(args.prompt)] if args.prompt else iter(lambda: input("\n> ").strip(), "")
    status = 0
    try:
        for text in prompts:
            try:
                result = call("toycoder/prompt", {"sessionId": session["sessionId"], "text": text})
            except RuntimeError as e:
                sys.stderr.write(f"\n[error] {e}\n")
                status = 1
                continue
            u = result["usage"]
            sys.stderr.write(f"\n[{result['stopReason']}; tokens: {u['promptTokens']} in, {u['completionTokens']} out]\n")
    except (EOFError, KeyboardInterrupt):
        pass
    proc.stdin.close()  # the daemon exits when its stdin closes
    proc.wait(timeout=10)
    return status


if __name__ == "__main__":
    sys.exit(main())
