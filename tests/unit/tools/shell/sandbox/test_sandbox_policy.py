"""Sandbox policy as data, without starting processes: the plan per machine and per call, what the
person is shown, when a call escalates, how refused writes are explained, and the reports (as
--check-config prints them: e2e/test_sandbox_policy_e2e.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toycoder_daemon.app.factories import tool_settings
from toycoder_daemon.config.model import Config, RunCommandConfig, ToolsConfig
from toycoder_daemon.tools.settings import ToolSettings
from toycoder_daemon.tools.shell.sandbox import landlock, observe, probe
from toycoder_daemon.tools.shell.sandbox.policy import Plan, Policy, escalation, plan

FULL = probe.Support("linux", 7, True, True)
NO_NAMESPACES_OLD_KERNEL = probe.Support("linux", 3, False, False)
NO_LANDLOCK = probe.Support("linux", 0, True, True)
MACOS = probe.Support("darwin", 0, False, False)


def test_policy_comes_from_the_config_section() -> None:
    config = Config(tools=ToolsConfig(run_command=RunCommandConfig(sandbox="required", writable=["~/cache"], network=True)))
    assert Policy.from_settings(tool_settings(config)) == Policy("required", ("~/cache",), True)
    assert Policy.from_settings(ToolSettings()) == Policy("auto", (), False)
    assert Config().tools.run_command.sandbox == "auto" and Config().tools.run_command.network is False


def test_bad_mode_is_a_config_error() -> None:
    with pytest.raises(ValueError):
        RunCommandConfig(sandbox="sometimes")  # type: ignore[arg-type]


def test_default_plan_writes_workspace_and_temp_only_with_git_read_only(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    p = plan(Policy(writable=("build-out", "/opt/cache")), tmp_path, "/tmp/private", FULL, {})
    assert p.sandboxed and not p.network
    assert p.writable[:4] == [str(tmp_path.resolve()), "/tmp/private", str(tmp_path.resolve() / "build-out"),
                              "/opt/cache"]
    assert "/tmp" not in p.writable and "/" not in p.writable
    assert p.readonly == [str(tmp_path.resolve() / ".git")]
    assert p.describe() == "sandbox: workspace-write, network off"
    allowed = plan(Policy(writable=(".git",)), tmp_path, None, FULL, {})
    assert allowed.readonly == []


def test_git_cannot_be_read_only_without_mount_namespaces(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    p = plan(Policy(), tmp_path, None, NO_NAMESPACES_OLD_KERNEL, {})
    assert p.sandboxed and p.readonly == []
    assert p.describe() == ("sandbox: workspace-write, network on (it cannot be turned off on this kernel), "
                            ".git writable (no mount namespace here)")
    with_tcp_rules = plan(Policy(), tmp_path, None, probe.Support("linux", 4, False, False), {})
    assert with_tcp_rules.describe() == "sandbox: workspace-write, network off, .git writable (no mount namespace here)"


def test_network_off_needs_a_namespace_or_landlock_tcp(tmp_path: Path) -> None:
    old = probe.Support("linux", 3, False, False)  # ABI 3: no TCP rules, and no namespaces
    assert plan(Policy("required"), tmp_path, None, old, {}).refusal == \
        "the network cannot be turned off on this kernel"
    assert plan(Policy("required", network=True), tmp_path, None, old, {}).sandboxed
    auto = plan(Policy(), tmp_path, None, old, {})  # writes and processes are still confined
    assert auto.sandboxed and auto.network
    assert auto.describe() == "sandbox: workspace-write, network on (it cannot be turned off on this kernel)"
    assert NO_NAMESPACES_OLD_KERNEL.network_isolation is None
    assert probe.Support("linux", 4, False, False).network_isolation == "Landlock TCP rules"


@pytest.mark.parametrize("support, problem", [(NO_LANDLOCK, "this kernel has no Landlock"),
                                              (MACOS, "no sandbox is implemented for darwin")])
def test_auto_runs_unsandboxed_and_required_refuses(tmp_path: Path, support: probe.Support, problem: str) -> None:
    auto = plan(Policy("auto"), tmp_path, None, support, {})
    assert not auto.sandboxed and auto.unavailable == problem and auto.network
    assert auto.describe() == f"sandbox: unavailable ({problem}), runs unsandboxed, network on"
    required = plan(Policy("required"), tmp_path, None, support, {})
    assert not required.sandboxed and required.refusal == problem
    assert "the command will not run" in required.describe()


def test_escalation_is_leaving_the_sandbox_or_asking_for_network(tmp_path: Path) -> None:
    assert escalation(Policy(), {"command": "ls"}) is None
    assert escalation(Policy(), {"command": "ls", "sandbox": True, "network": False}) is None
    assert "outside the sandbox" in (escalation(Policy(), {"sandbox": False}) or "")
    assert escalation(Policy(), {"network": True}) == "it asks for network access"
    assert escalation(Policy(network=True), {"network": True}) is None  # the config already allows it
    assert escalation(Policy("off"), {"sandbox": False}) is None  # nothing to leave
    off = plan(Policy(), tmp_path, None, FULL, {"sandbox": False})
    assert not off.sandboxed and off.describe().startswith("sandbox: OFF because it asks to run outside")
    net = plan(Policy(), tmp_path, None, FULL, {"network": True})
    assert net.sandboxed and net.network and net.describe() == "sandbox: workspace-write, network on"
    assert plan(Policy("off"), tmp_path, None, FULL, {}).describe() == \
        "sandbox: off (tools.run_command.sandbox), network on"


def test_landlock_rights_degrade_by_abi() -> None:
    assert not landlock.write_rights(1) & (landlock.FS_REFER | landlock.FS_TRUNCATE)
    assert landlock.write_rights(2) & landlock.FS_REFER and not landlock.write_rights(2) & landlock.FS_TRUNCATE
    assert landlock.write_rights(3) & landlock.FS_TRUNCATE
    for abi in (1, 7):  # reading and executing are never handled, so never confined
        assert not landlock.write_rights(abi) & (landlock.FS_READ_FILE | landlock.FS_READ_DIR | landlock.FS_EXECUTE)


def test_scopes_follow_the_abi_and_the_network() -> None:
    assert landlock.scopes(5, network=False) == 0  # the kernel would refuse a scoped ruleset
    assert landlock.scopes(6, network=True) == landlock.SCOPE_SIGNAL
    assert landlock.scopes(7, network=False) == landlock.SCOPE_SIGNAL | landlock.SCOPE_ABSTRACT_UNIX_SOCKET


@pytest.mark.parametrize("support, exposed", [
    (FULL, False), (probe.Support("linux", 5, True, True), False), (probe.Support("linux", 6, False, False), True),
    (probe.Support("linux", 5, False, False), True), (NO_NAMESPACES_OLD_KERNEL, True)])
def test_reports_say_when_a_command_can_escape_its_supervisor(support: probe.Support, exposed: bool) -> None:
    report = support.report()
    assert report["signalsScoped"] == (support.landlock >= 6)
    assert bool(report["supervisorExposed"]) == exposed
    assert ("NOT against a hostile command" in support.summary()) == exposed


def test_the_simulation_switch_hides_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(landlock.SIMULATE_ENV, "1")
    assert landlock.abi_version() == 0
    with pytest.raises(landlock.LandlockError):
        landlock.restrict(["/tmp"], abi=0, block_tcp=False, network=False)


WS = "/work/ws"
SANDBOXED = Plan(True, False, [WS, "/tmp/toycoder-cmd-1", "/dev/null"], [f"{WS}/.git"])


@pytest.mark.parametrize("output, expected", [
    ("/bin/sh: 1: cannot create /etc/x.conf: Permission denied", ["/etc/x.conf is outside the writable roots"]),
    ("touch: cannot touch '/outside/a b': Permission denied", ["/outside/a b is outside the writable roots"]),
    ("PermissionError: [Errno 13] Permission denied: '/outside/report.xml'",
     ["/outside/report.xml is outside the writable roots"]),
    ("sh: 1: cannot create .git/HEAD: Read-only file system",
     [f"{WS}/.git/HEAD is in the workspace's .git, which the sandbox keeps read-only"]),
    ("rm: cannot remove '../sibling/f': Operation not permitted", ["/work/sibling/f is outside the writable roots"]),
    ("cannot create build/out.o: Permission denied", []),  # inside the workspace: not the sandbox's doing
    ("wrote /outside/f fine", []),  # no refusal on the line
])
def test_blocked_writes_are_named(output: str, expected: list[str]) -> None:
    found = [f"{path} {why}" for path, why in observe.blocked_paths(output, SANDBOXED, WS, lambda _: True)]
    assert found == expected


def test_a_refusal_the_daemon_would_meet_too_is_not_blamed_on_the_sandbox(tmp_path: Path) -> None:
    line = "ls: cannot open directory '/root/private': Permission denied"
    assert observe.blocked_paths(line, SANDBOXED, WS, lambda _: False) == []
    assert observe.blocked_paths(line, SANDBOXED, WS, lambda _: True) != []
    # the real check looks at the nearest existing ancestor
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    try:
        assert observe.daemon_could_write(str(tmp_path / "new" / "deeper")) is True
        expected = os.geteuid() == 0  # root may write anywhere, so only the sandbox can refuse it
        assert observe.daemon_could_write(str(tmp_path / "ro" / "f")) is expected
    finally:
        os.chmod(tmp_path / "ro", 0o755)


def test_explain_adds_the_way_forward_only_when_something_was_blocked() -> None:
    text = observe.explain("touch: cannot touch '/etc/x': Permission denied", SANDBOXED, WS, lambda _: True)
    assert text.splitlines()[0] == "blocked by the sandbox: /etc/x is outside the writable roots"
    assert "sandbox: false" in text
    assert observe.explain("all good", SANDBOXED, WS) == ""
    net = observe.explain("OSError: [Errno 101] Network is unreachable", SANDBOXED, WS)
    assert "network: true" in net
    unsandboxed = Plan(False, True)
    assert observe.explain("touch: cannot touch '/etc/x': Permission denied", unsandboxed, WS) == ""
