"""LLM layer: the ChatModel port and the OpenAI-compatible implementation."""
