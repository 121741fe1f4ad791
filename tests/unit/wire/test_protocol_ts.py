"""The VS Code client's TypeScript types are generated from protocol.py and must be current."""

from __future__ import annotations

from helpers import ROOT

from toycoder_daemon.wire import protocol as wire
from toycoder_daemon.wire.typescript import generate, ts_type

TS = ROOT / "clients" / "vscode" / "src" / "shared" / "protocol.ts"


def test_generated_typescript_is_current() -> None:
    assert TS.read_text() == generate(), (
        "stale: python -m toycoder_daemon.wire.typescript > clients/vscode/src/shared/protocol.ts")


def test_every_table_type_and_method_is_in_the_typescript() -> None:
    text = generate()
    for m in wire.wire_models():
        assert f" {m.__name__} " in text, m.__name__
    for r in (*wire.REQUESTS, *wire.NOTIFICATIONS, *wire.DAEMON_REQUESTS):
        assert f"'{r.method}'" in text


def test_optional_and_defaulted_fields() -> None:
    text = generate()
    assert "  changedPaths?: string[];" in text  # None by default: never sent as null
    assert "  aliases: string[];" in text  # a non-None default is always sent
    assert "export type StopReason = 'end_turn' | 'max_steps' | 'max_tokens' | 'cancelled' | 'error' | 'command';" in text
    assert ts_type(dict[str, int]) == "Record<string, number>"
