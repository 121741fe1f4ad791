"""run_command's OS sandbox (Linux): Landlock for writes, namespaces for network and processes.

policy (config as data, the plan per command), landlock (ctypes), contain (namespaces, mounts,
reaping), tree (finding and killing a command's processes by pidfd), cgroups (a cgroup v2 per
command, killed whole), launch (the process that applies it all before exec; boot, its light
entry), probe (what this machine offers), observe (explaining refused writes), command
(run_command's glue). Kept import-free: the launcher imports this package on every command.
"""
