"""run_command: a shell line's analysis (its simple commands and the programs they run), the permission
verdict's inputs, and the command's OS sandbox (`sandbox/`: namespaces, Landlock, cgroups, the launcher).

May import: what `tools` may, and `tools`' base modules.
"""
