"""The wire contract: the method table that binds each `toycoder/*` method to its params and result
models (protocol.py), error codes and timestamps (codes.py), the JSON Schema export and the generated
TypeScript types (typescript.py).

May import: `core` and `config` (field docs). A new method is a row in `protocol.REQUESTS`; then
regenerate clients/vscode/src/shared/protocol.ts (`python -m toycoder_daemon.wire.typescript`).
"""
