"""The core's vocabulary: the ports between the core and the faces (events, `Frontend`,
`PermissionRequest`, summaries), conversation messages, errors, permission modes; `util/` holds the
small utilities every layer uses.

May import: the standard library only (and `core.util`). Imported by every other subpackage.
A new event or port type goes in `ports.py`; a new error in `errors.py`; a helper with no domain
knowledge in `util/`.
"""
