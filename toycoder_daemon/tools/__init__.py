"""Tools the agent can call, the registry that dispatches them, and the permission gate."""
