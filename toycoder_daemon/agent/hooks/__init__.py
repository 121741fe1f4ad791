"""Hooks: commands the person configures to run on agent events (Claude Code's `hooks` shape),
which fail closed (docs/hooks.md). `engine` matches, runs (through run_command's process and sandbox
code) and merges them; the ReAct loop and the session runtime call it at each event."""
