"""The agent engine: the ReAct loop (`react.run_turn`) and sub-agents.

May import: `core`, `config`, `llm`, `tools`. A new kind of sub-agent goes in `subagent.py`.
"""

