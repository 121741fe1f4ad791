"""The agent engine: the ReAct loop (`react.run_turn`), sub-agents, and hooks (`hooks/`, run at its events).

May import: `core`, `config`, `llm`, `tools`. A new kind of sub-agent goes in `subagent.py`.
"""

