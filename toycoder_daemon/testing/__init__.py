"""Test and demo helpers: the scripted model (in-process) and the fake OpenAI-compatible server.

May import: anything. Nothing in the package imports it (the demo runs the fake server as a process).
"""

