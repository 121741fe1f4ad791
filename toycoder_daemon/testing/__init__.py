"""Test and demo helpers (a scripted fake OpenAI-compatible model server)."""
