"""The composition root: `App` (application.py) builds config, models, tools and prompts and keeps
what spans sessions (the store, the open sessions); `runtime.SessionRuntime` is one open session and
the prompt's pipeline on it; `factories` makes what the config asks for; `settings` which model a
session uses; `session_mcp` the MCP servers; `session_hooks` a session's hook events outside the
loop; `trust` the workspace's settings file, applied after trust; `attachments` a prompt's context
items and mentions.

May import: every layer below (core, config, llm, tools, agent, sessions, checkpoints, commands,
prompts). Never imported by them. A core method a face calls goes on `App` (spanning sessions) or
`SessionRuntime` (one session).
"""
