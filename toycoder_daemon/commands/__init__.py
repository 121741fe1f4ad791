"""Slash commands, served by the daemon so every client gets them; written against `CommandContext`
and `CommandHost` (context.py). A new command is a handler in `builtin.py` registered with
`@commands.add(...)`. Custom commands from Markdown files and MCP prompts as commands: `custom.py`.

May import: `core`, `config`, `llm`, `tools`, `agent`, `sessions`, `checkpoints`, `prompts`.
"""

