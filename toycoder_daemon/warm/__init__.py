"""Warm starts: the launcher every launch runs, and the fork server it hands launches to."""
