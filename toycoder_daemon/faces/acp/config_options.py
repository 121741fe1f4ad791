"""ACP session config options: the `model` select (category `model`: each provider's roles and the
models its server lists) and the `mode` select (category `mode`), sent with session/new, load,
resume and fork, switched by `session/set_config_option`, and sent again as `config_option_update`
when /model, /mode or set_mode change them (agent.py's hook), or when the provider's list of models,
asked right after a session's answer, adds to them. Built with the SDK's public models
(agent-client-protocol 0.12.1) and dumped as the wire has them.

A model's value is `provider:name`; a role (default, fast) is shown on the model it names, so a
value is never listed twice and the current one always matches an option.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp import RequestError
from acp.schema import SessionConfigOptionSelect, SessionConfigSelectGroup, SessionConfigSelectOption

from toycoder_daemon.app.application import App
from toycoder_daemon.commands.served import with_served
from toycoder_daemon.core.errors import ConfigError, ToyCoderError
from toycoder_daemon.core.modes import MODES
from toycoder_daemon.core.ports import ModelsInfo
from toycoder_daemon.sessions.session import Session

log = logging.getLogger(__name__)

MODEL, MODE = "model", "mode"
SERVED_WAIT = 2.0
"""Seconds a session's answer waits for the provider to list its models (then: the configured ones)."""


async def served_info(app: App, s: Session, *, ask: bool) -> ModelsInfo:
    """The session's models with what the current provider's server lists: as the model client
    knows it, or (`ask`) asked when it does not know yet (cached after); a slow or broken provider
    leaves the configured names."""
    info = app.models_info(s.id)
    if not ask:  # no request, and no suspension: an answer racing the end of input still goes out
        return await with_served(app, info, s, ask_server=False)
    try:
        return await asyncio.wait_for(with_served(app, info, s), SERVED_WAIT)
    except (asyncio.TimeoutError, ToyCoderError) as e:
        log.info("the models of %s not listed: %s", info.provider, e or "timeout")
        return info


def model_option(info: ModelsInfo) -> SessionConfigOptionSelect:
    groups: list[SessionConfigSelectGroup] = []
    for p in info.providers:
        roles: dict[str, list[str]] = {}
        for role, name in p.models.items():
            roles.setdefault(name, []).append(role)
        names = list(roles) + [m for m in p.served or () if m not in roles]
        if p.name == info.provider and info.model not in names:
            names.append(info.model)  # a name chosen by /model that neither config nor server lists
        groups.append(SessionConfigSelectGroup(group=p.name, name=p.name, options=[
            SessionConfigSelectOption(value=f"{p.name}:{n}", name=f"{n} ({', '.join(roles[n])})" if n in roles else n)
            for n in names]))
    return SessionConfigOptionSelect(id=MODEL, name="Model", category="model", type="select",
                                     current_value=f"{info.provider}:{info.model}", options=groups,
                                     description="The model this session's turns use")


def mode_option(mode: str) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(id=MODE, name="Mode", category="mode", type="select", current_value=mode,
                                     description="What runs without asking", options=[
        SessionConfigSelectOption(value=m, name=name, description=d) for m, (name, d) in MODES.items()])


async def options(app: App, s: Session, *, ask: bool = False) -> list[SessionConfigOptionSelect]:
    """The session's config options (only the mode while the config is broken). Without `ask`, no
    request is made: a session's answer never waits for the provider (agent.py asks after it)."""
    out = [mode_option(s.mode)]
    if not app.config_error:
        out.insert(0, model_option(await served_info(app, s, ask=ask)))
    return out


def dumped(opts: list[SessionConfigOptionSelect]) -> list[dict[str, Any]]:
    return [o.model_dump(mode="json", by_alias=True, exclude_none=True) for o in opts]


def apply(app: App, session_id: str, config_id: str, value: Any) -> None:
    """session/set_config_option's change; a bad id or value is -32602."""
    if not isinstance(value, str):
        raise RequestError.invalid_params({"value": f"a select takes a string, not {value!r}"})
    if config_id == MODE:
        try:
            app.set_mode(session_id, value)
        except ValueError as e:
            raise RequestError.invalid_params({"value": str(e)}) from None
    elif config_id == MODEL:
        provider, sep, name = value.partition(":")
        if not sep or not name:
            raise RequestError.invalid_params({"value": f"not provider:model: {value!r}"})
        try:
            app.set_model(session_id, provider, name)
        except ConfigError as e:
            raise RequestError.invalid_params({"value": str(e)}) from None
    else:
        raise RequestError.invalid_params({"configId": f"unknown config option {config_id!r}: one of {MODEL}, {MODE}"})
