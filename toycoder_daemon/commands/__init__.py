"""Slash commands, served by the daemon so every client gets them."""
