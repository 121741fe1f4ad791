"""Conversations: `Session`, `Conversation` (every mutation written), the session store and listing,
room-making and compaction, titles, and sharing one session between daemons.

May import: `core`, `config`, `llm`, `tools`, `agent`.
"""

