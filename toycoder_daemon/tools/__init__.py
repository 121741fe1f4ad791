"""Tools the agent can call: `Tool` and `ToolContext` (base), the registry that dispatches them through
the permission gate, `ToolSettings`, and workspace confinement; one subpackage per kind of tool:
`files/`, `search/` (and the workspace's file listing for mentions, `file_index`), `shell/` (with its OS
`sandbox/`), `mcp/`, `plan/`; `diagnostics` (the editor's, after edits and as a tool).

May import: `core` and `config`. Never `agent` or higher: a tool that needs the agent is built per
session by the app. A new tool is an `@tool` function in the subpackage of its kind, added to
`app.factories.BUILTIN_TOOLS`.
"""

