"""The faces: JSON-RPC adapters of the App. `main` is the daemon's cold main (arguments, the protocol
stream kept apart from stdout, logs, a face); `lsp/` is the LSP-framed face on pygls, `acp/` the Agent
Client Protocol face on the ACP SDK.

May import: `app` and everything below it, `wire`, `rpc`. A new face is a subpackage here that opens
`App` and adapts its protocol to App's methods and a `Frontend`.
"""
