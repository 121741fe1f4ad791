"""ToyCoder daemon: a coding agent hosted in a long-running process, spoken to over JSON-RPC."""

__version__ = "0.1.0"
