"""The Agent Client Protocol face: the ACP SDK's public `Connection` from the first line to the last.
`agent` has one method per ACP method; `turn` runs a prompt; `frontend` is the `Frontend` of a turn;
`client` sends to the client; `content`, `fs`, `terminal`, `mcp`, `sessions` adapt one ACP area each.

May import: what `faces` may. A new ACP method goes on `agent.ToyCoderAgent`.
"""
