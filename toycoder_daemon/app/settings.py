"""Which model a session uses: the config's providers and roles, with the session's own choice
(/model, toycoder/models/set), over the daemon's model clients (llm/pool.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from toycoder_daemon.config.model import Config
from toycoder_daemon.core.errors import ConfigError
from toycoder_daemon.core.ports import ModelsInfo, ProviderSummary
from toycoder_daemon.core.util.secrets import shown_url
from toycoder_daemon.llm.base import ChatModel
from toycoder_daemon.llm.pool import ModelPool
from toycoder_daemon.sessions.session import Session


def _shown(url: str | None) -> str | None:
    """A base_url as toycoder/models/list shows it: never its userinfo."""
    return shown_url(url) if url else url


def _raise(error: ConfigError) -> ChatModel:
    raise error


class Models:
    def __init__(self, config: Config, config_error: ConfigError | None, pool: ModelPool):
        """`config_error`: the config could not be loaded; every model asked for raises it."""
        self.config, self.config_error, self.pool = config, config_error, pool

    def _require_config(self) -> Config:
        if self.config_error:
            raise self.config_error
        return self.config

    def current(self, s: Session | None) -> tuple[str, str]:
        """(provider, model name) the session uses (the config's default without one)."""
        name, provider = self._require_config().provider(s.provider if s else None)
        return name, (s.model if s and s.model else provider.models.default)

    def _names(self, s: Session | None, role: str | None) -> tuple[str, str]:
        provider_name, model_name = self.current(s)
        if role and role != "default":
            model_name = getattr(self.config.providers[provider_name].models, role)
        return provider_name, model_name

    def of(self, s: Session | None, role: str | None = None) -> ChatModel:
        """The session's model, or its provider's model for a role ("fast" for summaries and titles;
        "default" is the session's own)."""
        return self.pool.get(*self._names(s, role))

    def named(self, s: Session | None, spec: str) -> ChatModel:
        """The model a custom command's front matter names: `[provider:]model`, where model may be a
        role (default, fast); the session's provider when none is given. ConfigError if unknown."""
        provider, _, model = spec.rpartition(":")
        name, p = self._require_config().provider(provider or (s.provider if s else None))
        return self.pool.get(name, p.models.model_dump().get(model, model))

    def later(self, s: Session, role: str) -> Callable[[], ChatModel]:
        """The model `of(s, role)` names now, made when it is first called (a summary may never be
        needed); with a broken config, calling it raises the config's error, as `of` would."""
        try:
            return functools.partial(self.pool.get, *self._names(s, role))
        except ConfigError as e:
            return functools.partial(_raise, e)

    def made(self, s: Session) -> ChatModel | None:
        """The session's model if it was made already (what it reported of its context window)."""
        return self.pool.made(*self.current(s))

    def info(self, s: Session | None) -> ModelsInfo:
        provider, model = self.current(s)
        return ModelsInfo(provider, model, [ProviderSummary(n, _shown(p.base_url), p.models.model_dump(), len(p.api_keys))
                                            for n, p in self.config.providers.items()])

    def choose(self, s: Session, provider: str | None, model: str) -> None:
        """Switch the session to `model` of `provider` (its current one when None); "default" and
        "fast" name the provider's roles. ConfigError for an unknown provider."""
        name, p = self._require_config().provider(provider or s.provider)
        s.provider = name
        s.model = p.models.model_dump().get(model, model)
        s.changed()
