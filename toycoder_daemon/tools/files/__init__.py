"""The file tools (read_file, list_directory, write_file, edit_file) and how they touch the disk:
regular files only, no symlink races, the editor's unsaved text preferred, bounded line reading.

May import: what `tools` may, and `tools`' base modules.
"""
