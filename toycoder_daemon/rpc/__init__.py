"""Transport-neutral JSON-RPC parts both faces share: envelope checks, the outbox (one writer thread
with backpressure), waiting for a client's reply, coalescing streamed text, and the framing of each
stream kind (LSP headers, newline-delimited JSON).

May import: `core` and `wire`. Nothing here knows pygls, the ACP SDK or the App.
"""
