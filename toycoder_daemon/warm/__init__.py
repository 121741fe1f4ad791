"""Warm starts: the launcher every launch runs (standard library only), the fork server it hands
launches to, and what a forked child does to become the launch's daemon.

May import: anything (the server preloads the faces); the launcher imports nothing of ours but
itself. docs/architecture.md, "Launcher and fork server", explains the security model.
"""

