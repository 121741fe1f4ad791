"""Conversations: the session objects and where they are kept."""
