"""The LSP-framed face: pygls from the first byte to the last. `server` registers one pygls feature
per row of the method table; `calls` validates params and maps core errors; `mapping` is the one place
core values become wire models; `frontend` is the `Frontend` a turn talks to the editor through;
`transport` wraps only the streams pygls reads and writes; `converter` keeps custom params plain dicts.

May import: what `faces` may. A new request's handler goes in `server.HANDLERS`.
"""
