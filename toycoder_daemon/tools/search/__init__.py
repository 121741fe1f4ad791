"""The search tools (glob_search, grep_search): ripgrep found and run, its flags and output read, the
scope of a search, and the collectors that keep what can be shown.

May import: what `tools` may, and `tools`' base modules.
"""
