"""The ACP registry entry (issue 31): acp/agent.json is valid against the registry's own schema (a vendored
copy in registry/), its version and the uvx package it installs are the package's version, it runs the
ACP face (`--acp`), and its icon is a well-formed SVG. The auth method the registry also requires:
test_acp_auth.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
from helpers import ROOT

from toycoder_daemon import __version__

SCHEMA = Path(__file__).with_name("registry") / "agent.schema.json"
ENTRY = ROOT / "acp" / "agent.json"


def test_the_entry_is_valid_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    entry = json.loads(ENTRY.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    errors = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(entry)]
    assert errors == []
    broken = {**entry, "id": "ToyCoder", "distribution": {"pip": {}}}  # the check can fail
    assert len(list(jsonschema.Draft7Validator(schema).iter_errors(broken))) == 2


def test_the_entry_is_tied_to_the_package_version_and_runs_the_acp_face() -> None:
    entry = json.loads(ENTRY.read_text())
    assert entry["id"] == "toycoder"
    assert entry["version"] == __version__, "acp/agent.json's version must be toycoder_daemon.__version__"
    assert entry["distribution"] == {"uvx": {"package": f"toycoder-daemon=={__version__}", "args": ["--acp"]}}


def test_the_icon_is_an_svg_next_to_the_entry() -> None:
    entry = json.loads(ENTRY.read_text())
    icon = (ENTRY.parent / entry["icon"]).resolve()
    assert icon.is_relative_to(ENTRY.parent) and icon.suffix == ".svg"
    assert ET.parse(icon).getroot().tag == "{http://www.w3.org/2000/svg}svg"
