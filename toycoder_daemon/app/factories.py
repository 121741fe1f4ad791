"""What the composition root makes from the config: the production model factory, the tools'
settings, the sub-agents and the catalog of tools. Tests hand App their own model factory instead (a scripted model)."""

from __future__ import annotations

from toycoder_daemon.agent.subagent import SubAgent, subagent_tool
from toycoder_daemon.config.model import Config
from toycoder_daemon.core.errors import ProviderError
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.llm.pool import ModelFactory
from toycoder_daemon.prompts.manager import PromptManager
from toycoder_daemon.tools import arg_schemas
from toycoder_daemon.tools.ask import ask_user
from toycoder_daemon.tools.diagnostics import get_diagnostics
from toycoder_daemon.tools.files.edit import edit_file, write_file
from toycoder_daemon.tools.files.read import list_directory, read_file
from toycoder_daemon.tools.permission import PermissionGate
from toycoder_daemon.tools.plan.tool import update_plan
from toycoder_daemon.tools.registry import ToolRegistry
from toycoder_daemon.tools.search.tools import glob_search, grep_search
from toycoder_daemon.tools.settings import RunCommandSettings, ToolSettings
from toycoder_daemon.tools.shell.run_command import run_command


def openai_models(config: Config) -> ModelFactory:
    """The production model factory: OpenAI-compatible clients with the config's keys and retries."""

    def make(provider_name: str, model_name: str) -> ChatModel:
        from toycoder_daemon.llm.openai_client import OpenAIChatModel  # imported after initialize (App.start), not before it

        provider = config.providers[provider_name]
        if not provider.api_keys:
            raise ProviderError(
                provider_name,
                f"no API key configured: set providers.{provider_name}.api_keys in the config "
                "(the built-in defaults and the shipped config.yaml read $OPENAI_API_KEY)",
            )
        a = config.agent
        return OpenAIChatModel(
            provider_name, model_name, provider.base_url, provider.api_keys,
            max_retries=a.max_retries, retry_interval=a.retry_interval, max_retry_delay=a.max_retry_delay,
            max_retry_seconds=a.max_retry_seconds, request_timeout=a.request_timeout,
            max_tokens=provider.max_tokens_for(model_name), token_field=provider.token_field, quirks=provider.quirks,
        )

    return make


def tool_settings(config: Config) -> ToolSettings:
    t = config.tools
    return ToolSettings(read_max_bytes=t.read_max_bytes, read_default_lines=t.read_default_lines,
                        list_max_entries=t.list_max_entries, command_timeout=t.command_timeout,
                        command_max_timeout=t.command_max_timeout, output_max_bytes=t.output_max_bytes,
                        run_command=RunCommandSettings(t.run_command.sandbox, tuple(t.run_command.writable),
                                                       t.run_command.network),
                        diagnostics_wait_ms=t.diagnostics.wait_ms, diagnostics_level=t.diagnostics.level)


def subagents(config: Config, prompts: PromptManager) -> list[tuple[SubAgent, str]]:
    """The built-in planner and the configured sub-agents, each with the description the main
    agent reads to decide when to call it."""
    agents = [SubAgent("planner", "planner", prompts.system("planner"), [], "default", 1)]
    for name, d in config.agents.items():
        role = d.prompt or name
        agents.append(SubAgent(name, role, prompts.system(role), d.tools, d.model, d.max_steps))
    out = []
    for agent in agents:
        described = config.agents[agent.name].description if agent.name in config.agents else None
        out.append((agent, described or prompts.description(agent.prompt)))
    return out


BUILTIN_TOOLS = (read_file, list_directory, glob_search, grep_search, write_file, edit_file, run_command, ask_user,
                 update_plan, get_diagnostics)


def prepare() -> None:
    """For the fork server (warm/server.py's PREPARE): the built-in tools' schemas (their signature
    keys, the shipped schemas.json) made before the forks, not at each warm child's first turn."""
    for t in BUILTIN_TOOLS:
        t.schema()


def tool_schema_file() -> str:
    """tools/schemas.json as the built-in tools and the sub-agents' tool make it now."""
    agent = subagent_tool(SubAgent("planner", "planner", "", [], "default", 1), "", None)
    return arg_schemas.generate({t.name: t.args for t in (*BUILTIN_TOOLS, agent) if t.args is not None})


def tool_catalog(config: Config, agents: list[tuple[SubAgent, str]]) -> ToolRegistry:
    """The app's registry: built-in tools and unbound sub-agents (each session forks it and binds
    its own sub-agents); the config's permission rules and enabled tools applied."""
    perms = config.permissions
    registry = ToolRegistry(PermissionGate(perms.allow, perms.deny))
    for t in BUILTIN_TOOLS:
        registry.register(t)
    for agent, description in agents:
        registry.register(subagent_tool(agent, description, None))
    for name in config.tools.enabled:
        if registry.get(name):
            registry.set_enabled(name, True)
    return registry


if __name__ == "__main__":  # regenerate tools/schemas.json after changing a tool's parameters
    arg_schemas.SCHEMA_FILE.write_text(tool_schema_file(), encoding="utf-8")
