"""The output limit in-process (issue 18): a provider's per-model max_tokens, and a compaction summary cut
by the limit is not used. Cut replies through the daemon: e2e/test_length_limit_e2e.py."""

from __future__ import annotations

import pytest

from toycoder_daemon.config.model import Config
from toycoder_daemon.sessions.context import compact
from toycoder_daemon.testing.scripted_model import ScriptedModel


def test_per_model_output_limit_overrides_the_provider_default() -> None:
    cfg = Config.model_validate({"providers": {"local": {"max_tokens": 256, "model_max_tokens": {"big": 8000}}},
                                 "default_provider": "local"})
    _, p = cfg.provider()
    assert p.max_tokens_for("big") == 8000 and p.max_tokens_for("small") == 256
    with pytest.raises(ValueError):
        Config.model_validate({"providers": {"local": {"max_tokens": 0}}})


async def test_a_cut_compaction_summary_is_not_used() -> None:
    model = ScriptedModel([{"text": "The user asked abo", "finish_reason": "length"}])
    messages = [{"role": "system", "content": "sys"}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(12)]
    done = await compact(messages, model, "summarise", keep_recent=4)  # type: ignore[arg-type]
    assert done is not None and done.strategy == "truncate"
    assert not any("The user asked abo" in str(m["content"]) for m in done.messages)
