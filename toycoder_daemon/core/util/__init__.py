"""Small utilities with no domain knowledge: atomic file writes, JSON that cannot fail on odd text,
secrets redaction, blanking keys in the process environment, the OS keyring (secret-tool), logging,
background tasks.

May import: the standard library and `core`. A new utility goes here only if every layer could use it.
"""
