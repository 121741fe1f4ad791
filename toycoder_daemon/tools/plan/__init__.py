"""update_plan, the model's task list for a turn, and plans written as text (the planner's answer).

May import: what `tools` may, and `tools`' base modules.
"""
