"""MCP (Model Context Protocol) servers: each configured server's connection and tools, their naming,
how their results read to the model, and the stdio transport we own.

May import: what `tools` may, and `tools`' base modules.
"""
