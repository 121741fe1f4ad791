"""toycoder: the terminal front of ToyCoder (a Rich + prompt_toolkit chat).

It runs `toycoder-daemon` as a subprocess and speaks only the wire protocol to it (docs/protocol.md);
the agent core is never imported here, so this package is also a worked example of a client.

    rpc.py     the daemon subprocess and LSP-framed JSON-RPC over its stdio (standard library)
    client.py  one conversation: turns, Ctrl-C -> toycoder/cancel, permission and ask_user answers
    render.py  Rich rendering: streamed Markdown, tool status lines, diff prompts, transcripts
    prompt.py  prompt_toolkit line editing, history file, slash-command completion
    main.py    the `toycoder` command: interactive, one-shot (-p), line mode
    demo.py    `toycoder --demo` with demo/script.json and demo/sample_project
"""
