"""Prompt templates (YAML) and their rendering."""
