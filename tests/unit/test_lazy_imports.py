"""What a new process imports before its first answers (issue 17): the modules the first session and
turn never need stay out, and field docstrings are read only where the docs are generated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from toycoder_daemon.config import field_docs


def imported_by(code: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", f"{code}\nimport sys; print(sorted(sys.modules))"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    modules: list[str] = eval(p.stdout)
    return modules


def test_the_lsp_face_imports_no_sandbox_acp_sdk_or_http_client() -> None:
    modules = imported_by("import toycoder_daemon.faces.lsp.server, toycoder_daemon.faces.lsp.transport")
    assert "toycoder_daemon.app.application" in modules and "toycoder_daemon.tools.shell.run_command" in modules and "pygls" in modules
    heavy = [m for m in modules if m.startswith(("toycoder_daemon.tools.shell.sandbox", "acp", "httpx", "openai", "mcp"))]
    assert heavy == []


def test_the_faces_leave_the_shell_analysis_the_search_layer_and_difflib_to_their_first_use() -> None:
    modules = imported_by("import toycoder_daemon.faces.lsp.server, toycoder_daemon.faces.lsp.transport, toycoder_daemon.faces.acp.agent")
    assert "toycoder_daemon.tools.permission" in modules and "toycoder_daemon.tools.search.tools" in modules
    late = [m for m in modules if m.startswith(("toycoder_daemon.tools.shell.programs", "toycoder_daemon.tools.shell.words",
                                                 "toycoder_daemon.tools.search.rg_runs", "toycoder_daemon.tools.search.scope",
                                                 "difflib"))]
    assert late == []


def test_the_acp_face_takes_codes_and_timestamps_from_protocol_codes_not_the_wire_models() -> None:
    # the ACP face speaks the SDK's types; protocol.py's ~50 models would cost each new process ~12 ms
    modules = imported_by("import toycoder_daemon.faces.acp.agent")
    assert "toycoder_daemon.wire.codes" in modules and "toycoder_daemon.faces.acp.turn" in modules
    assert [m for m in modules if m.startswith("toycoder_daemon.wire.protocol") and m != "toycoder_daemon.wire.codes"] == []


def test_the_acp_face_imports_no_sandbox_http_client_or_lsp_library_before_its_first_use() -> None:
    modules = imported_by("import toycoder_daemon.faces.acp.agent")
    assert "acp" in modules and "toycoder_daemon.app.application" in modules
    heavy = [m for m in modules if m.startswith(("toycoder_daemon.tools.shell.sandbox", "pygls", "lsprotocol", "httpx",
                                                 "openai", "mcp", "toycoder_daemon.tools.shell.programs", "difflib"))]
    assert heavy == []


def test_no_tool_argument_model_is_built_by_opening_an_app_and_offering_its_tools(tmp_path: Path) -> None:
    # the first turn offers the shipped schemas (tools/schemas.json); models wait for the first call
    code = ("import os, sys\n"
            f"os.environ['TOYCODER_DATA_DIR'] = {str(tmp_path / 'data')!r}\n"
            "from toycoder_daemon.app.application import App\n"
            "from toycoder_daemon.config.model import Config\n"
            "from toycoder_daemon.tools import arg_schemas\n"
            f"app = App({str(tmp_path)!r}, Config())\n"
            "s = app.new_session()\n"
            "assert len(s.tools.schemas()) >= 9\n"
            "print(sorted(arg_schemas._models))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_models_do_not_read_their_field_docstrings_when_created() -> None:
    # pydantic would read the source of every class (use_attribute_docstrings): ~25 ms per process
    code = ("import pydantic._internal._fields as f\n"
            "seen = []\n"
            "orig = f._update_fields_from_docstrings\n"
            "f._update_fields_from_docstrings = lambda cls, *a, **k: (seen.append(cls.__module__), orig(cls, *a, **k))\n"
            "import toycoder_daemon.faces.lsp.server, toycoder_daemon.faces.lsp.transport, toycoder_daemon.faces.acp.agent\n"
            "print([m for m in seen if m.startswith('toycoder_daemon')])\n"
            "import sys; sys.exit(0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


class _Inner(BaseModel):
    model_config = ConfigDict(defer_build=True)
    depth: int = 1
    """How deep,
    in lines."""


class _Outer(BaseModel):
    model_config = ConfigDict(defer_build=True)
    inner: _Inner
    """The inner one."""
    named: str = "x"
    """Given twice."""


class _Sub(_Outer):
    named: str = "y"


def test_document_fills_descriptions_as_pydantic_would_and_the_schema_carries_them() -> None:
    _Outer.model_json_schema()  # built before: the rebuild must still reach the nested schema
    field_docs.document([_Sub, _Outer])
    assert _Inner.model_fields["depth"].description == "How deep,\nin lines."
    assert _Outer.model_fields["named"].description == "Given twice."
    assert _Sub.model_fields["named"].description is None  # redeclared without a docstring
    schema = _Outer.model_json_schema()
    assert schema["properties"]["inner"]["description"] == "The inner one."
    assert schema["$defs"]["_Inner"]["properties"]["depth"]["description"] == "How deep,\nin lines."
