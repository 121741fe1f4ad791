"""docs/protocol.md and docs/protocol.schema.json cannot drift from protocol.py."""

from __future__ import annotations

import json
import re

from helpers import ROOT

from toycoder_daemon.faces.lsp.server import make_server
from toycoder_daemon.wire import protocol as wire

DOC = (ROOT / "docs" / "protocol.md").read_text()


def declared_methods() -> set[str]:
    return {v for k, v in vars(wire).items() if k.isupper() and isinstance(v, str) and v.startswith("toycoder/")}


def test_every_method_is_documented_and_every_documented_method_exists() -> None:
    documented = set(re.findall(r"`(toycoder/[A-Za-z/]+)[` ]", DOC))
    assert documented == declared_methods()


def test_the_method_table_covers_every_method_and_the_server_registers_it() -> None:
    table = [*wire.REQUESTS, *wire.NOTIFICATIONS, *wire.DAEMON_REQUESTS]
    assert sorted(r.method for r in table) == sorted(declared_methods())
    registered = set(make_server().protocol.fm.features)
    assert {r.method for r in wire.REQUESTS} <= registered
    assert not {r.method for r in (*wire.NOTIFICATIONS, *wire.DAEMON_REQUESTS)} & registered


def test_every_error_code_is_documented() -> None:
    codes = {v for k, v in vars(wire).items() if k.isupper() and isinstance(v, int) and v < 0}
    documented = {int(c) for c in re.findall(r"^\| (-\d+) \|", DOC, re.MULTILINE)}
    assert codes == documented


def test_every_update_kind_is_documented() -> None:
    from typing import get_args

    kinds = {m.model_fields["kind"].default for m in get_args(get_args(wire.Update)[0])}
    assert len(kinds) == 15
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", DOC, re.MULTILINE))
    assert kinds <= documented


def test_schema_export_is_current() -> None:
    exported = json.loads((ROOT / "docs" / "protocol.schema.json").read_text())
    assert exported == wire.json_schema(), "run: python -m toycoder_daemon.wire.protocol > docs/protocol.schema.json"


def test_the_command_list_names_every_command_and_only_what_the_repository_has() -> None:
    from toycoder_daemon.commands.builtin import commands

    listed = DOC.split("## Slash commands", 1)[1].split("\n## ", 1)[0]
    missing = [c.name for c in commands.all() if f"`/{c.name}" not in listed]
    assert not missing, f"docs/protocol.md's command list lacks {missing}"
    assert "DESIGN.md" not in DOC and "spine issue" not in DOC  # nothing a reader of the repository cannot find
