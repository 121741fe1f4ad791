"""The agent engine: the ReAct loop and its typed events."""
