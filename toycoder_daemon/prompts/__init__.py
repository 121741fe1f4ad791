"""Prompt templates (YAML) and their rendering.

May import: `core`, `config`.
"""

